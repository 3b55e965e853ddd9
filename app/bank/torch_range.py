"""Which torch releases a question's key is for: a version range (`torch_versions`), checked as
written and matched against a host's torch."""

from __future__ import annotations

from typing import Annotated

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from pydantic import AfterValidator


def _torch_range(text: str) -> str:
    try:
        SpecifierSet(text)
    except InvalidSpecifier:
        raise ValueError(
            f"{text!r} is not a version range such as '>=2.12' or '>=2.4,<2.12'"
        ) from None
    return text


TorchRange = Annotated[str, AfterValidator(_torch_range)]


def torch_in_range(torch_range: str | None, torch_version: str) -> bool:
    """Whether a torch version ("2.11.0", "2.13.0+cu130") is one whose behaviour a question's
    key states (no range: every version)."""
    if not torch_range or not torch_version:
        return True
    return SpecifierSet(torch_range).contains(
        torch_version, prereleases=True
    )  # a local "+cu130" is ignored
