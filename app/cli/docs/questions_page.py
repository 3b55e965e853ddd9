"""The question-set YAML reference, from the bank's JSON Schema (`app.bank.schema.json_schema`)."""

from __future__ import annotations

import json

from app.cli.docs.markdown import cell, code, header

FIELD_NOTES = {
    ("QuestionSet", "title"): "The set's title, shown on its page and in lists.",
    (
        "QuestionSet",
        "description",
    ): "One or two sentences on what the set covers, shown on its page.",
    ("QuestionSet", "questions"): "The set's questions, in the order learners meet them.",
    ("MultipleChoiceQuestion", "tags"): "Slugs that group questions across topics.",
    ("PredictOutputQuestion", "tags"): "Slugs that group questions across topics.",
    ("MultipleChoiceQuestion", "choices"): "The choices, at least two, at least one of them right.",
}
"""Words for the fields the schema leaves undescribed (a test fails once the schema describes one,
so its own description is the one shown)."""

_SLUG = "^[a-z0-9]+(?:-[a-z0-9]+)*$"


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[1]


def _type(schema: dict) -> str:
    """A field's type in words, with links to the sections of the objects it holds."""
    if "$ref" in schema:
        name = _ref_name(schema["$ref"])
        return f"[{name}](#{name.lower()})"
    if "const" in schema:
        return f"`{schema['const']}`"
    if "anyOf" in schema:
        options = [s for s in schema["anyOf"] if s.get("type") != "null"]
        nullable = len(options) < len(schema["anyOf"])
        text = " or ".join(_type(s) for s in options)
        return f"{text} or null" if nullable else text
    if "oneOf" in schema:
        return " or ".join(_type(s) for s in schema["oneOf"])
    if "enum" in schema:
        return "one of " + ", ".join(f"`{v}`" for v in schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        return f"list of {_type(schema.get('items', {}))}"
    if kind == "object":
        keys = schema.get("propertyNames", {}).get("enum")
        values = (
            _type(schema.get("additionalProperties", {}))
            if isinstance(schema.get("additionalProperties"), dict)
            else "anything"
        )
        return f"mapping of {' / '.join(f'`{k}`' for k in keys) if keys else 'text'} to {values}"
    if kind == "string" and schema.get("pattern") == _SLUG:
        return "slug"
    return {
        "string": "text",
        "integer": "integer",
        "number": "number",
        "boolean": "true or false",
    }.get(str(kind), str(kind))


def _constraints(schema: dict) -> str:
    for option in schema.get("anyOf", []):
        if option.get("type") != "null":
            schema = {**option, **{k: v for k, v in schema.items() if k != "anyOf"}}
    parts = []
    if schema.get("minLength") == 1:
        parts.append("not empty")
    if "maxLength" in schema:
        parts.append(f"at most {schema['maxLength']} characters")
    if schema.get("pattern") == _SLUG:
        parts.append("lowercase letters and digits, words joined by `-`")
    elif "pattern" in schema:
        parts.append(f"matches {code(schema['pattern'])}")
    bounds = [
        (k, s)
        for k, s in (
            ("minimum", "≥"),
            ("exclusiveMinimum", ">"),
            ("maximum", "≤"),
            ("exclusiveMaximum", "<"),
        )
        if k in schema
    ]
    parts += [f"{sign} {schema[key]}" for key, sign in bounds]
    if "minItems" in schema:
        parts.append(f"at least {schema['minItems']} item{'s' if schema['minItems'] != 1 else ''}")
    items = schema.get("items", {})
    if items.get("pattern") == _SLUG:
        parts.append("each lowercase letters and digits, words joined by `-`")
    return "; ".join(parts)


def _default(field: dict, required: bool) -> str:
    if required:
        return "—"
    if "default" in field:
        return code(json.dumps(field["default"]))
    # pydantic leaves a default_factory's value out of the schema; the format's are all empty.
    kind = field.get("type")
    return code("[]") if kind == "array" else code("{}") if kind == "object" else "(none)"


def _field_rows(owner: str, schema: dict, names: list[str]) -> list[str]:
    rows = [
        "| Field | Type | Required | Default | Description |",
        "| --- | --- | --- | --- | --- |",
    ]
    required = set(schema.get("required", []))
    for name in names:
        field = schema["properties"][name]
        description = field.get("description") or FIELD_NOTES.get((owner, name), "")
        if not description and "const" in field:
            description = f"Always `{field['const']}` for this kind."
        constraints = _constraints(field)
        text = (
            f"{description} ({constraints})"
            if constraints and description
            else description or constraints
        )
        rows.append(
            f"| `{name}` | {cell(_type(field))} | {'yes' if name in required else 'no'} | "
            f"{_default(field, name in required)} | {cell(text)} |"
        )
    return rows + [""]


def questions_yaml_page() -> str:
    from app.bank.schema import json_schema

    schema = json_schema()
    defs = schema["$defs"]
    kinds = [_ref_name(s["$ref"]) for s in schema["properties"]["questions"]["items"]["oneOf"]]
    # Fields every kind has, with the same schema and the same requiredness, are listed once.
    first = defs[kinds[0]]
    common = [
        name
        for name in first["properties"]
        if all(
            defs[k]["properties"].get(name) == first["properties"][name]
            and (name in defs[k].get("required", [])) == (name in first.get("required", []))
            for k in kinds
        )
        and "const" not in first["properties"][name]
    ]
    lines = [
        header("the JSON Schema of a question-set file (`ampquiz schema`, `app/bank/schema.py`)"),
        "# Question-set YAML reference",
        "",
        (
            "Every field a question-set file may hold, from the JSON Schema that `ampquiz schema` prints "
            "(the same pydantic models the loader uses). Unknown fields are errors. A complete example, "
            "and the rules the linter enforces beyond these types, are in "
            "[Writing questions](../writing-questions.md)."
        ),
        "",
        "## The file",
        "",
        "A question-set file (`questions/<set-id>.yaml`) is a mapping with these fields.",
        "",
        *_field_rows("QuestionSet", schema, list(schema["properties"])),
        "## Every question",
        "",
        "Each item of `questions` is one of the kinds below, told apart by its `kind`: "
        + ", ".join(f"[`{defs[k]['properties']['kind']['const']}`](#{k.lower()})" for k in kinds)
        + ". These fields are the same in every kind.",
        "",
        *_field_rows(kinds[0], first, common),
    ]
    for kind in kinds:
        own = [n for n in defs[kind]["properties"] if n not in common]
        const = defs[kind]["properties"]["kind"]["const"]
        lines += [
            f"## {kind}",
            "",
            f"`kind: {const}`: the fields of [every question](#every-question), and these.",
            "",
        ]
        lines += _field_rows(kind, defs[kind], own)
    for name, definition in defs.items():
        if name in kinds:
            continue
        lines += [f"## {name}", ""]
        if definition.get("description"):
            lines += [definition["description"], ""]
        lines += _field_rows(name, definition, list(definition["properties"]))
    return "\n".join(lines).rstrip() + "\n"
