"""The mini-cluster JVM a PyFlink client starts, found through /proc (Linux only)."""

from __future__ import annotations

import time
from pathlib import Path


def java_children(parent: int) -> list[int]:
    """PIDs of the java processes whose parent is ``parent``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == parent and "java" in (entry / "comm").read_text():
                found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue  # the process ended while we looked
    return found


def wait_for_jvm(parent: int, timeout: float = 60) -> int:
    """The first java child of ``parent``, waiting for it to start."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children = java_children(parent)
        if children:
            return children[0]
        time.sleep(0.5)
    raise RuntimeError(f"no JVM started by process {parent} within {timeout} s")


def peak_rss_mb(pid: int) -> float:
    """VmHWM of ``pid`` in MB (0.0 if it is gone)."""
    try:
        for row in Path(f"/proc/{pid}/status").read_text().splitlines():
            if row.startswith("VmHWM:"):
                return int(row.split()[1]) / 1024
    except OSError:
        pass
    return 0.0
