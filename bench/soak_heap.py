"""The Python heap of the soak's job, seen from inside the process that runs it.

In thread mode the interpreter lives inside the TaskManager's JVM, so the TaskManager's RSS
covers the JVM and Python together. :class:`PythonHeapSampler` is an event-log listener (the
soak's job spec names it: ``bench.soak_heap:PythonHeapSampler``): at most every
:data:`EVERY_S` it writes the interpreter's own figures to ``<folder>/<pid>.json`` (the folder
from :data:`FOLDER_VARIABLE`, set in the TaskManagers' environment by ``bench/soak.py``), and
the soak's sampler reads them with :func:`read_heaps`. The figures are cheap: the count of
pymalloc blocks in use (:func:`sys.getallocatedblocks`, about one per live small object, no
walk of the heap), the Python threads, with their count per name (digits left out: a thread
left behind by each restart shows as its name's count rising), and the C allocator's bytes in
use and held (bench/native_heap.py: a step of RSS that is not in use is the allocator keeping
freed memory); ``tracemalloc`` would cost every allocation.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.native_heap import allocator_figures
from flink_agents.observability import LogRecord

FOLDER_VARIABLE = "FLINK_AGENTS_SOAK_HEAP_DIR"
EVERY_S = 5.0


def heap_figures() -> dict[str, Any]:
    """This interpreter's figures now: ``t`` (epoch seconds), ``python_blocks``,
    ``python_threads``, ``thread_names`` (the count per name, its digits as ``N``), and
    :func:`~bench.native_heap.allocator_figures`."""
    names = Counter(re.sub(r"\d+", "N", thread.name) for thread in threading.enumerate())
    return {
        "t": time.time(),
        "python_blocks": float(sys.getallocatedblocks()),
        "python_threads": float(threading.active_count()),
        "thread_names": dict(sorted(names.items())),
        **allocator_figures(),
    }


class Throttled:
    """An event-log listener that does its work (:meth:`act`) on a record at most every
    ``every_s`` seconds (it runs on the engine's thread: one clock read per record otherwise)."""

    every_s = EVERY_S
    _due = 0.0

    def on_record(self, record: LogRecord) -> None:
        now = time.monotonic()
        if now < self._due:
            return
        self._due = now + self.every_s
        self.act()

    def act(self) -> None:
        raise NotImplementedError


class PythonHeapSampler(Throttled):
    """Writes :func:`heap_figures` to ``<folder>/<pid>.json`` at most every :data:`EVERY_S`."""

    def __init__(self) -> None:
        folder = os.environ.get(FOLDER_VARIABLE)
        if not folder:
            raise RuntimeError(
                f"{FOLDER_VARIABLE} is not set in this TaskManager's environment: "
                "bench/soak.py sets it when it starts the cluster"
            )
        Path(folder).mkdir(parents=True, exist_ok=True)
        self.path = Path(folder) / f"{os.getpid()}.json"

    def act(self) -> None:
        partial = self.path.with_name(f"{self.path.stem}-{id(self)}.tmp")  # one per instance
        partial.write_text(json.dumps(heap_figures()))
        os.replace(partial, self.path)  # the reader never sees half a file


def read_heaps(folder: Path, now: float, fresh_s: float) -> dict[int, dict[str, Any]]:
    """Per pid, the figures written less than ``fresh_s`` before ``now`` (an idle or dead
    process's last figures are left out)."""
    found: dict[int, dict[str, Any]] = {}
    for path in folder.glob("*.json"):
        try:
            figures = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # replaced or removed while we read
        if now - figures["t"] < fresh_s:
            found[int(path.stem)] = figures
    return found
