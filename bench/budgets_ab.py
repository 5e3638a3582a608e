"""What budgets cost a run that stays within them: runs of ``--calls`` model calls each against
a fake model that reports usage, with and without a ``budgets`` block, side by side (issue 34).

Variants, each an agent whose one action makes ``--calls`` durable chat calls in a row and
emits the last reply (the model answers at once with fixed usage, so what is measured is the
runtime's own work per call):

* ``none``: no budgets (the calls are not metered);
* ``key``: three budgets of the key, far above what the runs spend -- a per-run window, a
  sliding hour and a total -- so every call is reserved, checked against each and settled;
* ``tenant`` (with ``--redis``): the same and a tenant budget counted in a Redis ledger
  (``scripts/redis.sh``), which adds a reserve and a settle round trip a call.

Each round runs every variant once on a fresh engine and store (``--keys`` keys x ``--runs``
inputs each, all in flight at once), the variants taking turns in a rotating order; per run
the wall time and the CPU time of this process (``time.process_time``, which other load on the
machine hardly moves). Prints one JSON line per variant and round, then the medians and their
ratio to ``none``; ``--out`` appends the lines to a file::

    REDIS_PORT=6479 scripts/redis.sh start
    .venv/bin/python -m bench.budgets_ab --rounds 7 --redis redis://127.0.0.1:6479/0 \
        --out bench/results/budgets-ab-$(date +%Y%m%d).jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import time
import uuid
from pathlib import Path
from typing import Any, cast

from bench.tenant_budget import FixedUsageConnection
from flink_agents.api import Agent, ChatMessage, InputEvent, OutputEvent, RunnerContext, action
from flink_agents.api.budgets import Budget, BudgetLedgerConfig, Budgets
from flink_agents.api.chat_models import ChatModelSetup
from flink_agents.api.resources import ResourceType
from flink_agents.durable.store import StoreConfig
from flink_agents.plan import AgentPlan, compile_agent
from flink_agents.runtime import OperatorOptions, Runtime, RuntimeSettings

FAR = 10**12
"""A limit no run of the bench comes near: every budget admits every call."""


@action(InputEvent)
async def ask_repeatedly(event: InputEvent, ctx: RunnerContext) -> None:
    """The input's ``calls`` durable model calls in a row; the last reply is the output."""
    model = cast(ChatModelSetup, ctx.get_resource("model", ResourceType.CHAT_MODEL))
    reply = ChatMessage(role="assistant", content="")
    for i in range(int(event.input["calls"])):
        question = ChatMessage(role="user", content=f"t{event.input['tenant']}/{i}")
        reply = await ctx.durable_execute_async(
            model.chat, [question], call_id=f"chat-{i}", result_type=ChatMessage
        )
    ctx.send_event(OutputEvent(output=reply.content))


def key_budgets() -> list[Budget]:
    """A per-run, a sliding-hour and a total budget of the key, none of them reached."""
    return [
        Budget(name="per-run", window="run", tokens=FAR),
        Budget(name="hourly", window="sliding", period_s=3600, tokens=FAR),
        Budget(name="total", tokens=FAR),
    ]


def plan_of(variant: str, redis_url: str | None) -> AgentPlan:
    """The bench's agent with ``variant``'s budgets (a fresh ledger namespace each time)."""
    agent = Agent(name=f"budgets-ab-{variant}")
    agent.add_action(ask_repeatedly)
    agent.add_resource("llm", ResourceType.CHAT_MODEL_CONNECTION, FixedUsageConnection, latency_s=0)
    agent.add_resource(
        "model", ResourceType.CHAT_MODEL, ChatModelSetup, connection="llm", max_tokens=100
    )
    if variant == "key":
        agent.budgets = Budgets(limits=key_budgets())
    elif variant == "tenant":
        assert redis_url is not None
        tenant = Budget(name="tenant", scope="tenant", tenant_field="tenant", tokens=FAR)
        ledger = BudgetLedgerConfig(url=redis_url, namespace=f"bench-{uuid.uuid4().hex[:12]}")
        agent.budgets = Budgets(limits=[*key_budgets(), tenant], ledger=ledger)
    return compile_agent(agent)


