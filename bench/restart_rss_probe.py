"""What the TaskManager's C heap holds, asked from inside the job's process (issue 37).

An event-log listener of the job (``bench.restart_rss_probe:MallocProbe``) that answers requests
``bench/restart_rss.py --probe`` writes to ``<folder>/request.json`` (the folder from
:data:`FOLDER_VARIABLE`, in the TaskManager's environment): glibc's ``mallinfo2`` (bytes
malloc hands out and bytes it keeps free), optionally after ``malloc_trim(0)``; the
interpreter's pymalloc blocks and gc-tracked objects by type; and ``tracemalloc``'s growth by
source line since the first request that started it. It runs on the engine's thread when a
record passes (so only while the job has traffic), in the process whose memory is measured:
calling into a JVM with gdb to do the same crashed the TaskManager.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import sys
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

from bench.native_heap import libc, mallinfo_mb
from bench.soak_heap import Throttled

FOLDER_VARIABLE = "FLINK_AGENTS_RSS_PROBE_DIR"
EVERY_S = 0.5


#: The tracemalloc snapshot the first ``tracemalloc: start`` request took (process-wide, like
#: tracemalloc itself: the listener is made anew at each attempt).
_baseline: list[tracemalloc.Snapshot] = []


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


#: Where pemja 0.5's ``PyJMethodObject`` keeps its name: after the object header (16 bytes),
#: the Java ``Method`` reference and its method id (8 bytes each) on a 64-bit build.
_PYJMETHOD_NAME_OFFSET = 32


def pemja_method_lists(objects: list[Any]) -> list[tuple[str, int]]:
    """The lists holding pemja ``PyJMethod`` objects (a multi-method's overloads), counted by
    the method name each holds: which Java methods, so which Java classes, pemja keeps of
    every closed interpreter."""
    names: Counter[str] = Counter()
    for o in objects:
        if type(o) is list and o and all(type(m).__name__ == "PyJMethod" for m in o):
            address = id(o[0]) + _PYJMETHOD_NAME_OFFSET
            pointer = ctypes.cast(address, ctypes.POINTER(ctypes.py_object))
            names[f"{pointer.contents.value}/{len(o)}"] += 1
    return names.most_common(60)


def answer(request: dict[str, Any]) -> dict[str, Any]:
    reply: dict[str, Any] = {"id": request["id"], "pid": os.getpid(), "t": time.time()}
    reply["rss_mb"] = rss_mb()
    reply["malloc_mb"] = mallinfo_mb()
    if request.get("trim"):
        libc().malloc_trim(0)
        reply["rss_after_trim_mb"] = rss_mb()
        reply["malloc_after_trim_mb"] = mallinfo_mb()
    reply["python_blocks"] = sys.getallocatedblocks()
    operator = sys.modules.get("flink_agents.flink.operator")
    reply["operator_file"] = getattr(operator, "__file__", None)
    reply["trims_at_open"] = "flink_agents.flink.native_heap" in sys.modules
    if request.get("types"):
        # The operator freezes what lives at each open (flink_agents.flink.operator), and
        # gc.get_objects() leaves the frozen objects out: unfreeze to count them too, and
        # count apart what the last open froze (what outlived every earlier attempt).
        reply["frozen"] = gc.get_freeze_count()
        young = {id(o) for o in gc.get_objects()}
        gc.unfreeze()
        objects = gc.get_objects()
        gc.freeze()
        counts = Counter(type(o).__qualname__ for o in objects)
        reply["gc_objects"] = sum(counts.values())
        reply["types"] = dict(counts.most_common(80))
        reply["frozen_types"] = dict(
            Counter(type(o).__qualname__ for o in objects if id(o) not in young)
        )
        # Modules that no import finds again (sys.modules holds another or none).
        reply["stray_modules"] = Counter(
            o.__name__
            for o in objects
            if isinstance(o, ModuleType) and sys.modules.get(o.__name__) is not o
        ).most_common(10)
        reply["pemja_method_lists"] = pemja_method_lists(objects)
        reply["sys_path"] = len(sys.path)
        reply["sys_path_distinct"] = len(set(sys.path))
        reply["importer_cache"] = len(sys.path_importer_cache)
        del objects, young
    action = request.get("tracemalloc")
    if action == "start" and not tracemalloc.is_tracing():
        tracemalloc.start(int(request.get("frames", 1)))
        _baseline.append(tracemalloc.take_snapshot())
    elif action == "snapshot" and tracemalloc.is_tracing() and _baseline:
        snapshot = tracemalloc.take_snapshot()
        traced, peak = tracemalloc.get_traced_memory()
        reply["traced_mb"] = traced / 2**20
        reply["traced_peak_mb"] = peak / 2**20
        diff = snapshot.compare_to(_baseline[0], "traceback" if request.get("frames") else "lineno")
        reply["growth"] = [
            {
                "kb": stat.size_diff / 1024,
                "count": stat.count_diff,
                "where": [str(frame) for frame in stat.traceback.format()[-8:]],
            }
            for stat in diff[:25]
        ]
    return reply


class MallocProbe(Throttled):
    """Answers ``<folder>/request.json`` once per request id with ``<folder>/reply-<id>.json``."""

    every_s = EVERY_S

    def __init__(self) -> None:
        folder = os.environ.get(FOLDER_VARIABLE)
        if not folder:
            raise RuntimeError(f"{FOLDER_VARIABLE} is not set in this TaskManager's environment")
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)

    def act(self) -> None:
        try:
            request = json.loads((self.folder / "request.json").read_text())
        except (OSError, ValueError):
            return
        reply = self.folder / f"reply-{request['id']}.json"
        if reply.exists():
            return
        partial = reply.with_suffix(".tmp")
        partial.write_text(json.dumps(answer(request)))
        os.replace(partial, reply)
