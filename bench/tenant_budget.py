"""A tenant budget under concurrent keys: how far the tenants' spend overshoots their limit with
the ledger's reservations, and with a check of the settled spend alone (issue 34).

50 keys (two tenants, by the input's ``tenant`` field) each run ``--runs`` inputs, one model call
each, all keys at once through the local runtime; the model answers after ``--latency-ms`` with
fixed usage (``CALL_TOKENS``) and counts the calls it answered per tenant. Each tenant's budget
allows ``--cap`` calls' tokens. Two variants against one real Redis ledger (scripts/redis.sh):

* ``reserve``: the package's ledger, which holds each call's worst case before it is sent;
* ``check-then-spend``: the same ledger, but a new call is checked against the settled spend
  alone and holds nothing (what reservation exists to prevent: every call in flight sees the
  same spend and goes).

Prints one JSON line per variant, and with ``--out`` writes them to a file::

    scripts/redis.sh start
    .venv/bin/python -m bench.tenant_budget --redis redis://127.0.0.1:6379/0
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast
from unittest import mock

from flink_agents.api import Agent, ChatMessage, InputEvent, OutputEvent, RunnerContext, action
from flink_agents.api.budgets import Budget, BudgetLedgerConfig, Budgets
from flink_agents.api.chat import ChatRequest, TokenUsage
from flink_agents.api.chat_models import ChatModelConnection, ChatModelSetup
from flink_agents.api.resources import ResourceType
from flink_agents.plan.compile import compile_agent
from flink_agents.plan.models import AgentPlan
from flink_agents.runtime import budget_meter
from flink_agents.runtime.budget_ledger import Admission, LedgerAccount, RedisBudgetLedger
from flink_agents.runtime.local import run_local

PROMPT_TOKENS = 60
OUTPUT_TOKENS = 40
CALL_TOKENS = PROMPT_TOKENS + OUTPUT_TOKENS
MAX_TOKENS = 100
"""The chat model's max_tokens: a call's worst case (prompt estimate + this) covers its real
usage, so with reservations no tenant may end above its limit."""
TENANTS = 2

ANSWERED: Counter[str] = Counter()
"""Calls the model answered, by tenant (the question names it: ``tenant/key/i``)."""


class FixedUsageConnection(ChatModelConnection):
    """A model that answers after ``latency_s`` and reports :data:`CALL_TOKENS` of usage."""

    latency_s: float = 0.02

    async def chat(self, request: ChatRequest) -> ChatMessage:
        await asyncio.sleep(self.latency_s)
        question = request.messages[-1].content
        ANSWERED[question.split("/")[0]] += 1
        usage = TokenUsage(input_tokens=PROMPT_TOKENS, output_tokens=OUTPUT_TOKENS)
        return ChatMessage(role="assistant", content=question, usage=usage, model="m")


@action(InputEvent)
async def ask(event: InputEvent, ctx: RunnerContext) -> None:
    """One model call; its answer is the output."""
    model = cast(ChatModelSetup, ctx.get_resource("model", ResourceType.CHAT_MODEL))
    question = ChatMessage(role="user", content=str(event.input["q"]))
    reply = await ctx.durable_execute_async(
        model.chat, [question], call_id="chat", result_type=ChatMessage
    )
    ctx.send_event(OutputEvent(output=reply.content))


class CheckThenSpendLedger(RedisBudgetLedger):
    """The ledger without reservations: a new call is admitted when the settled spend alone
    leaves room for it, and holds nothing (the bench's and the regression test's foil)."""

    def reserve(self, account: LedgerAccount, call: str, amount: float, limit: float) -> Admission:
        spent = self.spent(account)
        return Admission(admitted=spent + amount <= limit, held=spent)


def tenant_plan(redis_url: str, namespace: str, cap_calls: int, latency_s: float) -> AgentPlan:
    """An agent making one call a run under a tenant budget of ``cap_calls`` calls' tokens."""
    agent = Agent(name="tenants", error_policy="emit")
    agent.add_action(ask)
    agent.add_resource(
        "llm", ResourceType.CHAT_MODEL_CONNECTION, FixedUsageConnection, latency_s=latency_s
    )
    agent.add_resource(
        "model", ResourceType.CHAT_MODEL, ChatModelSetup, connection="llm", max_tokens=MAX_TOKENS
    )
    budget = Budget(
        name="tenant", scope="tenant", tenant_field="tenant", tokens=cap_calls * CALL_TOKENS
    )
    ledger = BudgetLedgerConfig(url=redis_url, namespace=namespace)
    agent.budgets = Budgets(limits=[budget], ledger=ledger)
    return compile_agent(agent)