async def run_all(args: argparse.Namespace, plan: AgentPlan) -> None:
    """``--runs`` inputs of each of ``--keys`` keys through one engine, all in flight at once."""
    keys, runs = args.keys, args.runs
    store = StoreConfig(kind="memory").build() if args.store == "memory" else None
    settings = RuntimeSettings(operator=OperatorOptions(max_in_flight=keys))
    try:
        engine = Runtime.build(plan, settings, store=store).engine
        for run in range(runs):
            for key in range(keys):
                engine.submit(key, {"tenant": key % 2, "calls": args.calls, "n": run}, run)
        await engine.drain()
        results = engine.take_results()
        failed = [result for result in results if result.error is not None]
        assert len(results) == keys * runs and not failed, failed[:1]
    finally:
        if store is not None:
            store.close()


def measure(variant: str, args: argparse.Namespace) -> dict[str, Any]:
    """One job of ``variant``: wall and CPU microseconds per run and per call."""
    plan = plan_of(variant, args.redis)
    runs = args.keys * args.runs
    started, cpu_started = time.perf_counter(), time.process_time()
    asyncio.run(run_all(args, plan))
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    return {
        "variant": variant,
        "store": args.store,
        "keys": args.keys,
        "runs": runs,
        "calls_per_run": args.calls,
        "wall_us_per_run": round(wall / runs * 1e6, 1),
        "cpu_us_per_run": round(cpu / runs * 1e6, 1),
        "cpu_us_per_call": round(cpu / runs / args.calls * 1e6, 2),
        "load_1m": round(os.getloadavg()[0], 2),
    }


def summary(rows: list[dict[str, Any]], variants: list[str], calls: int) -> list[dict[str, Any]]:
    """Per variant, the medians over the rounds and their ratio to ``none``'s."""
    medians: dict[str, dict[str, float]] = {}
    for variant in variants:
        mine = [row for row in rows if row["variant"] == variant]
        medians[variant] = {
            name: statistics.median(row[name] for row in mine)
            for name in ("wall_us_per_run", "cpu_us_per_run")
        }
    base = medians["none"]
    return [
        {
            "variant": variant,
            "median_wall_us_per_run": round(medians[variant]["wall_us_per_run"], 1),
            "median_cpu_us_per_run": round(medians[variant]["cpu_us_per_run"], 1),
            "wall_ratio": round(medians[variant]["wall_us_per_run"] / base["wall_us_per_run"], 3),
            "cpu_ratio": round(medians[variant]["cpu_us_per_run"] / base["cpu_us_per_run"], 3),
            "cpu_us_added_per_call": round(
                (medians[variant]["cpu_us_per_run"] - base["cpu_us_per_run"]) / calls, 2
            ),
        }
        for variant in variants
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5, help="inputs per key")
    parser.add_argument("--calls", type=int, default=10, help="model calls per run")
    parser.add_argument("--store", choices=["memory", "none"], default="memory")
    parser.add_argument("--redis", help="a Redis URL: adds the tenant variant")
    parser.add_argument("--out", type=Path, help="append the JSON lines to this file")
    args = parser.parse_args()
    logging.getLogger("flink_agents").setLevel(logging.ERROR)
    variants = ["none", "key"] + (["tenant"] if args.redis else [])
    for variant in variants:
        measure(variant, args)  # warm up: imports, schemas, the ledger's scripts
    rows: list[dict[str, Any]] = []
    for round_no in range(args.rounds):
        shift = round_no % len(variants)
        for variant in variants[shift:] + variants[:shift]:
            rows.append({"round": round_no + 1, **measure(variant, args)})
            print(json.dumps(rows[-1]), flush=True)
    lines = [json.dumps(row) for row in rows + summary(rows, variants, args.calls)]
    print("\n".join(lines[len(rows) :]))
    if args.out is not None:
        with args.out.open("a") as out:
            out.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
