"""Traces need the OpenTelemetry SDK, an optional extra: when it is missing, say which."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

OTEL_EXTRA = "flink-agents-py[otel]"
"""The extra (pyproject.toml) that installs the OpenTelemetry SDK and its OTLP/HTTP exporter."""


@contextmanager
def otel_from_extra() -> Iterator[None]:
    """Wrap ``import opentelemetry...``: if OpenTelemetry is missing, the error names the extra.

    A missing module other than OpenTelemetry's is raised as it is, so the hint never points at
    the wrong fix.
    """
    try:
        yield
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.partition(".")[0] != "opentelemetry":
            raise
        raise ModuleNotFoundError(
            f"traces need the OpenTelemetry SDK ({exc.name!r} is missing), an optional extra: "
            f"pip install '{OTEL_EXTRA}'",
            name=exc.name,
        ) from exc
