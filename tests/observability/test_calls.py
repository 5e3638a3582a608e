"""Observing a store-backed call's protocol: its outcome is read off the steps it yields."""

from __future__ import annotations

from typing import Any

from flink_agents.observability import calls


class _Step:
    """A plain step of a protocol (not a tracker)."""


class _Tracker:
    attempts = 1

    def record_attempt(self) -> None:
        pass


class _Log:
    def __init__(self) -> None:
        self.outcomes: list[str] = []

    def call_finished(self, call: Any, outcome: str, started: int, **kw: Any) -> None:
        self.outcomes.append(outcome)


def _drive(steps: Any) -> Any:
    """Run the steps as a driver would (every reply None); the protocol's value."""
    try:
        next(steps)
        while True:
            steps.send(None)
    except StopIteration as done:
        return done.value


def test_a_live_call_is_told_by_its_tracker_and_each_type_of_step_is_asked_once(monkeypatch):
    asked: list[type] = []

    class CountingCheck(type):
        def __instancecheck__(cls, instance: object) -> bool:
            asked.append(type(instance))
            return hasattr(instance, "record_attempt")

    class Tracker(metaclass=CountingCheck):
        pass

    monkeypatch.setattr(calls, "AttemptTracker", Tracker)
    monkeypatch.setattr(calls, "_TRACKER_TYPES", {})
    reconcile = object()

    def live() -> Any:
        yield _Step()
        yield _Tracker()
        yield _Step()
        return "done"

    def replayed() -> Any:
        if False:  # a recorded outcome handed back: no step at all
            yield
        return "recorded"

    log = _Log()
    for _ in range(3):
        assert _drive(calls._observed_steps(live(), None, log, reconcile)) == "done"  # type: ignore[arg-type]
    assert _drive(calls._observed_steps(replayed(), None, log, reconcile)) == "recorded"  # type: ignore[arg-type]
    assert log.outcomes == ["live", "live", "live", "replayed"]
    assert asked == [_Step, _Tracker]  # not once a step: an isinstance of a Protocol is slow
