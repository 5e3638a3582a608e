"""A listener that writes the event log as JSON lines, from its own thread."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from flink_agents.observability.queued import QueuedSink
from flink_agents.observability.records import LogRecord, record_json


class JsonLinesSink(QueuedSink[bytes]):
    """Appends one JSON line per record to ``path``.

    A :class:`~flink_agents.observability.lines.LineListener`: the event log hands it each
    record's line (:meth:`on_line`), rendered without building the record when no other
    listener needs it; :meth:`on_record` serializes a record it is handed (~1 us). Either
    queues the line; writing happens on a
    writer thread, so the engine's loop never waits for the disk. The line, not the record,
    waits in the queue: bytes are not tracked by Python's garbage collector, while the
    records and payloads that waited for the writer (~13 a run, each for up to
    :data:`~flink_agents.observability.queued.LINGER_S`) made it collect about three times as
    often (bench/results/operator.md, "Observability cost, 2026-12-01", "Inside the
    operator"). A batch of lines is written with one `write` call (the writer thread takes
    what was queued at once); :meth:`close` writes what is queued and closes the file.
    """

    never_raises = True  # `on_line` is a list's append: the event log calls it unwrapped

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._out = self.path.open("ab")  # the lines are UTF-8 already
        super().__init__(f"event-log:{self.path.name}")
        self.on_line: Callable[[bytes], None] = self._put  # the list's append: no frame of ours

    def write_queued(self) -> None:
        """Write the lines queued so far to the file now, on the calling thread (a host calls
        this before a finished run's outputs leave it): written and flushed, they are the
        operating system's, and survive this process being killed (not the machine failing:
        there is no fsync)."""
        self._write_queued()

    def _queued(self, record: LogRecord) -> bytes:
        return record_json(record).encode()

    def _write_batch(self, items: list[bytes]) -> None:
        items.append(b"")  # the last line's newline, without copying the batch again
        self._out.write(b"\n".join(items))
        self._out.flush()

    def _finish(self) -> None:
        self._out.close()
