"""A listener that writes the event log as JSON lines, from its own thread."""

from __future__ import annotations

from pathlib import Path

from flink_agents.observability.queued import QueuedSink
from flink_agents.observability.records import LogRecord, record_json


class JsonLinesSink(QueuedSink):
    """Appends one JSON line per record to ``path``.

    :meth:`on_record` only queues the record: serializing and writing happen on a writer thread,
    so the engine's loop never waits for the disk. The lines of what was queued are written in
    one go whenever the queue runs empty; :meth:`close` writes what is queued and closes the
    file.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._out = self.path.open("a", encoding="utf-8")
        self._lines: list[str] = []
        super().__init__(f"event-log:{self.path.name}")

    def _write(self, record: LogRecord) -> None:
        self._lines.append(record_json(record))

    def _flush(self) -> None:
        if self._lines:
            self._out.write("\n".join(self._lines) + "\n")
            self._lines.clear()
        self._out.flush()

    def _finish(self) -> None:
        self._out.close()
