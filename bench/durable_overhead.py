"""What durable execution costs per run: in-process runs/s without a store, with the in-memory
store and with the Kafka store, for N keys x one scripted model call.

Not a test. The Kafka case needs the broker (`scripts/kafka.sh start`). Example:

    .venv/bin/python bench/durable_overhead.py --keys 1000 --latency-ms 0 50 \
        --bootstrap 127.0.0.1:9092

Every key's run makes one durable call to a scripted chat model (which sleeps for the given
latency) and emits its reply. All keys are in flight at once (``max_in_flight`` = keys), so with
a store the call results of many keys share flushes. Each figure is the median of ``--repeat``
runs (the machine is shared). ``--profile`` instead prints, per store, the functions with the
most own time (cProfile) over one run.

``--cpu`` instead prints the CPU time of the process (all its threads, `time.process_time`)
per run, per store, at the first latency: the median of ``--repeat`` rounds, the stores taking
turns within each round. Unlike runs/s it hardly moves when other processes load the machine.
``--agent react`` runs the agent of `bench.operator_throughput` instead (the one-call ReAct agent
of `bench/workloads.py`: three actions per run, so three action states per run against one),
which is what the operator's per-run figures are to be compared with.

``--run-latency`` instead measures what the store adds to each run's latency, in steady state:
``--per-key`` inputs for each key, ``--bound`` runs in flight, and per run the time from its
action starting to its result leaving the engine (which with a store waits for the call's
record: see docs/durable-execution.md). Prints p50 and p99 per store, from ``--repeat`` jobs:

    .venv/bin/python -m bench.durable_overhead --run-latency --keys 100 --bound 100 \
        --latency-ms 200 --per-key 20 --bootstrap 127.0.0.1:9092
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import logging
import pstats
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from bench.stats import percentile
from bench.workloads import one_call
from flink_agents.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents.api.chat import ChatMessage, ChatRequest
from flink_agents.durable.store import ActionStateStore, StoreConfig
from flink_agents.plan import AgentPlan, compile_agent
from flink_agents.providers.scripted import ScriptedChatModelConnection, ScriptedTurn
from flink_agents.runtime import OperatorOptions, RunResult, Runtime, RuntimeSettings

StoreFactory = Callable[[], ActionStateStore]

MODEL = ScriptedChatModelConnection(name="bench", turns=[ScriptedTurn(content="re: $input")])
STARTED: dict[str, float] = {}
"""When each run's action started, by input (``--run-latency``)."""


@action(InputEvent)
async def ask(event: InputEvent, ctx: RunnerContext) -> None:
    STARTED[str(event.input)] = time.perf_counter()
    request = ChatRequest(messages=[ChatMessage(role="user", content=str(event.input))])
    reply = await ctx.durable_execute_async(MODEL.chat, request, result_type=ChatMessage)
    ctx.send_event(OutputEvent(output=reply.content))


def one_action_plan() -> AgentPlan:
    """One action (``ask``) making one durable chat call: one action state per run."""
    agent = Agent(name="bench")
    agent.add_action(ask)
    return compile_agent(agent)


def react_plan() -> AgentPlan:
    """The operator benchmark's agent: a one-turn ReAct agent, three actions per run."""
    return compile_agent(one_call(MODEL.latency_seconds))


PLANS: dict[str, tuple[Callable[[], AgentPlan], Callable[[int], Any]]] = {
    "one-action": (one_action_plan, lambda key: key),
    "react": (react_plan, lambda key: {"k": key, "text": f"q{key}"}),  # its prompt reads text
}


def window(max_in_flight: int) -> RuntimeSettings:
    """The runtime's settings with ``max_in_flight`` runs at once (the rest: defaults)."""
    return RuntimeSettings(operator=OperatorOptions(max_in_flight=max_in_flight))


async def runs_per_second(
    keys: int, store: ActionStateStore | None, agent: str = "one-action"
) -> float:
    make_plan, make_input = PLANS[agent]
    plan = make_plan()
    engine = Runtime.build(plan, window(keys), store=store).engine
    start = time.perf_counter()
    for key in range(keys):
        engine.submit(key, make_input(key))
    await engine.drain()
    elapsed = time.perf_counter() - start
    assert len(engine.take_results()) == keys
    return keys / elapsed


async def run_latencies(
    keys: int, bound: int, per_key: int, store: ActionStateStore | None
) -> list[float]:
    """Seconds from each run's action start to its result, ``per_key`` runs per key."""
    agent = Agent(name="bench")
    agent.add_action(ask)
    latencies: list[float] = []

    def finished(result: RunResult) -> None:
        text = f"{result.run_id.key}/{result.run_id.seq}"
        latencies.append(time.perf_counter() - STARTED.pop(text))

    plan = compile_agent(agent)
    engine = Runtime.build(plan, window(bound), store=store, on_result=finished).engine
    for seq in range(per_key):
        for key in range(keys):
            engine.submit(key, f"{key}/{seq}", seq)
    await engine.drain()
    return latencies


