"""Observing durable calls: what was called, and how its outcome came about.

The call runners stay as they are; a decorator wraps their work when the runner has an event
log (``runner.event_log``), and passes it through untouched when it has none:

* :func:`observed_protocol` wraps :class:`~flink_agents.durable.runner.StoreCallRunner`'s call
  protocol (a generator of steps). The steps it yields tell the outcome: none at all is a
  recorded outcome handed back (``replayed``), a reconcile step that ends the call is
  ``reconciled``, an attempt tracker is a ``live`` call.
* :func:`observed_direct` / :func:`observed_direct_async` wrap a runner that always calls
  (:class:`~flink_agents.durable.call.DirectCallRunner`): every call is ``live``.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from flink_agents.api.attempts import AttemptTracker, current_attempt_tracker, tracking_attempts
from flink_agents.api.context import RecordedCallError
from flink_agents.observability.records import CallOutcome
from flink_agents.observability.refs import CallRef

if TYPE_CHECKING:
    from flink_agents.observability.log import EventLog


class ObservedRunner(Protocol):
    """A call runner that may carry an event log."""

    event_log: EventLog | None


# --- the store-backed runner's protocol ---------------------------------------------------------

R = TypeVar("R", bound=ObservedRunner)
C = TypeVar("C", bound=CallRef)
Steps = Generator[Any, Any, Any]


def observed_protocol(
    *, reconcile_step: object
) -> Callable[[Callable[[R, C], Steps]], Callable[[R, C], Steps]]:
    """Decorate a runner's call protocol; ``reconcile_step`` is the step that asks the driver to
    run the call's reconciler."""

    def decorate(protocol: Callable[[R, C], Steps]) -> Callable[[R, C], Steps]:
        @functools.wraps(protocol)
        def steps(runner: R, call: C) -> Steps:
            inner = protocol(runner, call)
            log = runner.event_log
            return inner if log is None else _observed_steps(inner, call, log, reconcile_step)

        return steps

    return decorate


def _observed_steps(steps: Steps, call: CallRef, log: EventLog, reconcile_step: object) -> Steps:
    """Pass ``steps`` through to the driver (replies and errors back); record the outcome."""
    started = time.perf_counter_ns()
    outcome: CallOutcome | None = None  # no step at all: a recorded outcome handed back
    tracker: AttemptTracker | None = None
    reply: Any = None
    error: Exception | None = None
    try:
        while True:
            step = steps.throw(error) if error is not None else steps.send(reply)
            if step is reconcile_step:
                outcome = "reconciled"
            elif _is_tracker(step):
                outcome, tracker = "live", step
            try:
                reply, error = (yield step), None
            except Exception as exc:
                reply, error = None, exc
    except StopIteration as done:
        attempts = None if tracker is None else tracker.attempts
        log.call_finished(call, outcome or "replayed", started, attempts=attempts, value=done.value)
        return done.value
    except Exception as exc:
        replayed = outcome is None and isinstance(exc, RecordedCallError)
        attempts = None if tracker is None else tracker.attempts
        log.call_finished(
            call, "replayed" if replayed else "failed", started, attempts=attempts, error=exc
        )
        raise
    finally:
        steps.close()


_TRACKER_TYPES: dict[type, bool] = {}


def _is_tracker(step: object) -> bool:
    """Whether ``step`` is an :class:`AttemptTracker`, asked once per type of step: an
    ``isinstance`` against a Protocol costs ~20 us (several steps a call; ~60 us a run inside
    the operator, bench/results/analysis.md, "The event log at 200 ms")."""
    kind = type(step)
    found = _TRACKER_TYPES.get(kind)
    if found is None:
        found = _TRACKER_TYPES[kind] = isinstance(step, AttemptTracker)
    return found


# --- a runner that always calls -----------------------------------------------------------------

V = TypeVar("V")


class _CountedAttempts:
    """Counts a direct call's attempts in memory (there is no record to keep them in)."""

    def __init__(self) -> None:
        self.attempts = 0

    def record_attempt(self) -> None:
        self.attempts += 1


def observed_direct(run: Callable[[R, C], V]) -> Callable[[R, C], V]:
    """Decorate a synchronous ``run(call)`` that always calls."""

    @functools.wraps(run)
    def observed(runner: R, call: C) -> V:
        log = runner.event_log
        if log is None:
            return run(runner, call)
        started, attempts = time.perf_counter_ns(), _CountedAttempts()
        try:
            with _counting(attempts):
                value = run(runner, call)
        except Exception as exc:
            log.call_finished(call, "failed", started, attempts=attempts.attempts, error=exc)
            raise
        log.call_finished(call, "live", started, attempts=attempts.attempts, value=value)
        return value

    return observed


def observed_direct_async(
    run: Callable[[R, C], Coroutine[Any, Any, V]],
) -> Callable[[R, C], Coroutine[Any, Any, V]]:
    """Decorate an async ``run_async(call)`` that always calls."""

    @functools.wraps(run)
    async def observed(runner: R, call: C) -> V:
        log = runner.event_log
        if log is None:
            return await run(runner, call)
        started, attempts = time.perf_counter_ns(), _CountedAttempts()
        try:
            with _counting(attempts):
                value = await run(runner, call)
        except Exception as exc:
            log.call_finished(call, "failed", started, attempts=attempts.attempts, error=exc)
            raise
        log.call_finished(call, "live", started, attempts=attempts.attempts, value=value)
        return value

    return observed


def _counting(attempts: _CountedAttempts) -> contextlib.AbstractContextManager[Any]:
    # A provider's retry loop reports its attempts to the current tracker; an enclosing one
    # (a durable call inside a durable call) keeps its own.
    if current_attempt_tracker.get() is not None:
        return contextlib.nullcontext()
    return tracking_attempts(attempts)
