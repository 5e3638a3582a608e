"""Decisions and events for a local run (:func:`~flink_agents.runtime.local.run_local`'s
``decisions``): the same key-state rules as a job's keyed logic (runtime/wait_book.py), on the
engine directly, after the inputs (docs/waits.md)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from flink_agents.durable.identity import RunId, canonical_json
from flink_agents.runtime.engine import RunEngine, RunResult
from flink_agents.runtime.wait_book import Apply, Refused, Resume, WaitBook


class DecisionRefusedError(ValueError):
    """Decisions or events given to a local run that were not applied, with the reasons."""

    def __init__(self, refused: list[tuple[Any, str]]) -> None:
        self.refused = refused
        lines = "\n".join(f"  key {key!r}: {reason}" for key, reason in refused)
        super().__init__(f"{len(refused)} decision or event record(s) refused:\n{lines}")


class LocalWaits:
    """The wait books of a local run's keys, fed with the engine's results as runs pause and
    finish; :meth:`decide` applies one decision or event record."""

    def __init__(self, engine: RunEngine, clock: Callable[[], float] = time.time) -> None:
        self._engine = engine
        self._clock = clock
        self._books: dict[str, WaitBook] = {}
        self._paused: dict[str, RunId] = {}  # keys whose head run is paused
        self._unfinished: dict[str, set[int]] = {}
        self.refused: list[tuple[Any, str]] = []
        self.results: dict[RunId, RunResult] = {}

    def submitted(self, run: RunId) -> None:
        self._unfinished.setdefault(canonical_json(run.key), set()).add(run.seq)

    async def settle(self) -> None:
        """Run what can run; take the results (a paused run registers its wait)."""
        await self._engine.drain()
        for result in self._engine.take_results():
            self.results[result.run_id] = result
            token = canonical_json(result.key)
            book = self._books.setdefault(token, WaitBook())
            now = self._now()
            if result.paused is not None:
                self._paused[token] = result.run_id
                registered = book.register(result.paused, result.run_id.seq, now)
                for refused in registered.refused:
                    self._refuse(result.key, refused)
                apply = registered.apply
                if apply is not None:
                    self._resume(result.key, apply)
                    await self.settle()
                continue
            self._paused.pop(token, None)
            left = self._unfinished.get(token, set())
            left.discard(result.run_id.seq)
            for refused in book.run_finished(result.run_id.seq, runs_pending=bool(left)):
                self._refuse(result.key, refused)

    async def decide(self, key: Any, record: Any) -> None:
        """Apply one decision or event record of ``key``, and run what it resumes."""
        try:
            resume = Resume.parse(record)
        except ValueError as exc:
            self.refused.append((key, str(exc)))
            return
        token = canonical_json(key)
        book = self._books.setdefault(token, WaitBook())
        pending = bool(self._unfinished.get(token))
        offer = book.offer(resume, runs_pending=pending, now_ms=self._now())
        if isinstance(offer, Refused):
            self._refuse(key, offer)
        elif isinstance(offer, Apply):
            self._resume(key, offer)
            await self.settle()

    def _resume(self, key: Any, apply: Apply) -> None:
        self._engine.resume(key, apply.wait_id, apply.decision)

    def _refuse(self, key: Any, refused: Refused) -> None:
        self.refused.append((key, refused.reason))

    def _now(self) -> int:
        return int(self._clock() * 1000)


async def run_with_decisions(
    engine: RunEngine,
    inputs: Iterable[Any],
    decisions: Iterable[Any],
    key_of: Callable[[Any], Any],
) -> list[RunResult]:
    """Submit ``inputs``, run them, then apply ``decisions`` in order; results in input order
    (a run whose wait got no decision: its paused result). Raises
    :class:`DecisionRefusedError` when a decision or event was refused."""
    waits = LocalWaits(engine)
    order: list[RunId] = []
    for record in inputs:
        run = engine.submit(key_of(record), record)
        waits.submitted(run)
        order.append(run)
    await waits.settle()
    for record in decisions:
        await waits.decide(key_of(record), record)
    if waits.refused:
        raise DecisionRefusedError(waits.refused)
    return [waits.results[run] for run in order]
