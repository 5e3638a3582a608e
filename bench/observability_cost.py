"""The CPU the event log costs per run, measured in-process (less sensitive to other load than a
throughput A/B on a shared machine): `run_local` of the one-call agent at 0 ms latency, CPU
seconds of the process (the file sink's writer thread included) per run, configurations
alternated in every round (each round starts with the next one), medians over the rounds.

    python -m bench.observability_cost [--rounds 5] [--inputs 3000] [--out FILE.jsonl]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.workloads import one_call
from flink_agents.observability import EventLogConfig, MetricsListener
from flink_agents.plan.compile import compile_agent
from flink_agents.runtime import run_local

CONFIGS = ("off", "metrics", "metrics+log")


def cpu_per_run_us(config: str, inputs: int, folder: Path) -> float:
    """CPU microseconds per run of ``inputs`` runs over 1,000 keys in ``config``."""
    plan = compile_agent(one_call(0.0))
    records = [{"k": n % 1000, "text": f"q{n}"} for n in range(inputs)]
    listeners = [] if config == "off" else [MetricsListener()]
    log = EventLogConfig(path=str(folder / f"{config}.jsonl")) if config == "metrics+log" else None
    started = time.process_time()
    results = run_local(
        plan, records, key="k", max_in_flight=1000, listeners=listeners, event_log=log
    )
    cpu = time.process_time() - started
    assert len(results) == inputs
    return cpu / inputs * 1e6


def measure(
    rounds: int, inputs: int, report: Callable[[dict[str, object]], None]
) -> dict[str, float]:
    """Median CPU per run of each configuration over ``rounds`` alternating rounds."""
    samples: dict[str, list[float]] = {config: [] for config in CONFIGS}
    cpu_per_run_us("off", 300, Path(tempfile.mkdtemp()))  # warm up imports and caches
    for round_number in range(1, rounds + 1):
        with tempfile.TemporaryDirectory() as folder:
            first = (round_number - 1) % len(CONFIGS)  # none always runs first
            for config in CONFIGS[first:] + CONFIGS[:first]:
                value = cpu_per_run_us(config, inputs, Path(folder))
                samples[config].append(value)
                report({"round": round_number, "config": config, "cpu_us_per_run": round(value, 1)})
    return {config: round(statistics.median(values), 1) for config, values in samples.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--inputs", type=int, default=3000)
    parser.add_argument("--label", default="", help="a name for this tree (before/after)")
    parser.add_argument("--out", type=Path, help="append every sample and the medians here")
    args = parser.parse_args(argv)
    lines: list[dict[str, object]] = []

    def report(line: dict[str, object]) -> None:
        line = {"label": args.label, **line}
        lines.append(line)
        print(json.dumps(line), flush=True)

    medians = measure(args.rounds, args.inputs, report)
    report(
        {"medians_cpu_us_per_run": medians, "load": Path("/proc/loadavg").read_text().split()[0]}
    )
    if args.out:
        with args.out.open("a") as out:
            out.writelines(json.dumps(line) + "\n" for line in lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