def inputs(keys: int, runs: int) -> list[dict[str, Any]]:
    """``runs`` inputs of each of ``keys`` keys, interleaved; key ``i`` is of tenant ``i % 2``."""
    return [
        {"key": f"k{k}", "tenant": f"t{k % TENANTS}", "q": f"t{k % TENANTS}/k{k}/{i}"}
        for i in range(runs)
        for k in range(keys)
    ]


@contextmanager
def ledger_variant(variant: str) -> Iterator[None]:
    """The meter's ledger for ``variant``: the package's, or :class:`CheckThenSpendLedger`."""
    if variant == "reserve":
        yield
        return
    with mock.patch.object(budget_meter, "RedisBudgetLedger", CheckThenSpendLedger):
        yield


def scenario(
    redis_url: str,
    variant: str,
    *,
    keys: int = 50,
    runs: int = 4,
    cap_calls: int = 40,
    latency_s: float = 0.02,
) -> dict[str, Any]:
    """Run ``keys`` keys' ``runs`` inputs at once under each tenant's cap; what the tenants
    spent against their limit (the ledger's counters) and what reached the model."""
    namespace = f"bench-{uuid.uuid4().hex[:12]}"
    plan = tenant_plan(redis_url, namespace, cap_calls, latency_s)
    ANSWERED.clear()
    started = time.perf_counter()
    with ledger_variant(variant):
        results = run_local(plan, inputs(keys, runs), key="key")
    wall_s = time.perf_counter() - started
    assert plan.budgets is not None and plan.budgets.ledger is not None
    ledger = RedisBudgetLedger(plan.budgets.ledger)
    limit = cap_calls * CALL_TOKENS
    spent = {
        f"t{t}": ledger.spent(LedgerAccount(namespace, "tenant", f'tenant:"t{t}"', "total"))
        for t in range(TENANTS)
    }
    return {
        "variant": variant,
        "keys": keys,
        "runs_per_key": runs,
        "tenants": TENANTS,
        "limit_tokens": limit,
        "cap_calls": cap_calls,
        "model_latency_ms": latency_s * 1000,
        "answered": dict(sorted(ANSWERED.items())),
        "refused": sum(1 for result in results if result.error is not None),
        "spent_tokens": spent,
        "max_overshoot_tokens": max(value - limit for value in spent.values()),
        "max_overshoot_pct": round(100 * max(value - limit for value in spent.values()) / limit, 1),
        "wall_s": round(wall_s, 2),
    }


def ledger_round_trip_us(redis_url: str, calls: int = 2000) -> float:
    """Median microseconds of one reserve + settle pair on the ledger (two server round
    trips): what a metered call pays for a cross-key budget."""
    ledger = RedisBudgetLedger(BudgetLedgerConfig(url=redis_url))
    account = LedgerAccount(f"bench-{uuid.uuid4().hex[:12]}", "rt", "job", "total")
    took = []
    for i in range(calls):
        started = time.perf_counter()
        ledger.reserve(account, f"c{i}", 105.0, 1e12)
        ledger.settle(account, f"c{i}", 100.0)
        took.append(time.perf_counter() - started)
    took.sort()
    return round(took[len(took) // 2] * 1e6, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--keys", type=int, default=50)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--cap", type=int, default=40, help="calls' tokens per tenant")
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    logging.getLogger("flink_agents").setLevel(logging.ERROR)  # a refusal a run is a warning
    rows = [
        scenario(
            args.redis,
            variant,
            keys=args.keys,
            runs=args.runs,
            cap_calls=args.cap,
            latency_s=args.latency_ms / 1000,
        )
        for variant in ("reserve", "check-then-spend")
    ]
    rows.append({"variant": "ledger-round-trip", "median_us": ledger_round_trip_us(args.redis)})
    lines = [json.dumps(row) for row in rows]
    print("\n".join(lines))
    if args.out is not None:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
