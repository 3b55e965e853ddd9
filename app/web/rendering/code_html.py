"""Python code as HTML: Pygments' highlighting with a span per line (the op trace points at lines),
each indented line's depth for a phone's wrapped lines, and the token colours' stylesheet, moved
to meet WCAG AA on both code backgrounds (`app/web/static/pygments.css` is its output).
"""

from __future__ import annotations

import re
from functools import lru_cache

from markupsafe import Markup, escape
from pygments import highlight as _pyg_highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

DEEPEST_INDENT = 24
"""The deepest indentation (in spaces) a line's continuation hangs under (app.css `.i1`…`.i24`)."""


def indent_class(line: str, prefix: int = 0) -> str:
    """`i8` for a line indented by 8 spaces after its first `prefix` characters (a diff's `+`),
    or "" for one that is not: see `highlight`."""
    text = line[prefix:]
    return (
        f"i{min(DEEPEST_INDENT, len(text) - len(text.lstrip(' ')))}" if text.startswith(" ") else ""
    )


_BREAKS = r"[.(,\[]"
"""The characters a phone's wrapped code line may break after (`<wbr>`): a dot, a bracket, a comma."""
_BREAK_AFTER = re.compile(rf'(<span class="[op]">[^<]*{_BREAKS}</span>)')
"""A `.`, `(`, `,` or `[` token as Pygments writes it (an operator or punctuation span): a phone's
wrapped line may break after one (`<wbr>`), where otherwise a dotted call broke inside a name."""

_LINE_SPAN = re.compile(r'<span id="L-(\d+)">')
"""Each line's span as Pygments writes it (the code's own text is escaped, so only these match)."""


@lru_cache(maxsize=1024)
def highlight(code: str | None) -> Markup:
    """Python code as HTML, each line in `<span id="L-n">` so the op trace can point at it."""
    if not code:
        return Markup("")
    formatter = HtmlFormatter(cssclass="hl code", linespans="L", wrapcode=True)
    html = _pyg_highlight(code, PythonLexer(), formatter)
    # Each indented line says how deep it is, so that on a phone its wrapped continuation hangs
    # under its own text (app.css): at column 0, `opt = torch.optim.AdamW(` inside an `if` read
    # as two statements at the outer level.
    # One pass over the HTML (a replace per line rescanned it from the start: 0.6 s for 2,000 lines).
    depths = {
        number: depth
        for number, line in enumerate(code.splitlines(), 1)
        if (depth := indent_class(line))
    }
    if depths:
        html = _LINE_SPAN.sub(
            lambda m: (
                f'<span id="L-{m[1]}" class="{depths[n]}">' if (n := int(m[1])) in depths else m[0]
            ),
            html,
        )
    # On a phone a long line wraps (app.css). A dotted call is one word to the browser: it moved
    # whole to the row under the line's number, which stood alone, and then broke inside a name
    # (`model.weig` / `ht.grad`). It may break after a dot, a bracket or a comma instead; copied,
    # the code is the same (`<wbr>` is no character).
    html = _BREAK_AFTER.sub(r"\1<wbr>", html)
    # A long line scrolls sideways inside the block: keyboard users must be able to reach it.
    return Markup(html.replace("<pre>", '<pre tabindex="0" aria-label="Code">', 1))


def with_breaks(text: str) -> Markup:
    """A line of code as HTML (escaped), which a phone may wrap after a dot, a bracket or a comma,
    as `highlight`'s lines (a What-if card's diff)."""
    return Markup(re.sub(f"({_BREAKS})", r"\1<wbr>", str(escape(text))))


CODE_BG = {"light": "#f7f8fa", "dark": "#161b26"}
"""The code blocks' backgrounds (app.css `--code-bg`): token colours are made to read on both."""
_AA = 4.6  # WCAG AA asks 4.5:1 for text; a little margin for rounding


def _luminance(hex_colour: str) -> float:
    r, g, b = (int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two #rrggbb colours."""
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def _readable(colour: str, background: str) -> str:
    """`colour`, moved toward black or white (keeping its hue) until it reads on `background`."""
    import colorsys

    r, g, b = (int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
    h, lightness, sat = colorsys.rgb_to_hls(r, g, b)
    step = -0.02 if _luminance(background) > 0.5 else 0.02
    out = colour
    while contrast(out, background) < _AA and 0 <= lightness <= 1:
        lightness = min(1.0, max(0.0, lightness + step))
        out = "#" + "".join(f"{round(c * 255):02x}" for c in colorsys.hls_to_rgb(h, lightness, sat))
        if lightness in (0.0, 1.0):
            break
    return out


def pygments_css() -> str:
    """The token colours for app/web/static/pygments.css: Pygments' "friendly" colours, each
    moved just far enough to meet WCAG AA on the light and on the dark code background, written
    as `light-dark()` so the page's colour scheme picks one. Layout lives in app.css."""
    import re

    rules = HtmlFormatter(style="friendly").get_style_defs(".hl").splitlines()
    out = []
    for rule in rules:
        if not rule.startswith(".hl .") or "background-color" in rule:
            continue

        def both(m: re.Match) -> str:
            value = m.group(1)
            if len(value) == 4:
                value = "#" + "".join(c * 2 for c in value[1:])
            light, dark = (
                _readable(value.lower(), CODE_BG["light"]),
                _readable(value.lower(), CODE_BG["dark"]),
            )
            return f"color: light-dark({light}, {dark})"

        out.append(re.sub(r"color: (#[0-9A-Fa-f]{3,6})", both, rule.split(" /*")[0]))
    return "\n".join(out)
