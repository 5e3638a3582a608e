"""A live status line for a terminal: records in and out, runs in flight.

``flink-agents run`` shows one on stderr when stderr is a terminal, redrawn in place (``\\r``)
about once a second from its own thread, never from the engine's loop:

* ``--local``: a :class:`StatusLine` listener counts the event log's records;
* a job spec on the mini-cluster: a :class:`PolledStatusLine` reads the job's metrics from
  Flink's REST API (:mod:`~flink_agents.flink.job_status`), since the operator runs in
  another interpreter.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol, TextIO

from flink_agents.observability import LogRecord, RunAdmitted, RunFinished, RunStarted

_CLEAR_LINE = "\r\x1b[K"
REFRESH_S = 1.0


class StatusCounts(Protocol):
    """What the line shows; ``None`` for a count the host cannot tell (yet). A
    :class:`StatusLine` counts them itself; a job's come from its REST API
    (:class:`~flink_agents.flink.job_status.JobCounts`)."""

    @property
    def records_in(self) -> int | None: ...
    @property
    def records_out(self) -> int | None: ...
    @property
    def in_flight(self) -> int | None: ...


def status_text(counts: StatusCounts) -> str:
    """The line's text: ``in 3  out 2  in flight 1`` (``?`` for a count not known)."""

    def shown(value: int | None) -> str:
        return "?" if value is None else str(value)

    return (
        f"in {shown(counts.records_in)}  out {shown(counts.records_out)}  "
        f"in flight {shown(counts.in_flight)}"
    )


class _LiveLine:
    """Redraws ``counts()`` on ``stream`` every ``interval_s`` when it changed; :meth:`close`
    draws the last state and ends the line (once)."""

    def __init__(
        self, stream: TextIO, counts: Callable[[], StatusCounts | None], interval_s: float
    ) -> None:
        self.stream = stream
        self._counts = counts
        self._shown = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._redraw, args=(interval_s,), daemon=True)
        self._thread.start()

    def close(self) -> None:
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join()
            self._draw()
            if self._shown:
                self.stream.write("\n")
                self.stream.flush()

    def _redraw(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            self._draw()

    def _draw(self) -> None:
        counts = self._counts()
        if counts is None:  # nothing to tell yet: keep what is shown
            return
        text = status_text(counts)
        if text != self._shown:
            self._shown = text
            self.stream.write(_CLEAR_LINE + text)
            self.stream.flush()


class StatusLine(_LiveLine):
    """An event-log listener: counts what the records report (inputs admitted, outputs of
    finished runs, runs started and not finished) and shows it."""

    record_kinds = frozenset({"run_admitted", "run_started", "run_finished"})

    def __init__(self, stream: TextIO, interval_s: float = REFRESH_S) -> None:
        self.records_in = 0
        self.records_out = 0
        self.in_flight = 0
        super().__init__(stream, self.counts, interval_s)

    def on_record(self, record: LogRecord) -> None:
        # Plain integer updates: the drawing thread only reads them.
        if isinstance(record, RunAdmitted):
            self.records_in += 1
        elif isinstance(record, RunStarted):
            self.in_flight += 1
        elif isinstance(record, RunFinished):
            self.in_flight -= 1
            self.records_out += record.outputs

    def counts(self) -> StatusCounts:
        return self  # its own counts: the drawing thread reads each once per draw


class PolledStatusLine(_LiveLine):
    """Shows what ``read`` returns, called from the drawing thread (it may block a while, as a
    REST request does); ``read`` returning None (the job not running yet) keeps the line."""

    def __init__(
        self,
        stream: TextIO,
        read: Callable[[], StatusCounts | None],
        interval_s: float = REFRESH_S,
    ) -> None:
        super().__init__(stream, read, interval_s)


def status_stream(stream: TextIO) -> TextIO | None:
    """``stream`` if a status line belongs on it (a terminal), else None (piped, redirected)."""
    isatty = getattr(stream, "isatty", None)
    return stream if isatty is not None and isatty() else None
