"""Named kill points: a test-only way to fail a job at a chosen moment of the durable protocol.

Each :class:`KillPoint` names a moment where a crash would leave a different trace behind (a call
sent but not recorded, a record acknowledged but not yet used, an output emitted but not yet
checkpointed, ...). The code at each moment reads::

    if faults.ARMED is not None:
        faults.ARMED.reached(KillPoint.AFTER_RECORD_ACKED)

so a job without faults pays one module attribute read and a ``None`` check per moment.

A :class:`FaultPlan` fails the job at the ``n``-th time a point is reached, once: it raises
:class:`KillPointReached`, a ``BaseException`` like a process death, which no action, error
policy or durable call catches and records; the engine stops its runs and the Flink task fails,
so Flink restarts the job from its last checkpoint. Whether a point already fired is kept in a
marker file (``<marker_dir>/<point>.fired``, holding the epoch time of the fault; beside it
``<point>.passages`` counts the passages) when a folder is given: a restarted Python worker
(process mode, another TaskManager) then does not fire again, and a harness reads when the
fault happened. Each :func:`arm` also adds its epoch time to ``<marker_dir>/armed``: the
operator arms the plan when an attempt opens, once the previous attempt is closed, so a harness
reads where one attempt of the job ends and the next begins.

A plan is armed from the environment (:data:`KILL_POINTS_ENV`, :data:`KILL_MARKERS_ENV`) when
this module is first imported, or by :func:`arm` (the operator does, from its options, which
reach the Python workers of a cluster with the job).
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

from flink_agents.durable.call import DurableCall


class KillPoint(str, Enum):
    """The moments a fault plan can fail a job at, in the order a call and its run pass them."""

    BEFORE_CALL_SENT = "before-call-sent"
    """A durable call is about to be sent; its record (if any) says PENDING."""
    AFTER_REPLY_BEFORE_RECORD = "after-reply-before-record"
    """The call's reply arrived; its outcome is not recorded yet."""
    AFTER_RECORD_ACKED = "after-record-acked"
    """The call's outcome is acknowledged by the store; the action has not used it yet. A
    runner hands an outcome to the action without waiting for its acknowledgement (the run's
    next call and outputs wait for it), so a plan armed at this point makes each call wait for
    its own record first: the moment then exists, at the cost of one round trip per call."""
    AFTER_ACTION_COMPLETED = "after-action-completed"
    """An action's completion record is acknowledged; its events (and the run's output) are
    not handled yet. Nothing waits for a completion record otherwise, so, as at
    :attr:`AFTER_RECORD_ACKED`, a plan armed here waits for it."""
    AFTER_OUTPUT = "after-output"
    """A run's outputs left the operator; no checkpoint covers them yet."""
    DURING_SNAPSHOT = "during-snapshot"
    """The action-state store's recovery marker is being taken for the key states a checkpoint
    will hold (the Python part of a snapshot; Flink's own runs in the JVM)."""
    DURING_RESTORE = "during-restore"
    """A replay after a restart is handing back a recorded call: a second failure while
    replaying."""
    WHILE_PAUSED = "while-paused"
    """A run is parked at a wait (docs/waits.md): the wait is registered in the key's state and
    its ``waiting`` record has left the operator; no decision has reached it yet."""
    DECISION_READ = "decision-read"
    """A decision (or event) record was read from the second input and taken into the key's
    state; the run it resumes has not got it yet, so nothing recorded it."""
    DECISION_RECORDED = "decision-recorded"
    """A wait call's result (its decision, timeout or elapsed time) is acknowledged by the
    store; no checkpoint covers the key state that applied it yet. Only a probe waits for the
    acknowledgement here, as at :attr:`AFTER_RECORD_ACKED`."""
    TIMER_FIRING = "timer-firing"
    """A key's timer fired and resolved a wait's deadline or moved a scheduled follow-up into
    the key's pending inputs (in the key's state); the runs have not got them yet."""


WAIT_POINTS = frozenset(
    {
        KillPoint.WHILE_PAUSED,
        KillPoint.DECISION_READ,
        KillPoint.DECISION_RECORDED,
        KillPoint.TIMER_FIRING,
    }
)
"""The kill points only a job whose runs wait passes (bench/crash_waits.py)."""


KILL_POINTS_ENV = "FLINK_AGENTS_KILL_POINTS"
"""``point@n[,point@n...]``: fail at the ``n``-th time each point is reached (``n`` >= 1)."""
KILL_MARKERS_ENV = "FLINK_AGENTS_KILL_MARKERS"
"""Folder of the ``<point>.fired`` marker files (optional: in memory without it)."""


class KillPointReached(BaseException):
    """The injected crash. A ``BaseException``: nothing that handles errors may catch it."""

    def __init__(self, point: KillPoint, hit: int) -> None:
        super().__init__(f"injected crash at kill point {point.value} (hit {hit})")
        self.point = point
        self.hit = hit


class Writes(Protocol):
    """What a probe may read of the calls it watches (:class:`~flink_agents.durable.calls.
    DurableCalls` fits)."""

    @property
    def writes(self) -> int:
        """The ticket of the latest store write (the outcomes recorded so far put first)."""


