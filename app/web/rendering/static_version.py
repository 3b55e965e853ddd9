"""The version of the static files that their URLs carry (`?v=`), served by
`app.web.routes.static_files` and written into pages by the templates."""

from __future__ import annotations

import hashlib
from pathlib import Path

STATIC = Path(__file__).resolve().parent.parent / "static"


def _static_version() -> str:
    digest = hashlib.sha256()
    for path in sorted(STATIC.glob("*")):
        if path.is_file():
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:10]


STATIC_VERSION = _static_version()
"""A hash of the static files, read once at import: the files ship with the package."""
