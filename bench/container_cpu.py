"""The CPU time containers got, read from their cgroups while a job runs (Linux only).

On a machine shared with other work, a cluster of containers gets what the kernel's scheduler
gives its cgroups, whatever the number of TaskManagers; the cores each container actually used
over the measured part of a job are what a throughput figure must be read against.
"""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CGROUP = Path("/sys/fs/cgroup")


def engine(*args: str) -> str:
    """The container engine the project's scripts pick (scripts/container-engine.sh), run with
    ``args``; its standard output, or "" when it fails."""
    pick = f'source "{REPO}/scripts/container-engine.sh" && container_engine_pick "{REPO}"'
    done = subprocess.run(
        ["bash", "-c", f'{pick} && "${{engine[@]}}" "$@"', "engine", *args],
        capture_output=True,
        text=True,
    )
    return done.stdout if done.returncode == 0 else ""


def usage_file(pid: int) -> Path | None:
    """The file holding the CPU time of ``pid``'s cgroup: cgroup v2's ``cpu.stat`` or v1's
    ``cpuacct.usage``; None when neither is readable."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "cpuacct" in controllers.split(","):
            for mount in ("cpuacct", "cpu,cpuacct", "cpuacct,cpu"):
                candidate = CGROUP / mount / path.lstrip("/") / "cpuacct.usage"
                if candidate.exists():
                    return candidate
    unified = CGROUP / lines[-1].split(":", 2)[2].lstrip("/") / "cpu.stat" if lines else None
    return unified if unified is not None and unified.exists() else None


def cpu_seconds(usage: Path) -> float:
    """CPU seconds so far in the cgroup whose ``usage`` file this is."""
    text = usage.read_text()
    if usage.name == "cpuacct.usage":
        return int(text) / 1e9
    fields = dict(line.split() for line in text.splitlines())
    return int(fields["usage_usec"]) / 1e6


class CpuSampler:
    """Every ``interval_s``, the CPU seconds of each named container so far, stamped with the
    wall time (epoch seconds); containers whose cgroup is not readable are left out."""

    def __init__(self, names: list[str], interval_s: float = 0.5) -> None:
        self.files: dict[str, Path] = {}
        for name in names:
            pid = engine("inspect", "-f", "{{.State.Pid}}", name).strip()
            found = usage_file(int(pid)) if pid.isdigit() and pid != "0" else None
            if found is not None:
                self.files[name] = found
        self.interval_s = interval_s
        self.samples: list[tuple[float, dict[str, float]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                seconds = {name: cpu_seconds(path) for name, path in self.files.items()}
            except (OSError, ValueError, KeyError):
                seconds = {}  # a container stopped between two samples
            if seconds:
                self.samples.append((time.time(), seconds))
            self._stop.wait(self.interval_s)

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def cores(self, start: float, end: float) -> dict[str, float]:
        """Each container's CPU seconds per wall second between the samples nearest ``start``
        and ``end`` (empty when fewer than two samples fall between them)."""
        inside = [s for s in self.samples if start <= s[0] <= end]
        if len(inside) < 2:
            return {}
        (t0, first), (t1, last) = inside[0], inside[-1]
        return {name: round((last[name] - first[name]) / (t1 - t0), 2) for name in first}
