"""The bank's text rule: what no string of a question-set file may hold. `schema.Strict` applies it
to every field, so lint, the loader, the studio and the exports share it."""

from __future__ import annotations

import re

NOT_TEXT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
"""What no string of the bank may hold: a control character (C0, DEL, C1) other than tab and
newline, or a lone surrogate (half of a character). Neither shows on a page, and an export
cannot carry them: a `"\\x01"` in a prompt made the Moodle XML export ill-formed."""
_CONTROL_NAMES = {
    0x00: "NUL",
    0x0D: "carriage return",
    0x1B: "escape",
    0x7F: "delete",
    0x85: "next line",
}


def text_problem(text: str) -> str | None:
    """Why `text` is not text the bank takes (`NOT_TEXT`), or None."""
    found = NOT_TEXT.search(text)
    if found is None:
        return None
    code = ord(found.group())
    if 0xD800 <= code <= 0xDFFF:
        what = f"a lone surrogate U+{code:04X} (half of a character, not text)"
    else:
        named = _CONTROL_NAMES.get(code)
        what = f"the control character U+{code:04X}" + (f" ({named})" if named else "")
    return (f"holds {what} at character {found.start() + 1}: a text may hold no control character "
            "but tab and newline (they show as nothing, and exports cannot carry them)")  # fmt: skip


def first_text_problem(value: object) -> str | None:
    """`text_problem` of the first string in a field's value that has one (in a list or a mapping,
    said with its place); a nested model's strings are checked by that model's own fields."""
    if isinstance(value, str):
        return text_problem(value)
    if isinstance(value, (list, tuple)):
        for number, item in enumerate(value, 1):
            said = first_text_problem(item)
            if said:
                return f"item {number} {said}"
    elif isinstance(value, dict):
        for key, item in value.items():
            said = first_text_problem(key) or first_text_problem(item)
            if said:
                return f"{key}: {said}"
    return None
