"""The listener API: what the event log hands every record to."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from flink_agents.observability.records import LogRecord


@runtime_checkable
class EventListener(Protocol):
    """Receives every record of the event log, on the engine's thread, as it happens.

    It must return quickly and never block on I/O (the engine's loop waits for it): queue the
    record and write it from a thread, as
    :class:`~flink_agents.observability.file_sink.JsonLinesSink` does. An exception it raises
    is logged and otherwise ignored. A listener with a ``close()`` method is closed when its
    host stops.

    A listener that needs only some kinds of records names them in a ``record_kinds``
    attribute (a set of ``kind`` values, see :func:`record_kinds_of`): when no listener wants a
    kind, the event log does not build its records at all (the Flink operator's metrics, its
    only listener by default, count runs and calls, not actions and events).
    """

    def on_record(self, record: LogRecord) -> None: ...


def record_kinds_of(listener: EventListener) -> frozenset[str] | None:
    """The record kinds ``listener`` wants; None: every kind."""
    kinds = getattr(listener, "record_kinds", None)
    return None if kinds is None else frozenset(kinds)
