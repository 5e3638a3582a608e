"""The soak's fault schedule: drawn from a seed, written out, read back to repeat a run exactly.

Each fault has a **target** (the TaskManagers, the broker, the model service, the checkpoint
storage): faults of one target never overlap (a second kill of a TaskManager that is being
replaced tests the script, not the job), faults of different targets do, on purpose: a broker
restart while a TaskManager's loss is being recovered is a restart during a restore. One kind
makes that on purpose: ``restore-restart`` kills the TaskManager a restore is running on. Gaps
between faults of one target are drawn from an exponential distribution (no rhythm the job could
fall into step with).
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

#: kind -> (target, shortest and longest duration in seconds). A TaskManager stop lasts past the
#: heartbeat timeout (10 s in scripts/flink-cluster.sh), so the JobManager declares it lost. A
#: restore restart is two kills, the second while the job is restoring after the first: it lasts
#: as long as that takes, not a drawn duration. Checkpoints failing span several checkpoint
#: intervals (2 s in bench/soak.py).
KINDS: dict[str, tuple[str, float, float]] = {
    "taskmanager-kill": ("taskmanager", 0.0, 0.0),
    "taskmanager-stop": ("taskmanager", 14.0, 20.0),
    "restore-restart": ("taskmanager", 0.0, 0.0),
    "broker-restart": ("broker", 0.0, 0.0),
    "broker-outage": ("broker", 5.0, 15.0),
    "model-failing": ("model", 3.0, 8.0),
    "model-slow": ("model", 10.0, 30.0),
    "checkpoint-failing": ("checkpoints", 10.0, 30.0),
}

#: After a fault of a target ends, the next fault of that target waits at least this long
#: (the job restarts, replays and catches up first).
SETTLE_S = 25.0


@dataclass(frozen=True)
class Fault:
    """One fault: ``kind`` of :data:`KINDS`, from ``at`` seconds after the start, for
    ``duration`` seconds (0: an instant, such as a kill); ``fault_id`` names it in reports."""

    fault_id: str
    kind: str
    at: float
    duration: float

    @property
    def target(self) -> str:
        return KINDS[self.kind][0]

    @property
    def end(self) -> float:
        return self.at + self.duration


def draw_schedule(
    seed: int,
    duration_s: float,
    mean_gap_s: float,
    *,
    warmup_s: float = 30.0,
    target_gaps: Mapping[str, float] | None = None,
) -> list[Fault]:
    """Faults for a run of ``duration_s`` seconds, none in the first ``warmup_s`` (the job
    starts and checkpoints) nor ending in the last ``SETTLE_S`` (the run drains), about one per
    ``mean_gap_s`` per target (``target_gaps`` sets another for a target: TaskManager faults
    spaced wider let a TaskManager live long enough to show growth); the same ``seed`` and
    gaps give the same schedule."""
    targets = sorted({target for target, _, _ in KINDS.values()})
    unknown = sorted(set(target_gaps or {}) - set(targets))
    if unknown:
        raise ValueError(f"unknown fault targets {unknown}; known: {targets}")
    rng = random.Random(seed)
    faults: list[Fault] = []
    for target in targets:
        gap = (target_gaps or {}).get(target, mean_gap_s)
        kinds = sorted(kind for kind, (t, _, _) in KINDS.items() if t == target)
        moment = warmup_s + rng.expovariate(1 / gap)
        while True:
            kind = rng.choice(kinds)
            _, shortest, longest = KINDS[kind]
            length = round(rng.uniform(shortest, longest), 1)
            if moment + length > duration_s - SETTLE_S:
                break
            faults.append(Fault("", kind, round(moment, 1), length))
            moment += length + SETTLE_S + rng.expovariate(1 / gap)
    faults.sort(key=lambda f: (f.at, f.kind))
    return [Fault(f"F{n:03d}-{f.kind}", f.kind, f.at, f.duration) for n, f in enumerate(faults, 1)]


def write_schedule(path: Path, seed: int, faults: list[Fault]) -> None:
    """The schedule as JSON (``--schedule`` reads it back)."""
    body = {"seed": seed, "faults": [asdict(f) for f in faults]}
    path.write_text(json.dumps(body, indent=1) + "\n")


def read_schedule(path: Path) -> list[Fault]:
    """A schedule written by :func:`write_schedule`; an unknown kind is refused by name."""
    faults = [Fault(**raw) for raw in json.loads(path.read_text())["faults"]]
    unknown = sorted({f.kind for f in faults} - set(KINDS))
    if unknown:
        raise ValueError(f"{path}: unknown fault kinds {unknown}; known: {sorted(KINDS)}")
    return faults
