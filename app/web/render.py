"""Turning bank text and run results into safe HTML: Markdown, highlighted code, Jinja filters.

Markdown comes from YAML files anyone may send a patch to, so it is rendered with raw HTML off
and then sanitised with nh3 (an allow-list). Code is highlighted on the server with Pygments, so
pages need no JavaScript to read. Explanations come from another process and may lack keys:
every filter here takes what it gets.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import nh3
from fastapi.templating import Jinja2Templates
from markdown_it import MarkdownIt
from markupsafe import Markup
from pygments import highlight as _pyg_highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer, get_lexer_by_name
from pygments.util import ClassNotFound

from app.review import STATUS_LABELS

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from app.web.state import WebState

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"

_ALLOWED_TAGS = {
    "p", "br", "hr", "em", "strong", "code", "pre", "span", "div", "a", "ul", "ol", "li",
    "blockquote", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "del", "sup", "sub",
}  # fmt: skip
_ALLOWED_ATTRS = {
    "a": {"href", "title"},
    "span": {"class"},
    "div": {"class"},
    "code": {"class"},
    "pre": {"class"},
    "th": {"align"},
    "td": {"align"},
}


def _fence(code: str, lang: str, _attrs: str) -> str:
    try:
        lexer = get_lexer_by_name(lang or "python")
    except ClassNotFound:
        lexer = PythonLexer()
    body = _pyg_highlight(code, lexer, HtmlFormatter(nowrap=True))
    return f'<pre class="hl"><code>{body}</code></pre>\n'  # starts with <pre: markdown-it keeps it as is


_MD = MarkdownIt("commonmark", {"html": False, "linkify": False, "highlight": _fence}).enable(
    "table"
)


@lru_cache(maxsize=4096)
def markdown(text: str | None) -> Markup:
    """Markdown to sanitised HTML. Headings are shifted down so a prompt never outranks the page."""
    if not text:
        return Markup("")
    html = _MD.render(text)
    for level in (2, 1):  # h1/h2 in a prompt become h3/h4
        html = html.replace(f"<h{level}>", f"<h{level + 2}>").replace(
            f"</h{level}>", f"</h{level + 2}>"
        )
    clean = nh3.clean(
        html, tags=_ALLOWED_TAGS, attributes=_ALLOWED_ATTRS, url_schemes={"http", "https", "mailto"}
    )
    return Markup(clean)


@lru_cache(maxsize=1024)
def markdown_inline(text: str | None) -> Markup:
    """Short Markdown (a choice) without the wrapping paragraph, when it is a single one."""
    html = str(markdown(text)).strip()
    if html.startswith("<p>") and html.endswith("</p>") and html.count("<p>") == 1:
        html = html[3:-4]
    return Markup(html)


@lru_cache(maxsize=1024)
def highlight(code: str | None) -> Markup:
    """Python code as HTML, each line in `<span id="L-n">` so the op trace can point at it."""
    if not code:
        return Markup("")
    formatter = HtmlFormatter(cssclass="hl code", linespans="L", wrapcode=True)
    return Markup(_pyg_highlight(code, PythonLexer(), formatter))


def pygments_css() -> str:
    """The token colours (a light theme) for app/web/static/pygments.css; layout is in app.css."""
    rules = HtmlFormatter(style="friendly").get_style_defs(".hl").splitlines()
    return "\n".join(r for r in rules if r.startswith(".hl ."))


# ---- filters for run results ---------------------------------------------------------------


def tensor_desc(meta: Any) -> str:
    """`float32 [1, 4]` (plus the device when it is not the CPU) from an op trace's tensor record."""
    if not isinstance(meta, dict):
        return "—" if meta is None else str(meta)
    dtype = str(meta.get("dtype") or "?")
    shape = meta.get("shape")
    text = dtype
    if isinstance(shape, (list, tuple)):
        text += " [" + ", ".join(str(s) for s in shape) + "]" if shape else " scalar"
    device = meta.get("device")
    if device and device != "cpu":
        text += f" on {device}"
    return text


def autocast_desc(meta: Any) -> str:
    if not isinstance(meta, dict):
        return "off"
    return f"{meta.get('device_type', '?')}, {meta.get('dtype', '?')}"


def cast_desc(cast: Any) -> str:
    if not isinstance(cast, dict):
        return str(cast)
    shape = cast.get("shape")
    dims = (
        f" [{', '.join(str(s) for s in shape)}]"
        if isinstance(shape, (list, tuple)) and shape
        else ""
    )
    return f"{cast.get('from', '?')} → {cast.get('to', '?')}{dims}"


def _num(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def scaler_desc(event: Any) -> str:
    """One GradScaler event in words: what a learner needs to read from it."""
    if not isinstance(event, dict):
        return str(event)
    kind = event.get("event")
    if kind == "scale":
        return f"loss multiplied by {_num(event.get('scale', '?'))}"
    if kind == "unscale_":
        how = "explicit unscale_() call" if event.get("explicit") else "inside step()"
        return f"gradients divided by the scale ({how})"
    if kind == "inf_check":
        return (
            "inf/NaN found in the gradients" if event.get("found_inf") else "gradients all finite"
        )
    if kind == "step":
        return (
            "optimizer.step() ran"
            if event.get("taken")
            else "optimizer.step() SKIPPED (inf/NaN gradients)"
        )
    if kind == "update":
        old, new = event.get("old_scale"), event.get("new_scale")
        change = event.get("change")
        text = (
            f"scale {_num(old)} → {_num(new)}"
            if old is not None and new is not None
            else "scale updated"
        )
        return f"{text} ({change})" if change else text
    rest = {k: v for k, v in event.items() if k not in ("event", "line", "count")}
    return ", ".join(f"{k}={_num(v)}" for k, v in rest.items()) or str(kind)


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def ms(value: Any) -> str:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return "?"
    return f"{v:.0f} ms" if v >= 10 else f"{v:.1f} ms"


def percent(part: int, whole: int) -> str:
    return f"{round(100 * part / whole)}%" if whole else "—"


def _static_version() -> str:
    """A hash of the static files, appended to their URLs so a deploy never serves stale CSS."""
    digest = hashlib.sha256()
    for path in sorted(STATIC.glob("*")):
        if path.is_file():
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:10]


def make_templates() -> Jinja2Templates:
    templates = Jinja2Templates(directory=str(TEMPLATES))
    env = templates.env
    env.filters.update(
        markdown=markdown,
        markdown_inline=markdown_inline,
        highlight=highlight,
        tensor=tensor_desc,
        autocast=autocast_desc,
        cast=cast_desc,
        scaler=scaler_desc,
        as_list=as_list,
        ms=ms,
    )
    env.globals.update(
        static_version=_static_version(), status_labels=STATUS_LABELS, percent=percent
    )
    env.trim_blocks = True
    env.lstrip_blocks = True
    env.auto_reload = False  # templates ship with the package: no stat() of each file per render
    return templates


def page(state: WebState, request: Request, name: str, status_code: int = 200, **context: Any) -> Response:
    """A page from its template, with what every page shows (the sandbox's environment)."""
    context.setdefault("environment", state.run_queue.environment)
    context.setdefault("proof_summary", state.proof_summary())
    return state.templates.TemplateResponse(request, name, context, status_code=status_code)
