"""Drive a :class:`RunEngine` from a synchronous host, such as a Flink operator.

The engine is single-threaded asyncio; a Flink keyed function is called synchronously, one
record or timer at a time, and may only touch a key's state while that key is current. The
:class:`EngineHost` bridges the two: the engine runs on its own event loop thread, the host
thread submits inputs (blocking while the window of unfinished inputs is full: that is the
back-pressure), and finished runs wait in a per-key mailbox until the host visits that key again
(a timer) to emit outputs and commit the key's state.

Nothing here polls: waiting is done on a condition variable signalled by the loop thread.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flink_agents.durable.identity import canonical_json
from flink_agents.runtime.engine import RunEngine, RunResult
from flink_agents.runtime.state import KeyState

_SMOOTHING = 0.05
"""Weight of the newest run in the moving average of run durations."""


@dataclass(frozen=True)
class CompletedRun:
    """A finished run and the key's short-term memory as that run committed it.

    The memory is the engine's committed memory itself, not a copy (the engine never changes it
    in place): a host commits it to the key's state once, when it takes the run.
    """

    result: RunResult
    short_term_memory: dict[str, Any]


class EngineHost:
    """Runs ``engine`` on a background event loop thread for a synchronous caller.

    ``max_unfinished`` bounds the inputs submitted whose run has not finished (running or queued
    behind another input of the same key or behind the engine's ``max_in_flight`` window);
    :meth:`submit` blocks while it is reached.
    """

    def __init__(self, engine_factory: Callable[..., RunEngine], *, max_unfinished: int) -> None:
        if max_unfinished < 1:
            raise ValueError("max_unfinished must be at least 1")
        self._max_unfinished = max_unfinished
        self._engine = engine_factory(on_result=self._on_result, on_failure=self._on_failure)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="flink-agents-engine", daemon=True
        )
        self._changed = threading.Condition()
        self._unfinished: dict[str, int] = defaultdict(int)
        self._total_unfinished = 0
        self._done: dict[str, deque[CompletedRun]] = defaultdict(deque)
        self._known: set[str] = set()
        self._failure: BaseException | None = None
        self._submitted_at: dict[tuple[str, int], float] = {}
        self._expected_seconds = 0.0
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
        """Moving average of the time from submit to finish: when a new input's run will
        likely be done, so a host can come back then instead of polling right away."""
        return self._expected_seconds

    def knows(self, key: Any) -> bool:
        """Whether the engine holds this key (after a restart it holds none until restored)."""
        return canonical_json(key) in self._known

    def submit(self, key: Any, value: Any, seq: int) -> None:
        """Queue ``value`` as input ``seq`` of an already known ``key``; blocks while full.

        The caller's key state numbers the inputs; the engine runs the input under this ``seq``.
        """
        token = canonical_json(key)
        with self._changed:
            self._changed.wait_for(
                lambda: self._total_unfinished < self._max_unfinished or self._failure is not None
            )
            self._raise_failure()
            self._count(token, 1)
            self._submitted_at[(token, seq)] = time.monotonic()
        self._call_soon(self._engine.submit, key, value, seq)

    def restore(self, key: Any, state: KeyState) -> None:
        """Hand the engine a key's checkpointed state; its pending inputs run again."""
        token = canonical_json(key)
        with self._changed:
            self._raise_failure()
            self._known.add(token)
            self._count(token, len(state.pending))
        # Copied now: the caller goes on to change its state before the loop thread runs this.
        self._call_soon(self._engine.restore_key, key, state.model_copy(deep=True))

    def take(self, key: Any) -> list[CompletedRun]:
        """Finished runs of ``key`` not yet taken, in order."""
        token = canonical_json(key)
        with self._changed:
            self._raise_failure()
            done = self._done.pop(token, None)
        return list(done or ())

    def pending(self, key: Any) -> int:
        """Unfinished inputs of ``key``."""
        with self._changed:
            return self._unfinished.get(canonical_json(key), 0)

    def wait_idle(self, key: Any, timeout: float | None = None) -> list[CompletedRun]:
        """Block until ``key`` has no unfinished input (or ``timeout``); returns its finished runs.

        Used at the end of a bounded input, when nothing else will visit the key again.
        """
        token = canonical_json(key)
        with self._changed:
            self._changed.wait_for(
                lambda: self._unfinished.get(token, 0) == 0 or self._failure is not None, timeout
            )
        return self.take(key)

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
        token = canonical_json(result.key)
        with self._changed:
            submitted = self._submitted_at.pop((token, result.run_id.seq), None)
            if submitted is not None:
                elapsed = time.monotonic() - submitted
                self._expected_seconds += _SMOOTHING * (elapsed - self._expected_seconds)
            self._done[token].append(CompletedRun(result, memory))
            self._count(token, -1)
            self._changed.notify_all()

    def _on_failure(self, error: BaseException) -> None:
        with self._changed:
            self._failure = error
            self._changed.notify_all()

    # --- helpers ---------------------------------------------------------------------------------

    def _call_soon(self, fn: Callable[..., object], *args: Any) -> None:
        # One loop wake-up for a burst of hand-offs (a bundle of records), not one per record:
        # each wake-up costs a write to the loop's self-pipe and a trip through the GIL.
        self._inbox.append((fn, args))
        if not self._drain_scheduled:
            self._drain_scheduled = True
            self._loop.call_soon_threadsafe(self._drain_inbox)

    def _count(self, token: str, delta: int) -> None:
        self._known.add(token)
        self._unfinished[token] += delta
        self._total_unfinished += delta
        if self._unfinished[token] == 0:
            del self._unfinished[token]
        if delta < 0:
            self._changed.notify_all()

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure
