"""Budgets across keys: a tenant's (or the job's) model calls counted in a real Redis ledger
(started by scripts/redis.sh), reserved before they are sent, settled once by their idempotency
key, refused closed when the ledger is down (runtime/budget_ledger.py, docs/budgets.md)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.tenant_budget import CALL_TOKENS, scenario, tenant_plan
from flink_agents.api.budgets import Budget, BudgetLedgerConfig
from flink_agents.observability import BudgetNoted, EventLogConfig, read_records
from flink_agents.plan.models import AgentPlan
from flink_agents.runtime.assembly import Runtime
from flink_agents.runtime.budget_ledger import LedgerAccount, RedisBudgetLedger
from flink_agents.runtime.local import run_local
from flink_agents.testing import Stores
from tests import budget_samples
from tests.budget_samples import UsageServer, budgeted_plan

pytest.importorskip("redis")

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "redis.sh"


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Redis server on REDIS_PORT (default 6390): the running one, or one started here (its
    data in a temporary folder) and stopped afterwards."""
    if shutil.which("redis-server") is None:
        pytest.skip("no redis-server (apt-get install redis-server; .ci/run installs it)")
    port = os.environ.get("REDIS_PORT", "6390")
    env = {
        **os.environ,
        "REDIS_PORT": port,
        "REDIS_DATA_DIR": str(tmp_path_factory.mktemp("redis-data")),
    }

    def redis_sh(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(SCRIPT), command], env=env, capture_output=True, text=True, timeout=60
        )

    started = redis_sh("status").returncode != 0
    if started:
        done = redis_sh("start")
        assert done.returncode == 0, done.stderr
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        if started:
            redis_sh("stop")


def test_a_tenant_budget_holds_across_50_concurrent_keys(redis_url: str) -> None:
    """50 keys of two tenants, all at once, 4 runs each, under a cap of 40 calls' tokens per
    tenant: each call reserves its worst case (106 tokens) before it is sent, so no tenant ends
    above its limit: 39 calls each (a 40th's worst case would not fit), the rest refused."""
    row = scenario(redis_url, "reserve", keys=50, runs=4, cap_calls=40)
    assert row["answered"] == {"t0": 39, "t1": 39}
    assert row["spent_tokens"] == {"t0": 39 * CALL_TOKENS, "t1": 39 * CALL_TOKENS}
    assert row["max_overshoot_tokens"] <= 0
    assert row["refused"] == 200 - 78


def test_without_reservation_the_same_keys_overshoot(redis_url: str) -> None:
    """Why reservation exists: the same 50 keys checked against the settled spend alone (the
    ledger holding nothing) all see room for their first calls and send them, so the tenants
    end far above their limit -- the test above fails the same way if reservation goes."""
    row = scenario(redis_url, "check-then-spend", keys=50, runs=4, cap_calls=40)
    assert row["max_overshoot_tokens"] > 0
    assert sum(row["answered"].values()) > 2 * 40


def test_a_call_reserved_and_settled_twice_counts_once(redis_url: str) -> None:
    """A call re-sent after a crash comes back with its idempotency key: it is admitted without
    a second hold, and its second settlement counts nothing."""
    ledger = RedisBudgetLedger(BudgetLedgerConfig(url=redis_url))
    account = LedgerAccount(f"test-{uuid.uuid4().hex[:8]}", "b", "job", "total")
    assert ledger.reserve(account, "call-1", 105, 200).admitted
    again = ledger.reserve(account, "call-1", 105, 200)
    assert again.admitted and again.held == 105  # its own hold, once
    assert not ledger.reserve(account, "call-2", 105, 200).admitted  # 105 + 105 > 200
    assert ledger.settle(account, "call-1", 100) == (0.0, 100.0)
    assert ledger.settle(account, "call-1", 100) == (100.0, 100.0)
    assert ledger.reserve(account, "call-1", 105, 200).admitted  # settled: no new hold
    assert ledger.spent(account) == 100
    ledger.release(account, "call-3")  # a release of nothing held is harmless
    assert ledger.reserve(account, "call-2", 100, 200).admitted  # 100 + 100 fits


def test_a_released_call_frees_its_hold(redis_url: str) -> None:
    ledger = RedisBudgetLedger(BudgetLedgerConfig(url=redis_url))
    account = LedgerAccount(f"test-{uuid.uuid4().hex[:8]}", "b", 'tenant:"acme"', "2026-12-03")
    assert ledger.reserve(account, "a", 150, 200).admitted
    assert not ledger.reserve(account, "b", 150, 200).admitted
    ledger.release(account, "a")
    assert ledger.reserve(account, "b", 150, 200).admitted
    assert ledger.spent(account) == 0


def test_an_unreachable_ledger_refuses_the_call_closed() -> None:
    """Nothing listens at the ledger's address: the call is refused before it is sent, and the
    run ends with a BudgetLedgerUnavailable error output naming the budget and the ledger."""
    plan = tenant_plan("redis://127.0.0.1:1/0", "down", cap_calls=10, latency_s=0)
    [result] = run_local(plan, [{"key": "k0", "tenant": "t0", "q": "t0/k0/0"}], key="key")
    assert result.error is not None
    assert result.error.error_type == "BudgetLedgerUnavailable"
    assert "budget 'tenant'" in result.error.message
    assert "redis://127.0.0.1:1/0 did not answer" in result.error.message


def test_an_unreachable_ledger_lets_calls_go_when_told_to() -> None:
    plan = tenant_plan("redis://127.0.0.1:1/0", "down", cap_calls=10, latency_s=0)
    assert plan.budgets is not None and plan.budgets.ledger is not None
    plan.budgets.ledger.on_unreachable = "allow"
    [result] = run_local(plan, [{"key": "k0", "tenant": "t0", "q": "t0/k0/0"}], key="key")
    assert result.error is None
    assert result.output_values == ["t0/k0/0"]


def test_a_run_without_its_tenant_field_fails_naming_it(redis_url: str) -> None:
    plan = tenant_plan(redis_url, f"test-{uuid.uuid4().hex[:8]}", cap_calls=10, latency_s=0)
    [result] = run_local(plan, [{"key": "k0", "q": "t0/k0/0"}], key="key")
    assert result.error is not None
    assert "counts per tenant by field 'tenant', but neither the run's input" in (
        result.error.message
    )


def _tenant_fallback_plan(server: UsageServer, redis_url: str, namespace: str) -> AgentPlan:
    """Tenant acme's calls go to model ``big`` for two calls' tokens, then to ``cheap`` (model
    ``small``); the whole job may spend five calls' tokens."""
    tenant = Budget(
        name="tenant",
        scope="tenant",
        tenant_field="tenant",
        tokens=2 * budget_samples.CALL_TOKENS,
        on_exhausted="fallback",
        fallback="cheap",
    )
    job = Budget(name="job", scope="job", tokens=5 * budget_samples.CALL_TOKENS)
    ledger = BudgetLedgerConfig(url=redis_url, namespace=namespace)
    return budgeted_plan(server.base_url, tenant, job, ledger=ledger)


def _spent(redis_url: str, namespace: str, budget: str, whom: str) -> float:
    ledger = RedisBudgetLedger(BudgetLedgerConfig(url=redis_url))
    return ledger.spent(LedgerAccount(namespace, budget, whom, "total"))


def test_an_exhausted_tenant_budget_sends_its_keys_calls_to_the_fallback(
    redis_url: str, tmp_path: Path
) -> None:
    """Seven keys of tenant acme, one call each, one after another: two reach ``big``; once
    the tenant's budget is spent the next three go to ``cheap``, counted in the tenant's
    account; the job's hard cap then refuses the last two. Each decision is an event-log
    record."""
    namespace = f"test-{uuid.uuid4().hex[:8]}"
    log = EventLogConfig(path=str(tmp_path / "events.jsonl"))
    with UsageServer() as server:
        plan = _tenant_fallback_plan(server, redis_url, namespace)
        results = [
            result
            for k in range(7)
            for result in run_local(
                plan, [{"key": f"k{k}", "tenant": "acme", "q": f"k{k}/0"}], key="key", event_log=log
            )
        ]
    assert server.by_model == {"big": 2, "small": 3}
    outputs = [r.output_values for r in results]
    assert outputs[:5] == [
        ["big: k0/0"],
        ["big: k1/0"],
        ["small: k2/0"],
        ["small: k3/0"],
        ["small: k4/0"],
    ]
    assert [r.error.error_type for r in results[5:] if r.error] == ["BudgetExceeded"] * 2
    calls = budget_samples.CALL_TOKENS
    assert _spent(redis_url, namespace, "tenant", 'tenant:"acme"') == 5 * calls
    assert _spent(redis_url, namespace, "job", "job") == 5 * calls
    noted = [r for r in read_records(tmp_path / "events.jsonl") if isinstance(r, BudgetNoted)]
    assert [n.decision for n in noted] == ["fallback"] * 3 + ["refused"] * 2
    assert {n.budget for n in noted if n.decision == "fallback"} == {"tenant"}


def test_a_replay_hands_back_the_fallbacks_answer_without_asking_anyone(redis_url: str) -> None:
    """The third call of tenant acme went to ``cheap``; its run replayed from the store hands
    the recorded answer back: no request to either connection, nothing more in the ledger."""
    namespace = f"test-{uuid.uuid4().hex[:8]}"
    stores = Stores.in_memory()

    async def scenario(server: UsageServer) -> tuple[list[str], list[str], int]:
        plan = _tenant_fallback_plan(server, redis_url, namespace)
        engine = Runtime.build(plan, store=stores.first).engine
        for i in range(2):
            engine.submit("k0", {"key": "k0", "tenant": "acme", "q": f"k0/{i}"})
            await engine.drain()
        saved = engine.snapshot_key("k0")
        engine.submit("k0", {"key": "k0", "tenant": "acme", "q": "k0/2"})
        await engine.drain()
        first = [str(v) for r in engine.take_results() for v in r.output_values]
        await engine.close()

        engine = Runtime.build(plan, store=stores.restored()).engine
        engine.restore_key("k0", saved)
        sent = sum(server.by_model.values())
        engine.submit("k0", {"key": "k0", "tenant": "acme", "q": "k0/2"})  # from its record
        await engine.drain()
        again = [str(v) for r in engine.take_results() for v in r.output_values]
        await engine.close()
        return first, again, sum(server.by_model.values()) - sent

    with UsageServer() as server:
        first, again, replayed_requests = asyncio.run(scenario(server))
    assert first == ["big: k0/0", "big: k0/1", "small: k0/2"]
    assert again == ["small: k0/2"]
    assert replayed_requests == 0
    assert server.by_model == {"big": 2, "small": 1}
    calls = budget_samples.CALL_TOKENS
    assert _spent(redis_url, namespace, "tenant", 'tenant:"acme"') == 3 * calls
