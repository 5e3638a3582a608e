"""A sliding window counts what a key's calls spent in the last ``period_s`` seconds, by the
second each call was recorded: a call falls out of it as time passes, and the window is the
same after a restore (the key's saved spend keeps its recent seconds) and after a replay (a
replayed call counts at its recorded second) (runtime/budget_meter.py, docs/budgets.md)."""

from __future__ import annotations

import asyncio
import functools

import pytest

from flink_agents.api.budgets import Budget
from flink_agents.runtime import assembly
from flink_agents.runtime.assembly import Runtime
from flink_agents.runtime.budget_meter import BudgetMeter
from flink_agents.runtime.engine import RunEngine
from flink_agents.runtime.state import KeyState
from flink_agents.testing import Stores
from tests.budget_samples import CALL_TOKENS, UsageServer, budgeted_plan


class Clock:
    """The meter's clock, moved by the test."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def _ask(engine: RunEngine, clock: Clock, at: float, question: str) -> str | None:
    """One input of key k0 at second ``at``: None when answered, else its error type."""
    clock.now = at
    engine.submit("k0", {"key": "k0", "q": f"k0/{question}"})
    await engine.drain()
    [result] = engine.take_results()
    return result.error.error_type if result.error else None


def test_a_sliding_window_lets_calls_fall_out_and_holds_across_a_restore_and_a_replay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two calls' tokens in any 60 s: calls at 1000 and 1010 fill it (1020 is refused); at 1061
    the first has fallen out. Restored from the key's state: 1071 fits (1010 fell out).
    Restored again from the same state: 1071's run replays at its recorded second (no
    request), so a new call at 1076 is refused (1061 and 1071 fill the window)."""
    clock = Clock(1000)
    monkeypatch.setattr(assembly, "BudgetMeter", functools.partial(BudgetMeter, clock=clock))
    stores = Stores.in_memory()
    budget = Budget(name="hourly", window="sliding", period_s=60, tokens=2 * CALL_TOKENS)

    async def scenario(server: UsageServer) -> tuple[list[str | None], KeyState, int]:
        plan = budgeted_plan(server.base_url, budget)
        engine = Runtime.build(plan, store=stores.first).engine
        outcomes = [await _ask(engine, clock, at, str(at)) for at in (1000, 1010, 1020, 1061, 1065)]
        saved = engine.snapshot_key("k0")
        await engine.close()

        engine = Runtime.build(plan, store=stores.restored()).engine
        engine.restore_key("k0", saved)
        outcomes.append(await _ask(engine, clock, 1071, "1071"))
        await engine.close()

        engine = Runtime.build(plan, store=stores.restored()).engine
        engine.restore_key("k0", saved)
        sent = sum(server.by_key.values())
        clock.now = 1075
        engine.submit("k0", {"key": "k0", "q": "k0/1071"})  # 1071's run again, from its record
        await engine.drain()
        assert [r.error for r in engine.take_results()] == [None]
        replayed_requests = sum(server.by_key.values()) - sent
        outcomes.append(await _ask(engine, clock, 1076, "1076"))
        await engine.close()
        return outcomes, saved, replayed_requests

    with UsageServer() as server:
        outcomes, saved, replayed_requests = asyncio.run(scenario(server))
    refused = "BudgetExceeded"
    assert outcomes == [None, None, refused, None, refused, None, refused]
    assert replayed_requests == 0
    assert server.by_key["k0"] == 4
    # The saved spend keeps only the seconds a 60 s window may still reach (1000 was dropped).
    assert saved.spend is not None
    assert sorted(saved.spend.recent) == [1010, 1061]
    assert saved.spend.total.tokens == 3 * CALL_TOKENS


def test_period_s_goes_with_a_sliding_window_only() -> None:
    with pytest.raises(ValueError, match="period_s is the length of window 'sliding'"):
        Budget(name="b", window="sliding", tokens=10)
    with pytest.raises(ValueError, match="period_s is the length of window 'sliding'"):
        Budget(name="b", window="day", period_s=60, tokens=10)
    with pytest.raises(ValueError, match="window 'sliding' counts a key's spend only"):
        Budget(name="b", window="sliding", period_s=60, scope="job", tokens=10)
