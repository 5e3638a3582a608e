"""The event log as a JSON-lines file: a listener that writes it from its own thread, and a
reader of such a file."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from flink_agents.observability.log_records import LogRecord, parse_record, record_json
from flink_agents.observability.sinks.queued import QueuedSink


class JsonLinesSink(QueuedSink[bytes]):
    """Appends one JSON line per record to ``path``.

    A :class:`~flink_agents.observability.lines.LineListener`: the event log hands it each
    record's line (:meth:`on_line`), rendered without building the record when no other
    listener needs it; :meth:`on_record` serializes a record it is handed (~1 us). Either
    queues the line; writing happens on a
    writer thread, so the engine's loop never waits for the disk. The line, not the record,
    waits in the queue: bytes are not tracked by Python's garbage collector, while the
    records and payloads that waited for the writer (~13 a run, each for up to
    :data:`~flink_agents.observability.sinks.queued.LINGER_S`) made it collect about three times as
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


def read_records(path: str | Path) -> Iterator[LogRecord]:
    """The records of an event log file, in order (blank lines skipped).

    A line that is no record raises
    :class:`~flink_agents.observability.log_records.NotAnEventLogRecord` naming the file and the
    line (``outputs.jsonl:1: not an event log record: ...``).
    """
    with Path(path).open("rb") as lines:  # bytes: a line that is not UTF-8 is named too
        for number, line in enumerate(lines, 1):
            if line.strip():
                yield parse_record(line, f"{path}:{number}")
