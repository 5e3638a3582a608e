"""A provider's SDK is an optional extra: when it is missing, say which extra installs it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

PROVIDERS_EXTRA = "flink-agents-py[providers]"
"""The extra (pyproject.toml) that installs every provider's SDK."""


@contextmanager
def sdk_from_extra(sdk: str, extra: str = PROVIDERS_EXTRA) -> Iterator[None]:
    """Wrap a provider's ``import <sdk>``: if that package is missing, the error names the extra.
    ``sdk`` may be dotted (``google.genai``).

    A missing module other than the SDK (a bug, or a broken install of something else) is raised
    as it is, so the hint never points at the wrong fix.
    """
    try:
        yield
    except ModuleNotFoundError as exc:
        if exc.name is None or not _related(exc.name, sdk):
            raise
        raise ModuleNotFoundError(
            f"this provider needs the {sdk!r} package, an optional extra: pip install '{extra}'",
            name=exc.name,
        ) from exc


def _related(missing: str, sdk: str) -> bool:
    """Whether the missing module is the SDK, a part of it, or a package it lives in."""
    return any(a == b or a.startswith(b + ".") for a, b in ((missing, sdk), (sdk, missing)))
