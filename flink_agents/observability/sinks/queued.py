"""A listener that writes from its own thread: the base of the event log's sinks."""

from __future__ import annotations

import abc
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from flink_agents.observability.log_records import LogRecord

Item = TypeVar("Item")


LINGER_S = 0.01
"""How long the writer thread lets records gather between two looks while records come."""

IDLE_S = 0.1
"""The longest the writer thread sleeps between two looks once records stop coming."""


class QueuedSink(abc.ABC, Generic[Item]):
    """:meth:`on_record` only queues what :meth:`_queued` makes of the record (the record
    itself, or its line); a writer thread hands what was queued to :meth:`_write_batch`, in
    order, a batch at a time, and calls :meth:`_finish` after :meth:`close`, so the engine's
    loop never waits for the sink's I/O.

    The engine's thread only appends to a list (:attr:`_put`: the list's own ``append``, no
    Python frame; a put that also woke the writer cost ~1,500 instructions a record,
    bench/results/analysis.md, "The event log's instructions per run, shared"). The writer
    looks every :data:`LINGER_S` while records come, so that it takes the GIL once per batch
    rather than once per record (~13 records a run: wake-ups cost more CPU than writing the
    lines, bench/results/operator.md, "Observability cost, 2026-12-01"), and less often, down
    to every :data:`IDLE_S`, while none come. It copies the list and deletes what it copied
    from its front: each is one C call under the GIL, so a record appended in between stays
    for the next look, and neither side takes a lock.

    :meth:`_write_queued` writes what is queued at once, on the calling thread (the file sink's
    :meth:`~flink_agents.observability.sinks.json_lines.JsonLinesSink.write_queued`): taking a
    batch and writing it happen under one lock, shared with the writer thread, so batches reach
    the sink in the order they were queued whichever thread writes them.

    A subclass sets itself up before calling ``super().__init__`` (which starts the thread).
    """

    def __init__(self, thread_name: str) -> None:
        self._pending: list[Item] = []
        self._put: Callable[[Item], None] = self._pending.append
        self._writing = threading.Lock()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._drain, name=thread_name, daemon=True)
        self._thread.start()

    def on_record(self, record: LogRecord) -> None:
        self._put(self._queued(record))

    def close(self) -> None:
        """Write what is queued, then release the sink's resources."""
        if self._thread.is_alive():
            self._closed.set()
            self._thread.join()

    @abc.abstractmethod
    def _queued(self, record: LogRecord) -> Item:
        """What the engine's thread queues for ``record``: what :meth:`_write_batch` is
        handed."""

    @abc.abstractmethod
    def _write_batch(self, items: list[Item]) -> None:
        """Write ``items`` (in the order they were queued), and push them on (flush)."""

    @abc.abstractmethod
    def _finish(self) -> None: ...

    def _write_queued(self) -> bool:
        """Write what is queued now; False when nothing was."""
        with self._writing:
            pending = self._pending
            batch = pending.copy()
            del pending[: len(batch)]
            if batch:
                self._write_batch(batch)
            return bool(batch)

    def _drain(self) -> None:
        try:
            wait = LINGER_S
            while True:
                # Set by close() only: what was queued before it is in the list now.
                closing = self._closed.wait(wait)
                wait = LINGER_S if self._write_queued() else min(wait * 2, IDLE_S)
                if closing:
                    return
        finally:
            self._finish()
