"""One line per minute of a soak's ``samples.jsonl``: what each busy TaskManager's RSS is made of.

    python -m bench.soak_minutes .cache/soak/<run>/samples.jsonl

Per minute: the jobs' restarts (summed), the committed outputs, then per TaskManager above
:data:`BUSY_MB` (one that holds a job): RSS, its Java-heap pages, other anonymous memory,
1 MiB anonymous mappings, executable anonymous memory (code caches), file-backed pages (all
from ``smaps``, bench/native_heap.py), the C allocator's bytes in use and held, and pymalloc
blocks in millions. Written for bench/results/soak-diagnostics-20261205/minutes-*.txt.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

BUSY_MB = 400.0
"""An idle TaskManager stays near 300 MB; one that holds a job is above this."""


def minute_lines(path: Path) -> list[str]:
    """The first sample of each minute of the run at ``path``, formatted."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not rows:
        return []
    start, last, lines = rows[0]["t"], -1, []
    for row in rows:
        minute = (row["t"] - start) / 60
        if int(minute) == last:
            continue
        last = int(minute)
        pids = sorted({k.split("@")[1] for k in row if k.startswith("taskmanager_rss_mb@")})
        parts = []
        for pid in pids:

            def get(name: str, pid: str = pid, row: dict = row) -> float:
                return float(row.get(f"{name}@{pid}", 0.0))

            if get("taskmanager_rss_mb") < BUSY_MB:
                continue
            parts.append(
                f"{pid}: rss {get('taskmanager_rss_mb'):.0f} jheap {get('rss_java_heap_mb'):.0f} "
                f"anon {get('rss_anon_other_mb'):.0f} 1m {get('rss_anon_1mib_mb'):.0f} "
                f"exec {get('rss_anon_exec_mb'):.0f} file {get('rss_file_mb'):.0f} "
                f"inuse {get('malloc_in_use_mb'):.0f} held {get('malloc_held_mb'):.0f} "
                + (
                    f"active {get('malloc_active_mb'):.0f} dirty {get('malloc_dirty_mb'):.0f} "
                    if f"malloc_dirty_mb@{pid}" in row
                    else ""
                )
                + f"blk {get('python_blocks') / 1e6:.2f}"
            )
        lines.append(
            f"{minute:4.1f} r={row.get('job_restarts')} out={row['outputs']} | " + " | ".join(parts)
        )
    return lines


if __name__ == "__main__":
    print("\n".join(minute_lines(Path(sys.argv[1]))))
