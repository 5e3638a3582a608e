"""A live status line for a terminal: records in and out, runs in flight.

``flink-agents run`` adds a :class:`StatusLine` listener when its stderr is a terminal; it is
redrawn in place (``\\r``) from its own thread, never from the engine's loop.
"""

from __future__ import annotations

import threading
from typing import TextIO

from flink_agents.observability.records import LogRecord, RunAdmitted, RunFinished, RunStarted

_CLEAR_LINE = "\r\x1b[K"


class StatusLine:
    """Counts what the event log reports and redraws ``in N  out N  in flight N`` on ``stream``
    every ``interval_s`` when it changed; :meth:`close` draws the last state and ends the line.
    """

    def __init__(self, stream: TextIO, interval_s: float = 0.5) -> None:
        self.stream = stream
        self.records_in = 0
        self.records_out = 0
        self.in_flight = 0
        self._shown = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._redraw, args=(interval_s,), daemon=True)
        self._thread.start()

    def on_record(self, record: LogRecord) -> None:
        # Plain integer updates: the drawing thread only reads them.
        if isinstance(record, RunAdmitted):
            self.records_in += 1
        elif isinstance(record, RunStarted):
            self.in_flight += 1
        elif isinstance(record, RunFinished):
            self.in_flight -= 1
            self.records_out += record.outputs

    def text(self) -> str:
        return f"in {self.records_in}  out {self.records_out}  in flight {self.in_flight}"

    def close(self) -> None:
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join()
            self._draw()
            self.stream.write("\n")
            self.stream.flush()

    def _redraw(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            self._draw()

    def _draw(self) -> None:
        text = self.text()
        if text != self._shown:
            self._shown = text
            self.stream.write(_CLEAR_LINE + text)
            self.stream.flush()