def latency_report(args: argparse.Namespace, stores: dict[str, StoreFactory | None]) -> None:
    MODEL.latency_seconds = args.latency_ms[0] / 1000
    print(
        f"| store | p50 ms | p99 ms | ({args.keys} keys, bound {args.bound}, "
        f"{args.per_key} runs per key, L = {args.latency_ms[0]:g} ms, {args.repeat} jobs) |"
    )
    print("|---|---|---|---|")
    for name, make_store in stores.items():
        latencies: list[float] = []
        for _ in range(args.repeat):
            store = make_store() if make_store else None
            try:
                latencies += asyncio.run(run_latencies(args.keys, args.bound, args.per_key, store))
            finally:
                if store is not None:
                    store.close()
        latencies.sort()
        p50, p99 = (percentile(latencies, q) * 1000 for q in (0.5, 0.99))
        print(f"| {name} | {p50:.1f} | {p99:.1f} | |", flush=True)


def measure(
    keys: int,
    make_store: StoreFactory | None,
    profile: cProfile.Profile | None = None,
) -> float:
    store = make_store() if make_store else None
    try:
        if profile is None:
            return asyncio.run(runs_per_second(keys, store))
        return profile.runcall(asyncio.run, runs_per_second(keys, store))
    finally:
        if store is not None:
            store.close()


def cpu_per_run(keys: int, make_store: StoreFactory | None, agent: str) -> float:
    """CPU seconds of this process per run over one job of ``keys`` runs."""
    store = make_store() if make_store else None  # made outside: connecting is not per run
    try:
        start = time.process_time()
        asyncio.run(runs_per_second(keys, store, agent))
        if store is not None:
            store.flush()  # writes still buffered belong to these runs
        return (time.process_time() - start) / keys
    finally:
        if store is not None:
            store.close()


def cpu_report(args: argparse.Namespace, stores: dict[str, StoreFactory | None]) -> None:
    MODEL.latency_seconds = args.latency_ms[0] / 1000
    for make_store in stores.values():
        cpu_per_run(args.keys, make_store, args.agent)  # warm up (imports, schemas, connections)
    rounds: dict[str, list[float]] = {name: [] for name in stores}
    for _ in range(args.repeat):
        for name, make_store in stores.items():
            rounds[name].append(cpu_per_run(args.keys, make_store, args.agent))
    print(
        f"| store | CPU us/run ({args.keys} keys x 1 call, {args.agent} agent, "
        f"L = {args.latency_ms[0]:g} ms, median of {args.repeat} rounds) | min | max |"
    )
    print("|---|---|---|---|")
    for name, seconds in rounds.items():
        median, low, high = (
            v * 1e6 for v in (statistics.median(seconds), min(seconds), max(seconds))
        )
        print(f"| {name} | {median:.0f} | {low:.0f} | {high:.0f} |", flush=True)


def print_profile(keys: int, name: str, make_store: StoreFactory | None) -> None:
    measure(keys, make_store)  # warm up (imports, schemas, broker connections)
    profile = cProfile.Profile()
    # Collections pause whatever runs: cProfile charges them to random functions, so sum them.
    pauses: list[float] = []

    def on_gc(phase: str, info: dict[str, int]) -> None:
        now = time.perf_counter()
        pauses.append(now if phase == "start" else now - pauses.pop())

    gc.callbacks.append(on_gc)
    try:
        rate = measure(keys, make_store, profile)
    finally:
        gc.callbacks.remove(on_gc)
    print(f"\n### {name}: {rate:,.0f} runs/s under cProfile; GC pauses {sum(pauses):.3f} s")
    pstats.Stats(profile).strip_dirs().sort_stats("tottime").print_stats(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--latency-ms", type=float, nargs="+", default=[0.0, 50.0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bootstrap", help="Kafka bootstrap servers; omit to skip Kafka")
    parser.add_argument("--profile", action="store_true", help="profile the first latency")
    parser.add_argument("--run-latency", action="store_true", help="p50/p99 per run instead")
    parser.add_argument("--cpu", action="store_true", help="CPU time per run instead")
    parser.add_argument(
        "--agent",
        choices=sorted(PLANS),
        default="one-action",
        help="--cpu: the agent (react: the operator benchmark's, three actions per run)",
    )
    parser.add_argument("--bound", type=int, default=100, help="runs in flight (--run-latency)")
    parser.add_argument("--per-key", type=int, default=20, help="runs per key (--run-latency)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    stores: dict[str, StoreFactory | None] = {
        "none": None,
        "memory": StoreConfig(kind="memory").build,
    }
    if args.bootstrap:
        topic = f"bench-durable-{uuid.uuid4().hex[:8]}"
        kafka = StoreConfig(kind="kafka", bootstrap_servers=args.bootstrap, topic=topic)
        stores["kafka"] = kafka.build

    if args.run_latency:
        latency_report(args, stores)
        return
    if args.cpu:
        cpu_report(args, stores)
        return
    if args.profile:
        MODEL.latency_seconds = args.latency_ms[0] / 1000
        for name, make_store in stores.items():
            print_profile(args.keys, name, make_store)
        return
    print(f"| latency | store | runs/s ({args.keys} keys x 1 call, median of {args.repeat}) |")
    print("|---|---|---|")
    for latency in args.latency_ms:
        MODEL.latency_seconds = latency / 1000
        for name, make_store in stores.items():
            rates = [measure(args.keys, make_store) for _ in range(args.repeat)]
            print(f"| {latency:g} ms | {name} | {statistics.median(rates):,.0f} |", flush=True)


if __name__ == "__main__":
    main()
