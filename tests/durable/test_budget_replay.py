"""Budgets across a failover, through the real store path (DurableCalls, the codec, the
in-memory log and Kafka): a key's counter after a restore is the sum of the spend recorded
with its calls, no call is made after its budget is exhausted, and a recorded call replays
whatever today's budget says (docs/budgets.md)."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from flink_agents.api.budgets import Budget
from flink_agents.durable.calls import DurableCalls
from flink_agents.durable.identity import CallIdentity, canonical_json
from flink_agents.durable.store import ActionStateStore
from flink_agents.durable.store.inspect import key_states, recorded_spend
from flink_agents.plan.models import AgentPlan
from flink_agents.runtime.assembly import Runtime
from flink_agents.runtime.engine import RunResult
from flink_agents.runtime.state import KeyState
from flink_agents.testing import Stores
from flink_agents.testing.harness import CallLog, CountingProbe
from tests.budget_samples import CALL_TOKENS, UsageServer, budgeted_plan, questions

KEYS = 4
CAP_CALLS = 10
PER_KEY = 14  # more inputs than the cap lets through


def _keys() -> list[str]:
    return [f"k{k}" for k in range(KEYS)]


async def _crash_then_replay(
    plan: AgentPlan, stores: Stores, crash_at: int
) -> tuple[CallLog, CallLog, dict[str, KeyState], list[RunResult]]:
    """Run every question until the ``crash_at``-th call starts (held: it never reaches the
    server), checkpoint the key states there, restore a new engine and store, finish."""
    live, replayed = CallLog(), CallLog()
    probe = CountingProbe(live, crash_at)
    runtime = Runtime.build(plan, store=stores.first, probe=probe)
    engine, calls = runtime.engine, runtime.calls
    for record in questions(KEYS, PER_KEY):
        engine.submit(record["key"], record)
    done = asyncio.ensure_future(engine.drain())
    crash = asyncio.ensure_future(probe.crashed.wait())
    await asyncio.wait({done, crash}, return_when=asyncio.FIRST_COMPLETED)
    crash.cancel()
    assert probe.crashed.is_set(), "the seeded call was never made"
    assert isinstance(calls, DurableCalls)
    live.completed = {i for i in live.returned if calls.write_acknowledged(live.outcome_writes[i])}
    results = engine.take_results()
    states = {key: engine.snapshot_key(key) for key in _keys()}
    done.cancel()
    await engine.close()

    runtime = Runtime.build(plan, store=stores.restored(), probe=CountingProbe(replayed, None))
    engine = runtime.engine
    for key, state in states.items():
        engine.restore_key(key, state)
    await engine.drain()
    results += engine.take_results()
    after = {key: engine.snapshot_key(key) for key in _keys()}
    await engine.close()
    return live, replayed, after, results


def _key_of(identity: CallIdentity) -> str:
    return str(identity.run.key)


@pytest.mark.parametrize("seed", range(5))
def test_after_a_crash_each_keys_counter_is_its_recorded_usage(stores: Stores, seed: int) -> None:
    crash_at = random.Random(seed).randint(1, KEYS * CAP_CALLS)
    with UsageServer() as server:
        plan = budgeted_plan(server.base_url, Budget(name="cap", tokens=CAP_CALLS * CALL_TOKENS))
        live, replayed, states, results = asyncio.run(_crash_then_replay(plan, stores, crash_at))
    assert not live.completed & set(replayed.invoked), "a completed call was made again"
    for key in _keys():
        spend = states[key].spend
        assert spend is not None
        recorded = recorded_spend(key_states(_log(stores), canonical_json(key)))
        assert recorded.calls == CAP_CALLS
        assert spend.total.tokens == recorded.tokens == CAP_CALLS * CALL_TOKENS
        # No call after exhaustion: every request the server saw comes from one of the key's
        # 10 recorded calls (made again when the crash lost it before its acknowledgement).
        made = {i for i in [*live.invoked, *replayed.invoked] if _key_of(i) == key}
        assert len(made) == CAP_CALLS
        invocations = sum(log.invoked[i] for log in (live, replayed) for i in made)
        assert CAP_CALLS <= server.by_key[key] <= invocations
    runs = {(r.run_id.key, r.run_id.seq): r for r in results}
    assert len(runs) == KEYS * PER_KEY
    refused = [r for r in runs.values() if r.error is not None]
    assert len(refused) == KEYS * (PER_KEY - CAP_CALLS)
    assert {r.error.error_type for r in refused if r.error} == {"BudgetExceeded"}


def test_a_budget_lowered_before_a_restore_replays_recorded_calls_and_refuses_new_ones(
    stores: Stores,
) -> None:
    """Checkpointed with every input pending, run to its end under a cap of 10 calls;
    restored under a cap of 2: all 6 recorded runs of each key replay (no request), the next
    inputs are refused (no request)."""

    async def scenario(server: UsageServer) -> tuple[list[RunResult], dict[str, Any], int]:
        generous = budgeted_plan(server.base_url, Budget(name="cap", tokens=10 * CALL_TOKENS))
        engine = Runtime.build(generous, store=stores.first).engine
        for record in questions(KEYS, 6):
            engine.submit(record["key"], record)
        checkpoint = {key: engine.snapshot_key(key) for key in _keys()}
        await engine.drain()
        first = {(r.run_id.key, r.run_id.seq): r.output_values for r in engine.take_results()}
        await engine.close()
        sent = sum(server.by_key.values())

        lowered = budgeted_plan(server.base_url, Budget(name="cap", tokens=2 * CALL_TOKENS))
        engine = Runtime.build(lowered, store=stores.restored()).engine
        for key, state in checkpoint.items():
            engine.restore_key(key, state)
        await engine.drain()
        replayed = engine.take_results()
        assert {(r.run_id.key, r.run_id.seq): r.output_values for r in replayed} == first
        assert sum(server.by_key.values()) == sent  # every answer handed back
        for key in _keys():
            engine.submit(key, {"key": key, "q": f"{key}/new"})
        await engine.drain()
        new = engine.take_results()
        spend = {key: engine.snapshot_key(key).spend for key in _keys()}
        await engine.close()
        return new, spend, sum(server.by_key.values()) - sent

    with UsageServer() as server:
        new, spend, made_after = asyncio.run(scenario(server))
    assert made_after == 0
    assert [r.error.error_type if r.error else None for r in new] == ["BudgetExceeded"] * KEYS
    assert all(s is not None and s.total.tokens == 6 * CALL_TOKENS for s in spend.values())


def _log(stores: Stores) -> Any:
    """The latest store, as the log view ``store inspect`` reads."""
    store: ActionStateStore = stores.latest
    return store
