"""A listener that writes from its own thread: the base of the event log's sinks."""

from __future__ import annotations

import abc
import threading
import time
from collections import deque
from typing import Generic, TypeVar

from flink_agents.observability.records import LogRecord

Item = TypeVar("Item")


LINGER_S = 0.01
"""How long the writer thread lets records gather after the first one wakes it."""


class QueuedSink(abc.ABC, Generic[Item]):
    """:meth:`on_record` only queues what :meth:`_queued` makes of the record (the record
    itself, or its line); a writer thread hands what was queued to :meth:`_write_batch`, in
    order, a batch at a time, and calls :meth:`_finish` after :meth:`close`, so the engine's
    loop never waits for the sink's I/O.

    Woken by a record, the thread waits :data:`LINGER_S` before writing, so that it takes the
    GIL once per batch rather than once per record (~13 records a run: the wake-ups cost more
    CPU than writing the lines, bench/results/operator.md, "Observability cost, 2026-12-01").
    The engine appends to a deque and the writer pops what it finds there: both are atomic
    under the GIL, so neither side takes a lock per record (a lock per line cost the engine's
    thread ~1,500 instructions a record, bench/results/analysis.md, "The event log's
    instructions per run"); the writer wakes on the first record after it emptied the deque.

    A subclass sets itself up before calling ``super().__init__`` (which starts the thread).
    """

    def __init__(self, thread_name: str) -> None:
        self._pending: deque[Item] = deque()
        self._closing = False
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._drain, name=thread_name, daemon=True)
        self._thread.start()

    def on_record(self, record: LogRecord) -> None:
        self._put(self._queued(record))

    def close(self) -> None:
        """Write what is queued, then release the sink's resources."""
        if self._thread.is_alive():
            self._closing = True
            self._wake.set()
            self._thread.join()

    def _put(self, item: Item) -> None:
        self._pending.append(item)
        # Asked of the signal, not of the deque's length: with two threads putting, both could
        # see a length of 2 and neither wake the writer. The writer clears the signal before
        # it empties the deque, so an item it will not pop finds the signal clear.
        if not self._wake.is_set():
            self._wake.set()

    @abc.abstractmethod
    def _queued(self, record: LogRecord) -> Item:
        """What the engine's thread queues for ``record``: what :meth:`_write_batch` is
        handed."""

    @abc.abstractmethod
    def _write_batch(self, items: list[Item]) -> None:
        """Write ``items`` (in the order they were queued), and push them on (flush)."""

    @abc.abstractmethod
    def _finish(self) -> None: ...

    def _drain(self) -> None:
        try:
            while True:
                self._wake.wait()
                if not self._closing:
                    time.sleep(LINGER_S)
                # Cleared before the deque is emptied: a record put after the last pop finds
                # the signal clear and sets it again.
                self._wake.clear()
                closing = self._closing
                pending, batch = self._pending, []
                while pending:
                    batch.append(pending.popleft())
                if batch:
                    self._write_batch(batch)
                if closing:
                    return
        finally:
            self._finish()
