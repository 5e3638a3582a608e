"""The listener API: what the event log hands every record to, or, for a listener that only
counts, the few typed values it counts."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from flink_agents.api.chat import TokenUsage
from flink_agents.observability.lines import LineListener
from flink_agents.observability.log_records import CallKind, CallOutcome, LogRecord, RunStatus


@runtime_checkable
class EventListener(Protocol):
    """Receives every record of the event log, on the engine's thread, as it happens.

    It must return quickly and never block on I/O (the engine's loop waits for it): queue the
    record (or what is written of it) and write it from a thread, as
    :class:`~flink_agents.observability.sinks.json_lines.JsonLinesSink` does. An exception it raises
    is logged and otherwise ignored. A listener with a ``close()`` method is closed when its
    host stops.

    A listener that needs only some kinds of records names them in a ``record_kinds``
    attribute (a set of ``kind`` values, see :func:`record_kinds_of`): when no listener wants a
    kind, the event log does not build its records at all.
    """

    def on_record(self, record: LogRecord) -> None: ...


@runtime_checkable
class RunCounter(Protocol):
    """A listener that counts runs and calls: the event log calls it with typed values and builds
    no record for it, so counting costs a few method calls per run (the Flink operator's
    metrics, :class:`~flink_agents.observability.sinks.metrics.MetricsListener`, are one, and
    with no event log configured the only listener of a job).

    Called on the engine's thread, like :meth:`EventListener.on_record`, with the same rules:
    return quickly; an exception is logged and ignored.
    """

    def on_run_admitted(self) -> None:
        """An input was queued to run (a ``run_admitted`` record)."""

    def on_run_started(self) -> None:
        """A run began executing (``run_started``)."""

    def on_run_finished(self, status: RunStatus, latency_ms: float, outputs: int) -> None:
        """A run ended (``run_finished``), with the output events it emitted."""

    def on_call(
        self, kind: CallKind, outcome: CallOutcome, latency_ms: float, usage: TokenUsage | None
    ) -> None:
        """A durable call's outcome (a ``call`` record); ``usage``: a model call's tokens."""


Observer = EventListener | LineListener | RunCounter
"""What a host hands the event log: a listener of records or of lines, or a counter (an object
that is both is treated as a counter; one with ``on_line`` gets lines)."""


def never_raises(observer: object) -> bool:
    """Whether ``observer`` declares (``never_raises = True``) that its hooks cannot raise: the
    event log then calls them directly, without a wrapper that logs an exception (a frame a
    record; the file sink's queue put and the Flink metrics' counts are such hooks)."""
    return getattr(observer, "never_raises", False) is True


def record_kinds_of(listener: EventListener) -> frozenset[str] | None:
    """The record kinds ``listener`` wants; None: every kind."""
    kinds = getattr(listener, "record_kinds", None)
    return None if kinds is None else frozenset(kinds)
