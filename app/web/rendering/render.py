"""Turning bank text and run results into safe HTML: Markdown, highlighted code, Jinja filters.

Markdown comes from YAML files anyone may send a patch to, so it is rendered with raw HTML off
and then sanitised with nh3 (an allow-list). Code is highlighted on the server with Pygments (`app.web.rendering.code_html`), so
pages need no JavaScript to read. Explanations come from another process and may lack keys:
every filter here takes what it gets.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import jinja2
import jinja2.compiler
import nh3
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from markdown_it import MarkdownIt
from markupsafe import Markup
from pygments import highlight as _pyg_highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer, get_lexer_by_name
from pygments.util import ClassNotFound

from app.explain_text import what_happened
from app.grading import LONGEST_PREDICTION
from app.mutate.cards import diff_lines
from app.review import STATUS_LABELS
from app.web.rendering.code_html import highlight, indent_class, with_breaks
from app.web.rendering.run_text import (
    autocast_desc,
    cast_desc,
    region_label,
    reused_desc,
    scaler_desc,
    tensor_desc,
)
from app.web.rendering.static_version import STATIC_VERSION

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from app.web.state import WebState

T = TypeVar("T")
HERE = Path(__file__).resolve().parent.parent
TEMPLATES = HERE / "templates"

_ALLOWED_TAGS = {
    "p", "br", "hr", "em", "strong", "code", "pre", "span", "div", "a", "ul", "ol", "li",
    "blockquote", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "del", "sup", "sub",
}  # fmt: skip
_ALLOWED_ATTRS = {
    "a": {"href", "title"},
    "span": {"class"},
    "div": {"class"},
    "code": {"class"},
    "pre": {"class", "tabindex"},
    "th": {"align"},
    "td": {"align"},
}


def _fence(code: str, lang: str, _attrs: str) -> str:
    try:
        lexer = get_lexer_by_name(lang or "python")
    except ClassNotFound:
        lexer = PythonLexer()
    body = _pyg_highlight(code, lexer, HtmlFormatter(nowrap=True))
    return f'<pre class="hl" tabindex="0"><code>{body}</code></pre>\n'  # starts with <pre: markdown-it keeps it as is


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


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def ms(value: Any) -> str:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return "?"
    return f"{v:.0f} ms" if v >= 10 else f"{v:.1f} ms"


@lru_cache(maxsize=8192)
def _utc_texts(at: datetime) -> tuple[str, str]:
    """A time as the progress page's history writes it: ISO 8601 (for the browser's local-time
    script) and "YYYY-MM-DD HH:MM" (UTC, for a reader without it). Kept per value: a learner's
    history shows the same 100 times on every view, and formatting them in the template (two
    method calls a row, each through Jinja's call checks) was a tenth of the page's CPU. 8,192
    times: a class of 80 learners' histories. In UTC whatever zone `at` is in: one instant in two
    zones is one key, so what is kept must not depend on the zone."""
    utc = at.astimezone(UTC) if at.tzinfo is not None else at
    return utc.isoformat(), utc.strftime("%Y-%m-%d %H:%M")


def iso(at: datetime) -> str:
    return _utc_texts(at)[0]


def utc_minute(at: datetime) -> str:
    return _utc_texts(at)[1]


def letter(position: int) -> str:
    """How a choice at a 0-based position is labelled: A to J, then numbers (11, 12, …)."""
    return "ABCDEFGHIJ"[position] if 0 <= position < 10 else str(position + 1)


def percent(part: int, whole: int) -> str:
    return f"{round(100 * part / whole)}%" if whole else "—"


def what_happened_besides_the_exception(run: dict[str, Any]) -> list[str]:
    """`what_happened`, less the sentence restating the exception that the run panel shows in a box
    of its own: a playground run said "raised ValueError on line 4" three times (a newcomer's walk)."""
    lines = what_happened(run)
    exc = run.get("exception") if isinstance(run, dict) else None
    if isinstance(exc, dict) and exc.get("type"):
        said = f"The snippet raised {exc['type']}"
        lines = [line for line in lines if not line.startswith(said)]
    return lines


def minutes_and_seconds(seconds: float) -> str:
    """A span of time as people say it: "45 s", "2 min", "2 min 30 s" (a report said "extended
    by 2.5", with no unit)."""
    whole = max(0, round(seconds))
    minutes, rest = divmod(whole, 60)
    if not minutes:
        return f"{rest} s"
    return f"{minutes} min {rest} s" if rest else f"{minutes} min"


_DICT_ATTRIBUTES = frozenset(dir(dict))

try:
    from markupsafe import _escape_inner  # the escaping alone, in C, without the Markup around it

    _FAST_ESCAPE = True
except ImportError:  # another markupsafe: escape() as it is (`escaped_text` is then never used)
    _FAST_ESCAPE = False


def escaped_text(value: Any) -> str:
    """What `{{ value }}` writes into a page: `markupsafe.escape(value)` as a plain str.

    Jinja puts every value a page shows through `escape`, which wraps its result in a `Markup`
    (a Python-level `__new__`, 0.36 us a value), only for the page to join it into one string at
    once: a progress page writes ~400 values. Text that is already HTML (`__html__`: a Markup,
    a macro's output) goes as it is, everything else is escaped, exactly as `escape` does."""
    html = getattr(value, "__html__", None)
    if html is not None:
        return html()
    return _escape_inner(str(value))


class _PagesCodeGenerator(jinja2.compiler.CodeGenerator):
    """Compiles `{{ value }}` in an autoescaped template to `escaped_text(value)` (see there):
    the only change to Jinja's code. A value is written, never combined with other values there
    (a macro's or a block's output is joined and marked safe as before), so a plain str is as
    good as a Markup."""

    def _output_child_pre(self, node: Any, frame: Any, finalize: Any) -> None:
        if (
            frame.eval_ctx.autoescape
            and not frame.eval_ctx.volatile
            and finalize.src is None
            and _FAST_ESCAPE
        ):
            self.write("environment.escaped_text(")
        else:
            super()._output_child_pre(node, frame, finalize)


class _PagesEnvironment(jinja2.Environment):
    """Jinja's environment, reading `value.name` on a plain dict as `value["name"]` at once.

    Jinja tries the attribute first and the item after it; a dict has no attributes but its
    methods, so every `.name` on one raised and caught an AttributeError before the item was
    read. A run's report is dicts all the way down: a result page read ~200 values that way, a
    page's footer ~10. Same values as before: the methods' names still go to the attribute, and
    a key the dict does not hold goes the usual way (to undefined)."""

    code_generator_class = _PagesCodeGenerator
    escaped_text = staticmethod(escaped_text)

    def getattr(self, obj: Any, attribute: str) -> Any:
        # Jinja's own steps, in one frame: every value a page shows comes through here, and a
        # call to the base method on top doubled the cost of reading an object's attribute.
        if type(obj) is dict and attribute not in _DICT_ATTRIBUTES:
            try:
                return obj[attribute]
            except KeyError:
                return self.undefined(obj=obj, name=attribute)
        try:
            return getattr(obj, attribute)
        except AttributeError:
            pass
        try:
            return obj[attribute]
        except (TypeError, LookupError, AttributeError):
            return self.undefined(obj=obj, name=attribute)


def make_templates() -> Jinja2Templates:
    loader = jinja2.FileSystemLoader(str(TEMPLATES))
    templates = Jinja2Templates(
        env=_PagesEnvironment(loader=loader, autoescape=jinja2.select_autoescape())
    )
    env = templates.env
    env.filters.update(
        markdown=markdown,
        markdown_inline=markdown_inline,
        highlight=highlight,
        tensor=tensor_desc,
        autocast=autocast_desc,
        cast=cast_desc,
        reused=reused_desc,
        region=region_label,
        scaler=scaler_desc,
        as_list=as_list,
        ms=ms,
        what_happened=what_happened_besides_the_exception,
        letter=letter,
        iso=iso,
        utc_minute=utc_minute,
    )
    env.globals.update(
        static_version=STATIC_VERSION,
        status_labels=STATUS_LABELS,
        percent=percent,
        minutes_and_seconds=minutes_and_seconds,
        longest_prediction=LONGEST_PREDICTION,
        indent_class=indent_class,
        with_breaks=with_breaks,
        diff_lines=diff_lines,
    )
    env.trim_blocks = True
    env.lstrip_blocks = True
    env.auto_reload = False  # templates ship with the package: no stat() of each file per render
    return templates


def render_page(
    state: WebState, request: Request, template_name: str, status_code: int = 200, **context: Any
) -> Response:
    """A page from its template, with what every page shows (the sandbox's environment and the
    proof counts). Blocking: call it where the page's database reads are made, in the page thread
    (`in_thread`), so a request makes one trip off the event loop, not one per step."""
    context.setdefault("environment", state.run_queue.environment)
    context.setdefault("proof_summary", state.proof_summary())
    html = state.templates.get_template(template_name).render({"request": request, **context})
    return HTMLResponse(html, status_code=status_code)


async def in_thread(state: WebState, work: Callable[[], T]) -> T:
    """`work` (database reads and writes, rendering) in the app's page threads
    (`WebState.page_threads`): the event loop keeps answering everyone else meanwhile, /healthz
    included, and a database call never stalls it."""
    return await state.page_threads.run(work)


async def page(
    state: WebState, request: Request, template_name: str, status_code: int = 200, **context: Any
) -> Response:
    """`render_page` in the page threads: a page showing a run renders what the snippet's process
    reported (bounded by the pool, but still the largest thing a page holds)."""
    return await in_thread(
        state, lambda: render_page(state, request, template_name, status_code, **context)
    )
