"""`ampquiz docs [--check] [--dir DOCS]`: the reference pages made from the code, so they cannot
drift from it: the settings (`app.settings.Settings`), the command line (this package's argparse
parsers) and the question-set YAML (the bank's JSON Schema, `app.bank.schema.json_schema`).

Without `--check` it writes them under `docs/reference/`; with it, it writes nothing and exits 1
naming each page that differs from what the code makes now (`make docs` and the tests check so).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REGENERATE = "ampquiz docs"


def _header(source: str) -> str:
    return f"<!-- Generated from {source} by `{REGENERATE}`: edit the source, then run `{REGENERATE}`. -->\n"


def _cell(text: str) -> str:
    """Text for one Markdown table cell: one line, and no `|` that would end the cell."""
    return " ".join(text.split()).replace("|", "\\|")


def _code(text: str) -> str:
    """An inline code span that survives a table cell (a `|` inside one still splits the row)."""
    return (
        "<code>"
        + text.replace("&", "&amp;").replace("<", "&lt;").replace("|", "&#124;")
        + "</code>"
    )


# ---- settings ----------------------------------------------------------------------------------


def _bounds(field: Any) -> str:
    parts = []
    for meta in field.metadata:
        for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            value = getattr(meta, attr, None)
            if value is not None:
                parts.append(
                    f"{sign} {value:,}".replace(",", " ")
                    if isinstance(value, int)
                    else f"{sign} {value}"
                )
    return ", ".join(parts)


_WORDS = {str: "text", Path: "path", int: "integer", float: "number", bool: "true or false"}


def _kind_in_words(annotation: Any) -> str:
    """`int` as "integer", `str | None` as "text": what an operator may write in the variable."""
    kinds = [a for a in getattr(annotation, "__args__", (annotation,)) if a is not type(None)]
    return " or ".join(_WORDS.get(a, getattr(a, "__name__", str(a))) for a in kinds)


def settings_page() -> str:
    from app.settings import Settings

    lines = [
        _header("`app.settings.Settings`"),
        "# Settings",
        "",
        (
            "Every setting is read from an `AMPQUIZ_*` environment variable when a command starts "
            "(`ampquiz serve`, `worker`, `workers`, `verify --remote`); an empty or unset variable keeps "
            "the default, and a command-line flag (`serve --host`, `--port`; `worker --url`) wins over "
            "both. A malformed value stops the command with a message naming its variable. "
            "`ampquiz serve --help` lists them too. What the limits mean together, and how to run a "
            "server, is in [Running a server](../operators.md)."
        ),
        "",
        "| Variable | Setting | Default | Allowed | What it does |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, field in Settings.model_fields.items():
        default = field.default
        if name == "secret_key":
            shown = "(generated)"
        elif default in ("", None):
            shown = "(empty)"
        else:
            shown = _code(str(default))
        bounds = _bounds(field)
        allowed = f"{_kind_in_words(field.annotation)}{' ' + bounds if bounds else ''}"
        lines.append(
            f"| `{Settings.env_name(name)}` | `{name}` | {shown} | {_cell(allowed)} | {_cell(field.description or '')} |"
        )
    return "\n".join(lines) + "\n"


# ---- the command line --------------------------------------------------------------------------


def _usage(parser: argparse.ArgumentParser) -> str:
    """The usage line on one line, whatever the terminal's width (which argparse reads)."""
    formatter = argparse.HelpFormatter(prog=parser.prog, width=10_000)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return formatter.format_help().strip()


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, short help, parser) of each subcommand, in the order they were registered."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            found += [(name, helps.get(name, ""), p) for name, p in action.choices.items()]
    return found


def _arguments(parser: argparse.ArgumentParser) -> list[str]:
    formatter = argparse.HelpFormatter(prog=parser.prog, width=10_000)
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        invocation = formatter._format_action_invocation(action)
        help_text = formatter._expand_help(action) if action.help else ""
        default = action.default
        shown = ""
        if default not in (None, False, argparse.SUPPRESS, [], "") and not isinstance(
            action, argparse._StoreTrueAction
        ):
            shown = _code(str(default))
        kind = (
            "positional"
            if not action.option_strings
            else ("required" if action.required else "option")
        )
        if not action.option_strings and action.nargs in ("?", "*"):
            kind = "positional, optional"
        rows.append(f"| {_code(invocation)} | {kind} | {shown} | {_cell(help_text)} |")
    if not rows:
        return []
    return ["| Argument | Kind | Default | What it does |", "| --- | --- | --- | --- |", *rows, ""]