class CallProbe:
    """What :class:`~flink_agents.durable.calls.DurableCalls` reaches along a call's way: the
    kill points, the call's invocation and its return. The base does nothing but invoke; a
    :class:`FaultPlan` fails at kill points, a test harness counts invocations or holds one.
    """

    def arms(self, point: KillPoint) -> bool:
        """Whether reaching ``point`` matters (the calls then make the moment exist: they wait
        for a write that nothing else would wait for)."""
        return False

    def reached(self, point: KillPoint) -> None:
        """A call (or a run) passes ``point``."""

    def invoke(self, call: DurableCall, *, blocking: bool = False) -> Any:
        """Make ``call`` (its function with its arguments); may return an awaitable unless
        ``blocking`` (a call of a synchronous action, which cannot await)."""
        return call.invoke()

    def returned(self, call: DurableCall, calls: Writes) -> None:
        """``call`` returned a value, its outcome recorded by ``calls`` (not acknowledged yet)."""


@dataclass
class FaultPlan(CallProbe):
    """Fail once at the ``kills[point]``-th time each point is reached."""

    kills: Mapping[KillPoint, int]
    marker_dir: Path | None = None
    _hits: Counter[KillPoint] = field(default_factory=Counter, init=False, repr=False)
    _fired: set[KillPoint] = field(default_factory=set, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @classmethod
    def parse(cls, spec: str, marker_dir: str | Path | None = None) -> FaultPlan:
        """A plan from ``point@n[,point@n...]``; raises ``ValueError`` naming a bad part."""
        kills: dict[KillPoint, int] = {}
        for part in filter(None, (p.strip() for p in spec.split(","))):
            name, _, nth = part.partition("@")
            try:
                point, hit = KillPoint(name), int(nth or "1")
            except ValueError:
                known = ", ".join(p.value for p in KillPoint)
                raise ValueError(
                    f"kill point {part!r}: expected NAME@N, NAME one of {known}"
                ) from None
            if hit < 1:
                raise ValueError(f"kill point {part!r}: N counts from 1")
            kills[point] = hit
        return cls(kills, Path(marker_dir) if marker_dir else None)

    def arms(self, point: KillPoint) -> bool:
        """Whether this plan fails at ``point`` (or counts its passages)."""
        return point in self.kills

    def reached(self, point: KillPoint) -> None:
        """Count one passage of ``point``; raises :class:`KillPointReached` at the chosen one."""
        nth = self.kills.get(point)
        if nth is None:
            return
        with self._lock:
            self._hits[point] += 1
            hit = self._hits[point]
            if self.marker_dir is not None:
                self.marker_dir.mkdir(parents=True, exist_ok=True)
                (self.marker_dir / f"{point.value}.passages").write_text(str(hit))
            if hit < nth or self.fired_at(point) is not None:
                return
            self._fired.add(point)
            if self.marker_dir is not None:
                self._marker(point).write_text(repr(time.time()))
        raise KillPointReached(point, hit)

    def passages(self) -> dict[KillPoint, int]:
        """How often each armed point was reached: in this process, or, with a marker folder,
        by the last process that reached it (a Python worker is another process than the
        client of a mini-cluster). A plan armed at a passage that never comes counts them."""
        if self.marker_dir is None:
            with self._lock:
                return dict(self._hits)
        return {
            point: int(counted.read_text())
            for point in self.kills
            if (counted := self.marker_dir / f"{point.value}.passages").exists()
        }

    def armed_at(self) -> list[float]:
        """When each :func:`arm` of this plan happened (epoch seconds, in order), as the marker
        folder keeps them: one per attempt of the job; empty without a folder."""
        if self.marker_dir is None or not (self.marker_dir / _ARMED).exists():
            return []
        return [float(line) for line in (self.marker_dir / _ARMED).read_text().split()]

    def note_armed(self) -> None:
        """Add now to the times :meth:`armed_at` reads (nothing without a marker folder)."""
        if self.marker_dir is None:
            return
        self.marker_dir.mkdir(parents=True, exist_ok=True)
        with (self.marker_dir / _ARMED).open("a") as armed:
            armed.write(f"{time.time()!r}\n")

    def fired_at(self, point: KillPoint) -> float | None:
        """When ``point`` fired (epoch seconds; 0.0 if only this process knows), else None."""
        if self.marker_dir is not None and self._marker(point).exists():
            return float(self._marker(point).read_text())
        return 0.0 if point in self._fired else None

    def _marker(self, point: KillPoint) -> Path:
        assert self.marker_dir is not None
        return self.marker_dir / f"{point.value}.fired"


_ARMED = "armed"
"""The marker file of the times a plan was armed."""

ARMED: FaultPlan | None = None
"""The armed plan, or None (always, outside fault-injection tests)."""


def arm(spec: str, marker_dir: str | Path | None = None) -> FaultPlan:
    """Arm the plan ``spec``; the same plan again keeps its counts (a restarted attempt in the
    same interpreter continues the count instead of starting over)."""
    global ARMED
    plan = FaultPlan.parse(spec, marker_dir)
    if ARMED is None or (ARMED.kills, ARMED.marker_dir) != (plan.kills, plan.marker_dir):
        ARMED = plan
    ARMED.note_armed()
    return ARMED


def disarm() -> None:
    """No kill points from now on."""
    global ARMED
    ARMED = None


if os.environ.get(KILL_POINTS_ENV):
    arm(os.environ[KILL_POINTS_ENV], os.environ.get(KILL_MARKERS_ENV))
