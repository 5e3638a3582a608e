"""A listener that writes the event log as JSON lines, from its own thread."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, cast

from flink_agents.observability.lines import line_of
from flink_agents.observability.queued import QueuedSink
from flink_agents.observability.records import LogRecord, record_json

SLICE = 16
"""Lines the writer thread renders between two hand-backs of the interpreter (see
:meth:`JsonLinesSink._write_batch`)."""

PAUSE_S = 0.0001
"""How long the writer steps aside after each :data:`SLICE`: long enough for a thread waiting
for the interpreter to take it (a zero sleep releases it, but the writer usually takes it back
first)."""


class JsonLinesSink(QueuedSink[bytes | dict[str, Any]]):
    """Appends one JSON line per record to ``path``.

    A :class:`~flink_agents.observability.lines.PartsListener`: on the event log's fast path it
    is handed each record's parts (:meth:`on_line_parts`: its fields and its payloads' JSON) and
    renders the line on its writer thread; lines of the typed path come through
    :meth:`on_line`, and :meth:`on_record` serializes a record it is handed (~1 us). Either
    way only something small is queued, and writing happens on the writer thread, so the
    engine's loop never waits for the disk. Nothing the garbage collector tracks waits in the
    queue: the records and payloads that waited for the writer (~13 a run, each for up to
    :data:`~flink_agents.observability.queued.LINGER_S`) made it collect about three times as
    often (bench/results/operator.md, "Observability cost, 2026-12-01", "Inside the
    operator"). A line is bytes; a record's parts are queued as its fields (a dict of strings
    and numbers, which the collector does not track) followed by its payloads' JSON (bytes),
    not as a pair in a tuple (tracked: a quarter more collections). A queued dict still counts
    towards the collector's next young collection until the writer drops it (~15 % more of
    them in-process; bench/results/analysis.md, "The event log at 200 ms").

    The writer renders a batch :data:`SLICE` lines at a time and steps aside between slices,
    so the engine's thread, when it waits for the interpreter, waits for a slice, not for the
    interpreter's switch interval (5 ms): the lines are rendered in the moments the engine
    leaves the interpreter free, not in the middle of its runs (bench/results/analysis.md, "The
    event log at 200 ms"). A batch is written with one ``write`` call; :meth:`close` writes
    what is queued and closes the file.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._out = self.path.open("ab")  # the lines are UTF-8 already
        super().__init__(f"event-log:{self.path.name}")

    def on_line(self, line: bytes) -> None:
        self._put(line)

    def on_line_parts(self, fields: dict[str, Any], tail: bytes) -> None:
        self._put(fields, tail)  # two items in a row: see the class docstring

    def _queued(self, record: LogRecord) -> bytes:
        return record_json(record).encode()

    def _write_batch(self, items: list[bytes | dict[str, Any]]) -> None:
        lines: list[bytes] = []
        queued = iter(items)
        for item in queued:
            if isinstance(item, bytes):
                lines.append(item)
            else:  # a record's fields, its payloads' JSON next
                lines.append(line_of(item, cast(bytes, next(queued))))
                if not len(lines) % SLICE:
                    time.sleep(PAUSE_S)
        self._out.write(b"\n".join(lines) + b"\n")
        self._out.flush()

    def _finish(self) -> None:
        self._out.close()