def _command_section(
    name: str, short: str, parser: argparse.ArgumentParser, module: Any, level: int
) -> list[str]:
    lines = [f"{'#' * level} {parser.prog}", ""]
    # The command module's docstring opens with what the command does, in more words than its
    # one-line help; a subcommand without a module of its own has the help only.
    doc = (
        (module.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
        if module is not None
        else ""
    )
    if doc:
        lines += [doc, ""]
    elif short:
        lines += [short[0].upper() + short[1:] + ("" if short.endswith(".") else "."), ""]
    if parser.description:
        lines += [parser.description.strip(), ""]
    lines += ["```text", _usage(parser), "```", ""]
    lines += _arguments(parser)
    if parser.epilog:
        lines += ['??? note "More from `--help`"', "", "    ```text"]
        lines += [f"    {line}".rstrip() for line in parser.epilog.strip("\n").splitlines()]
        lines += ["    ```", ""]
    for sub_name, sub_short, sub_parser in _subcommands(parser):
        lines += _command_section(sub_name, sub_short, sub_parser, None, level + 1)
    return lines


def cli_page() -> str:
    from app.cli import COMMANDS, build_parser

    parser = build_parser()
    modules = {c.__name__.rsplit(".", 1)[1]: c for c in COMMANDS}
    commands = _subcommands(parser)
    lines = [
        _header("the parsers of `app/cli/` (`COMMANDS` in `app/cli/__init__.py`)"),
        "# The command line",
        "",
        (
            "`ampquiz` is installed with the package (`make install` puts it in `.venv/bin/`); "
            "`python -m app.cli` is the same. Each command is one module in `app/cli/`; "
            "`ampquiz COMMAND --help` prints what this page shows for it."
        ),
        "",
        "| Command | What it does |",
        "| --- | --- |",
        *[f"| [`{name}`](#ampquiz-{name}) | {_cell(short)} |" for name, short, _ in commands],
        "",
    ]
    for name, short, sub in commands:
        lines += _command_section(name, short, sub, modules.get(name.replace("-", "_")), 2)
    return "\n".join(lines).rstrip() + "\n"


# ---- the question-set YAML ---------------------------------------------------------------------

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
        parts.append(f"matches {_code(schema['pattern'])}")
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
        return _code(json.dumps(field["default"]))
    # pydantic leaves a default_factory's value out of the schema; the format's are all empty.
    kind = field.get("type")
    return _code("[]") if kind == "array" else _code("{}") if kind == "object" else "(none)"


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
            f"| `{name}` | {_cell(_type(field))} | {'yes' if name in required else 'no'} | "
            f"{_default(field, name in required)} | {_cell(text)} |"
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
        _header("the JSON Schema of a question-set file (`ampquiz schema`, `app/bank/schema.py`)"),
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


# ---- the command -------------------------------------------------------------------------------

PAGES: dict[str, Callable[[], str]] = {
    "reference/settings.md": settings_page,
    "reference/cli.md": cli_page,
    "reference/questions-yaml.md": questions_yaml_page,
}


def generated_pages() -> dict[str, str]:
    """Each page's path under the docs folder, and its text as the code makes it now."""
    return {path: make() for path, make in PAGES.items()}


def stale_pages(docs: Path) -> list[str]:
    """The generated pages under `docs` that differ from what the code makes now (or are missing)."""
    stale = []
    for path, text in generated_pages().items():
        target = docs / path
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            stale.append(path)
    return stale


def _cmd_docs(args: argparse.Namespace) -> int:
    docs = Path(args.dir)
    if args.check:
        stale = stale_pages(docs)
        for path in stale:
            print(f"{docs / path} is out of date: run `{REGENERATE}`", file=sys.stderr)
        return 1 if stale else 0
    for path, text in generated_pages().items():
        target = docs / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            print(f"wrote {target}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "docs", help="write the reference pages made from the code (settings, CLI, question YAML)"
    )
    p.add_argument("--dir", default="docs", help="the docs folder (default: docs)")
    p.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 naming each page that is out of date",
    )
    p.set_defaults(func=_cmd_docs)
