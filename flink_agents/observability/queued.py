"""A listener that writes from its own thread: the base of the event log's sinks."""

from __future__ import annotations

import abc
import queue
import threading
import time
from typing import Generic, TypeVar

from flink_agents.observability.records import LogRecord

_CLOSE = None

Item = TypeVar("Item")


LINGER_S = 0.01
"""How long the writer thread lets records gather after the first one wakes it."""


class QueuedSink(abc.ABC, Generic[Item]):
    """:meth:`on_record` only queues what :meth:`_queued` makes of the record (the record
    itself, or its line); a writer thread hands each to :meth:`_write`,
    calls :meth:`_flush` whenever the queue runs empty, and :meth:`_finish` after
    :meth:`close`, so the engine's loop never waits for the sink's I/O.

    Woken by a record, the thread waits :data:`LINGER_S` before writing, so that it takes the
    GIL once per batch rather than once per record (~13 records a run: the wake-ups cost more
    CPU than writing the lines, bench/results/operator.md, "Observability cost, 2026-12-01").

    A subclass sets itself up before calling ``super().__init__`` (which starts the thread).
    """

    def __init__(self, thread_name: str) -> None:
        self._queue: queue.SimpleQueue[Item | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._drain, name=thread_name, daemon=True)
        self._thread.start()

    def on_record(self, record: LogRecord) -> None:
        self._queue.put(self._queued(record))

    def close(self) -> None:
        """Write what is queued, then release the sink's resources."""
        if self._thread.is_alive():
            self._queue.put(_CLOSE)
            self._thread.join()

    @abc.abstractmethod
    def _queued(self, record: LogRecord) -> Item:
        """What the engine's thread queues for ``record``: what :meth:`_write` is handed."""

    @abc.abstractmethod
    def _write(self, item: Item) -> None: ...

    @abc.abstractmethod
    def _flush(self) -> None: ...

    @abc.abstractmethod
    def _finish(self) -> None: ...

    def _drain(self) -> None:
        try:
            while True:
                item = self._queue.get()
                if item is not _CLOSE:
                    time.sleep(LINGER_S)
                while item is not _CLOSE:
                    self._write(item)
                    if self._queue.empty():
                        break
                    item = self._queue.get()
                self._flush()
                if item is _CLOSE:
                    return
        finally:
            self._finish()
