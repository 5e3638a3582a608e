"""Drive a :class:`RunEngine` from a synchronous host, such as a Flink operator.

The engine is single-threaded asyncio; a Flink keyed function is called synchronously, one
record or timer at a time, and may only touch a key's state while that key is current. The
:class:`EngineHost` bridges the two: the engine runs on its own event loop thread, the host
thread submits inputs (blocking while the window of unfinished inputs is full: that is the
back-pressure), and finished runs wait in a per-key mailbox until the host visits that key again
(a timer) to emit outputs and commit the key's state.

A key is named by its token, the canonical JSON text of its value (the Flink key as it is): the
host keys its books by it and decodes it once, on the loop thread, for the engine. To tell a
caller when to come back, the host keeps for each key with unfinished inputs when its head input
started running (the later of its submit and the key's previous finish: one key runs one input
at a time), and moving averages of the run durations measured from that start and of their
deviation: a key whose next input was queued behind its running one is not expected to finish a
whole queue wait later.

Nothing here polls: waiting is done on a condition variable signalled by the loop thread.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flink_agents.api.long_term_memory import StoredMemory
from flink_agents.api.waits import Decision
from flink_agents.durable.freeze_fence import TaskEndedError
from flink_agents.durable.identity import canonical_json
from flink_agents.runtime.budget_meter import KeySpend
from flink_agents.runtime.engine import RunEngine, RunResult
from flink_agents.runtime.state import KeyState

_SMOOTHING = 0.05
"""Weight of the newest run in the moving averages of run durations and of their deviation."""


@dataclass(frozen=True)
class CompletedRun:
    """A finished run and the key's short-term and long-term memory as that run committed them.

    The memories are the engine's committed memories themselves, not copies (the engine never
    changes them in place): a host commits them to the key's state once, when it takes the run.
    """

    result: RunResult
    short_term_memory: dict[str, Any]
    spend: KeySpend | None = None  # the key's spend as of this run (runtime/budget_meter.py)
    long_term_memory: dict[str, dict[str, StoredMemory]] = field(default_factory=dict)
    short_term_expiry: dict[str, float] = field(default_factory=dict)  # entry -> epoch ms


@dataclass(frozen=True, slots=True)
class KeyProgress:
    """What a visit of one key finds, read at one moment (no run can finish in between)."""

    completed: list[CompletedRun]
    """Finished runs not taken before, in order."""
    unfinished: int
    """Inputs of the key whose run has not finished (running or queued)."""
    due: float | None
    """When (the host's clock, s) the key's running input is expected to be done: its start plus
    the average run duration. None when nothing is unfinished."""


def _quiet_once_the_task_ended(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The loop's exception handler: a :class:`TaskEndedError` raised in a callback or left in a
    task nobody awaits is the engine stopping as its Flink task ended (said once, by the keyed
    logic that closes it), not an error to log with a trace at every restart; anything else
    goes to asyncio's default handler."""
    if isinstance(context.get("exception"), TaskEndedError):
        return
    loop.default_exception_handler(context)


class EngineHost:
    """Runs ``engine`` on a background event loop thread for a synchronous caller.

    ``max_unfinished`` bounds the inputs submitted whose run has not finished (running or queued
    behind another input of the same key or behind the engine's ``max_in_flight`` window);
    :meth:`submit` blocks while it is reached. ``clock`` (monotonic seconds) times the runs.
    With ``idle_key_s``, :meth:`forget_idle` lets the engine drop the keys idle that long.
    """

    def __init__(
        self,
        engine_factory: Callable[..., RunEngine],
        *,
        max_unfinished: int,
        clock: Callable[[], float] = time.monotonic,
        idle_key_s: float | None = None,
    ) -> None:
        if max_unfinished < 1:
            raise ValueError("max_unfinished must be at least 1")
        self._max_unfinished = max_unfinished
        self._clock = clock
        self._idle_key_s = idle_key_s
        self._next_sweep = 0.0
        self._engine = engine_factory(on_result=self._on_result, on_failure=self._on_failure)
        self._loop = asyncio.new_event_loop()
        self._loop.set_exception_handler(_quiet_once_the_task_ended)
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="flink-agents-engine", daemon=True
        )
        self._changed = threading.Condition()
        self._unfinished: dict[str, int] = {}
        self._total_unfinished = 0
        self._done: dict[str, deque[CompletedRun]] = defaultdict(deque)
        # The keys the engine holds (restored, or handed an input), and when each was last
        # handed anything: forget_idle lets go of the ones idle long enough.
        self._last_handed: dict[str, float] = {}
        self._failure: BaseException | None = None
        self._head_started: dict[str, float] = {}  # keys with unfinished inputs
        self._mean_seconds: float | None = None  # until a run has finished
        self._deviation_seconds = 0.0
        # Keys whose head run paused at a wait, and how many of their inputs wait behind it (not
        # unfinished: nothing of theirs runs until a decision resumes the key).
        self._parked: dict[str, int] = {}
        # Under ``while_paused: alongside``, the waits of keys' paused runs instead: a paused
        # run is not unfinished (its key's later inputs run meanwhile) until resumed.
        self._set_aside: dict[str, set[str]] = {}
        self._inbox: deque[tuple[Callable[..., object], tuple[Any, ...]]] = deque()
        self._drain_scheduled = False
        self._thread.start()

    @property
    def engine(self) -> RunEngine:
        return self._engine

    @property
    def unfinished(self) -> int:
        """Inputs submitted (or restored) whose run has not finished."""
        with self._changed:
            return self._total_unfinished

    @property
    def expected_run_seconds(self) -> float:
        """How long a run likely takes from its start: the moving average of run durations
        (0 until a run has finished)."""
        return self._mean_seconds or 0.0

    @property
    def run_deviation_seconds(self) -> float:
        """The moving average of how far run durations fall from :attr:`expected_run_seconds`:
        how long after its expected end a run still going will likely be done."""
        return self._deviation_seconds

    def now(self) -> float:
        """The host's clock (seconds), in which :attr:`KeyProgress.due` is given."""
        return self._clock()

    def knows(self, token: str) -> bool:
        """Whether the engine holds this key (after a restart it holds none until restored)."""
        return token in self._last_handed

    def submit(self, token: str, value: Any, seq: int, admitted_at: float | None = None) -> None:
        """Queue ``value`` as input ``seq`` of a key restored before or new to the job (with
        nothing to restore); blocks while full.

        The caller's key state numbers the inputs; the engine runs the input under this ``seq``
        and with the clock ``admitted_at`` the state saved with it.
        """
        with self._changed:
            self._changed.wait_for(
                lambda: self._total_unfinished < self._max_unfinished or self._failure is not None
            )
            self._raise_failure()
            if token in self._parked:
                self._parked[token] += 1  # queued behind the paused run
            else:
                self._count(token, 1)
        self._call_soon(_submit, self._engine, token, value, seq, admitted_at)

    def restore(self, token: str, state: KeyState) -> None:
        """Hand the engine a key's checkpointed state; its pending inputs run again."""
        with self._changed:
            self._raise_failure()
            self._count(token, len(state.pending))
        # Copied now: the caller goes on to change its state before the loop thread runs this.
        self._call_soon(_restore, self._engine, token, state.model_copy(deep=True))

    def resume(self, token: str, wait_id: str, decision: Decision) -> None:
        """Hand the key's run that waits the decision of its wait: a paused run runs again."""
        with self._changed:
            self._raise_failure()
            aside = self._set_aside.get(token, set())
            if wait_id in aside:
                aside.discard(wait_id)
                if not aside:
                    del self._set_aside[token]
                self._count(token, 1)
            else:
                self._count(token, self._parked.pop(token, 0))
        self._call_soon(_resume, self._engine, token, wait_id, decision)

    def due(self, token: str) -> float | None:
        """When the key's running input will likely be done (see :attr:`KeyProgress.due`)."""
        with self._changed:
            started = self._head_started.get(token)
        return None if started is None else started + self.expected_run_seconds

    def visit(self, token: str) -> KeyProgress:
        """Take the key's finished runs, with what is left of it and when its running input
        will likely be done, all read at one moment: a run finishing between a take and a
        count would otherwise be neither taken nor counted, and the key left without a visit."""
        with self._changed:
            self._raise_failure()
            done = self._done.pop(token, None)
            unfinished = self._unfinished.get(token, 0)
            started = self._head_started.get(token)
        due = None if started is None else started + self.expected_run_seconds
        return KeyProgress(list(done or ()), unfinished, due)

    def wait_idle(self, token: str, timeout: float | None = None) -> list[CompletedRun]:
        """Block until the key has no unfinished input (or ``timeout``); returns its finished
        runs. Used at the end of a bounded input, when nothing else will visit the key again.
        """
        with self._changed:
            self._changed.wait_for(
                lambda: self._unfinished.get(token, 0) == 0 or self._failure is not None, timeout
            )
        return self.visit(token).completed

    def forget_idle(self) -> None:
        """Let the engine drop the keys it was last handed anything ``idle_key_s`` ago or more
        that have nothing unfinished, paused or not yet taken: the caller's key state (Flink's)
        holds theirs, and :meth:`restore` hands it back when one comes again. Without this the
        engine would hold every key it ever ran (a job keyed by order id grows without bound).
        Looks at most every ``idle_key_s / 2``; a no-op without ``idle_key_s``."""
        now = self._clock()
        if self._idle_key_s is None or now < self._next_sweep:
            return
        self._next_sweep = now + self._idle_key_s / 2
        cutoff = now - self._idle_key_s
        with self._changed:
            idle = [
                token
                for token, handed in self._last_handed.items()
                if handed <= cutoff
                and token not in self._unfinished
                and token not in self._parked
                and token not in self._set_aside
                and not self._done.get(token)
            ]
            for token in idle:
                del self._last_handed[token]
        if idle:
            self._call_soon(_forget, self._engine, idle)

    def post(self, fn: Callable[..., object], *args: Any) -> None:
        """Run ``fn(*args)`` on the loop thread, after every hand-off before it (not waited for)."""
        self._call_soon(fn, *args)

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float | None = 60) -> Any:
        """Run ``fn(*args)`` on the loop thread and return its result (blocking).

        For objects the engine uses from its loop (the action-state store), so that the host
        thread never touches them concurrently.
        """

        async def on_loop() -> Any:
            return fn(*args)

        return asyncio.run_coroutine_threadsafe(on_loop(), self._loop).result(timeout)

    def close(self) -> None:
        """Cancel runs in flight and stop the loop thread. Unfinished inputs stay in key state."""
        if not self._thread.is_alive():
            return
        future = asyncio.run_coroutine_threadsafe(self._engine.close(), self._loop)
        try:
            future.result(timeout=10)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            if not self._thread.is_alive():
                # Closing the loop ends its executor's threads (blocking tools, store flushes)
                # now, not when the collector gets to the loop: in thread mode one interpreter
                # outlives many attempts, and their idle threads piled up (the soak).
                self._loop.close()

    # --- loop thread -----------------------------------------------------------------------------

    def _drain_inbox(self) -> None:
        """Apply every queued hand-off in order, then start what the window allows."""
        self._drain_scheduled = False
        while self._inbox:
            fn, args = self._inbox.popleft()
            try:
                fn(*args)
            except BaseException as exc:  # surfaces on the host thread's next call
                self._on_failure(exc)
                return
        try:
            self._engine.pump()
        except BaseException as exc:
            self._on_failure(exc)

    def _on_result(self, result: RunResult) -> None:
        memory = self._engine.committed_memory(result.key)
        spend = self._engine.committed_spend(result.key)
        token = canonical_json(result.key)
        with self._changed:
            if result.paused is not None and self._engine.runs_alongside_paused:
                # Handed over like a finished run (its visit registers the wait); set aside
                # until resumed, while the key's later inputs run.
                self._set_aside.setdefault(token, set()).add(result.paused.wait_id)
                self._done[token].append(CompletedRun(result, memory))
                self._count(token, -1)
                return
            if result.paused is not None:
                # Handed over like a finished run (its visit registers the wait); the key's
                # inputs are parked until resumed, so the window and the end of input do not
                # wait for them.
                parked = self._parked[token] = self._unfinished.get(token, 0)
                self._done[token].append(CompletedRun(result, memory))
                self._count(token, -parked)
                self._changed.notify_all()
                return
            started = self._head_started.get(token)
            if started is not None:
                self._learn(self._clock() - started)
            long_term = self._engine.committed_long_term_memory(result.key)
            expiry = self._engine.committed_expiry(result.key)
            self._done[token].append(CompletedRun(result, memory, spend, long_term, expiry))
            self._count(token, -1)
            self._changed.notify_all()

    def _on_failure(self, error: BaseException) -> None:
        with self._changed:
            self._failure = error
            self._changed.notify_all()

    # --- helpers ---------------------------------------------------------------------------------

    def _learn(self, seconds: float) -> None:
        """Fold one run's duration into the moving averages (under the lock)."""
        if self._mean_seconds is None:  # the first run: its duration, give or take half
            self._mean_seconds, self._deviation_seconds = seconds, seconds / 2
            return
        error = seconds - self._mean_seconds
        self._mean_seconds += _SMOOTHING * error
        self._deviation_seconds += _SMOOTHING * (abs(error) - self._deviation_seconds)

    def _call_soon(self, fn: Callable[..., object], *args: Any) -> None:
        # One loop wake-up for a burst of hand-offs (a bundle of records), not one per record:
        # each wake-up costs a write to the loop's self-pipe and a trip through the GIL.
        self._inbox.append((fn, args))
        if not self._drain_scheduled:
            self._drain_scheduled = True
            self._loop.call_soon_threadsafe(self._drain_inbox)

    def _count(self, token: str, delta: int) -> None:
        """Change the key's unfinished inputs by ``delta`` (under the lock). The key's head
        input starts now when the key had none (a submit) or when its run just finished and
        another is queued (one key runs one input at a time)."""
        self._last_handed[token] = self._clock()
        before = self._unfinished.get(token, 0)
        after = before + delta
        self._total_unfinished += delta
        if after == 0:
            self._unfinished.pop(token, None)
            self._head_started.pop(token, None)
        else:
            self._unfinished[token] = after
            if before == 0 or delta < 0:
                self._head_started[token] = self._clock()
        if delta < 0:
            self._changed.notify_all()

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure


def _submit(engine: RunEngine, token: str, value: Any, seq: int, admitted_at: float | None) -> None:
    engine.submit(json.loads(token), value, seq, admitted_at)


def _restore(engine: RunEngine, token: str, state: KeyState) -> None:
    engine.restore_key(json.loads(token), state)


def _resume(engine: RunEngine, token: str, wait_id: str, decision: Decision) -> None:
    engine.resume(json.loads(token), wait_id, decision)


def _forget(engine: RunEngine, tokens: list[str]) -> None:
    engine.forget_keys([json.loads(token) for token in tokens])
