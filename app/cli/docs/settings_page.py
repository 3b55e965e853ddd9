"""The settings page, from `app.settings.Settings`: each variable, its default, bounds and help."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.cli.docs.markdown import cell, code, header


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
        header("`app.settings.Settings`"),
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
            shown = code(str(default))
        bounds = _bounds(field)
        allowed = f"{_kind_in_words(field.annotation)}{' ' + bounds if bounds else ''}"
        lines.append(
            f"| `{Settings.env_name(name)}` | `{name}` | {shown} | {cell(allowed)} | {cell(field.description or '')} |"
        )
    return "\n".join(lines) + "\n"
