"""A listener that writes the event log as JSON lines, from its own thread."""

from __future__ import annotations

import queue
import threading
from pathlib import Path

from flink_agents.observability.records import LogRecord, record_json

_CLOSE = None


class JsonLinesSink:
    """Appends one JSON line per record to ``path``.

    :meth:`on_record` only queues the record: serializing and writing happen on a writer thread,
    so the engine's loop never waits for the disk. Lines are flushed whenever the queue runs
    empty; :meth:`close` writes what is queued and closes the file.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._queue: queue.SimpleQueue[LogRecord | None] = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._write, name=f"event-log:{self.path.name}", daemon=True
        )
        self._thread.start()

    def on_record(self, record: LogRecord) -> None:
        self._queue.put(record)

    def close(self) -> None:
        if self._thread.is_alive():
            self._queue.put(_CLOSE)
            self._thread.join()

    def _write(self) -> None:
        with self.path.open("a", encoding="utf-8") as out:
            while True:
                record = self._queue.get()
                while record is not _CLOSE:
                    out.write(record_json(record) + "\n")
                    if self._queue.empty():
                        break
                    record = self._queue.get()
                out.flush()
                if record is _CLOSE:
                    return
