"""Parts of pages rendered once and shared by every learner (see `SharedFragments`)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from fastapi.templating import Jinja2Templates
from markupsafe import Markup


class SharedFragments:
    """Parts of pages that are the same for every learner, rendered once: a question's run (its op
    trace can be hundreds of rows) and its "What if…" cards are shared by everyone who answers
    it. Keyed by the identity of the object they show, which is kept with the HTML, so a new run
    or a reloaded record is rendered afresh; the oldest are dropped past `size`."""

    def __init__(self, size: int = 512) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._html: OrderedDict[tuple[str, int], tuple[object, Markup]] = OrderedDict()

    def render(
        self, templates: Jinja2Templates, template_name: str, subject: object, **context: Any
    ) -> Markup:
        key = (template_name, id(subject))
        with self._lock:
            found = self._html.get(key)
            if found is not None and found[0] is subject:
                self._html.move_to_end(key)
                return found[1]
        html = Markup(templates.get_template(template_name).render(context))
        with self._lock:
            self._html[key] = (subject, html)
            while len(self._html) > self.size:
                self._html.popitem(last=False)
        return html
