"""One section of the suite per process (each starts its own mini-cluster JVM); rows are
appended to a JSON-lines file as they are measured.

    .venv/bin/python -m bench.sections ours --out bench/results/raw.jsonl [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.baseline import baseline_pipeline
from bench.cluster import JobSettings, flink_config
from bench.flink_job import Pipeline, run_job
from bench.ours import agent_pipeline
from bench.plan import FULL, QUICK, Plan, expected_rate, inputs_for
from bench.workloads import DEPTH
from flink_agents.durable.store.store_config import StoreConfig

Row = dict[str, Any]
CPU_GUESS = 500.0  # runs/s, only to size a job before its workload's L = 0 rate is known


def _job(section: str, pipeline: Pipeline, *, inputs: int, keys: int, **labels: Any) -> Row:
    output = run_job(
        section, pipeline, inputs=inputs, keys=keys, configure=flink_config(JobSettings())
    )
    stats = output.stats()
    return {
        "section": section, **labels, "keys": keys, "inputs": inputs,
        **dataclasses.asdict(stats), "wall_s": output.wall_s,
    }  # fmt: skip


def ours(plan: Plan, _: str) -> Iterator[Row]:
    """Runs/s and latency of the keyed operator against the in-flight bound."""
    sweeps = [("one_call", plan.latencies, plan.keys)]
    sweeps += [(w, plan.deep_latencies, plan.keys[-1:]) for w in plan.deep_workloads]
    for workload, latencies, key_counts in sweeps:
        cpu_rate: float | None = None  # best L = 0 rate so far: sizes the later jobs
        for latency in sorted(latencies):
            for keys in key_counts:
                for bound in plan.bounds:
                    rate = expected_rate(
                        bound, keys, DEPTH[workload], latency, cpu_rate or CPU_GUESS
                    )
                    row = _job(
                        "ours", agent_pipeline(workload, latency, bound),
                        inputs=inputs_for(plan, rate, bound), keys=keys,
                        workload=workload, latency=latency, bound=bound,
                    )  # fmt: skip
                    if latency == 0 and row["runs_per_s"] > 0:  # nan compares False
                        cpu_rate = max(cpu_rate or 0.0, row["runs_per_s"])
                    yield row


def baseline(plan: Plan, _: str) -> Iterator[Row]:
    """Peer (a): the blocking keyed function on the same scripted model."""
    for latency in plan.baseline_latencies:
        for keys in plan.keys:
            rate = 1 / latency if latency else 2 * CPU_GUESS
            yield _job(
                "baseline", baseline_pipeline(latency), inputs=inputs_for(plan, rate), keys=keys,
                workload="one_call", latency=latency, bound=1,
            )  # fmt: skip


def durability(plan: Plan, bootstrap: str) -> Iterator[Row]:
    """Workload (1) with no store and with the Kafka store, back to back."""
    keys, bound = plan.keys[-1], plan.bounds[-1]
    for latency in plan.durability_latencies:
        rate = expected_rate(bound, keys, 1, latency, CPU_GUESS)
        for store_name in ("none", "kafka"):
            store = None
            if store_name == "kafka":
                topic = f"bench-durable-{uuid.uuid4().hex[:8]}"
                store = StoreConfig(kind="kafka", bootstrap_servers=bootstrap, topic=topic)
            yield _job(
                "durability", agent_pipeline("one_call", latency, bound, store),
                inputs=inputs_for(plan, rate, bound), keys=keys,
                workload="one_call", latency=latency, bound=bound, store=store_name,
            )  # fmt: skip


def recovery(plan: Plan, bootstrap: str) -> Iterator[Row]:
    """Injected failure mid-run, without and with the Kafka store."""
    from bench.recovery import measure

    for store_name in ("none", "kafka"):
        store = None
        if store_name == "kafka":
            topic = f"bench-recovery-{uuid.uuid4().hex[:8]}"
            store = StoreConfig(kind="kafka", bootstrap_servers=bootstrap, topic=topic)
        result = measure(
            store, inputs=plan.recovery_inputs, keys=10_000, latency=0.05,
            fail_after=plan.recovery_inputs // 3,
        )  # fmt: skip
        yield {"section": "recovery", "latency": 0.05, **dataclasses.asdict(result)}


def rebuild(plan: Plan, bootstrap: str) -> Iterator[Row]:
    """Store restore from a marker behind 10k .. 1M older records (no JVM)."""
    from bench.store_rebuild import measure

    for older in plan.rebuild_older:
        result = measure(bootstrap, older, full=older <= 10_000)
        yield {"section": "rebuild", **dataclasses.asdict(result)}


def peer(plan: Plan, _: str) -> Iterator[Row]:
    """Peer (b): Apache flink-agents in its own venv (installed on first use)."""
    from bench.peer import run

    yield from run(plan)


SECTIONS: dict[str, Callable[[Plan, str], Iterator[Row]]] = {
    "ours": ours,
    "baseline": baseline,
    "durability": durability,
    "recovery": recovery,
    "rebuild": rebuild,
    "peer": peer,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("section", choices=sorted(SECTIONS))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    plan = QUICK if args.quick else FULL
    with args.out.open("a") as out:
        for row in SECTIONS[args.section](plan, args.bootstrap):
            print(json.dumps(row), file=out, flush=True)
            print(f"[{args.section}] {json.dumps(row)}", flush=True)


if __name__ == "__main__":
    main()
