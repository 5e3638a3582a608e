"""Throughput of the keyed agent operator on the PyFlink mini-cluster.

One scripted chat call per input (a one-turn ReAct agent), inputs spread over many keys, the
model answering after a fixed latency. Each output is stamped with the wall time it left the
operator; the rate is measured over the middle 80 % of outputs, so JVM start-up and the tail do
not count. Peak RSS is read from /proc for this process (the client, which in loopback mode also
runs the Python functions) and the JVM it started.

    .venv/bin/python -m bench.operator_throughput --keys 1000 --latency 0.2 --store kafka
    .venv/bin/python -m bench.operator_throughput --latency 0.2 --store kafka --event-log file

Prints one JSON line of results, with the concurrency efficiency: runs/s over the ideal
min(bound, keys, inputs) / latency (the model's latency the only limit), and the 1-minute load
average before and after the job. The figures for the operator's targets (1,000 keys, Kafka
store on) come from this script; `make bench` runs the wider matrix (see bench/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from pyflink.common import Configuration, Encoder, Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import FileSink

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.cluster import JobSettings, flink_config  # noqa: E402
from bench.procs import java_children, peak_rss_mb  # noqa: E402
from bench.workloads import one_call  # noqa: E402
from flink_agents.durable.store.config import StoreConfig  # noqa: E402
from flink_agents.flink import AgentsExecutionEnvironment, OperatorOptions  # noqa: E402
from flink_agents.observability import EventLogConfig  # noqa: E402


def stamp(line: str) -> str:
    return f"{time.time():.6f}"


def ideal_rate(bound: int, keys: int, inputs: int, latency: float) -> float | None:
    """Runs/s if only the model's latency limited them: one run per key at a time, at most
    ``bound`` in flight (and never more than there are inputs). None at zero latency."""
    if not latency:
        return None
    return min(bound, keys, inputs) / latency


def peak_rss() -> dict[str, float]:
    """VmHWM of this process and of its java children (the mini-cluster JVM)."""
    me = os.getpid()
    java = max((peak_rss_mb(pid) for pid in java_children(me)), default=0.0)
    return {"python_mb": round(peak_rss_mb(me), 1), "jvm_mb": round(java, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=10000)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--max-in-flight", type=int, default=1000)
    parser.add_argument(
        "--max-unfinished",
        type=int,
        default=None,
        help="inputs accepted but not finished before back-pressure (default 2 x the bound)",
    )
    parser.add_argument("--mode", choices=["thread", "process"], default="thread")
    parser.add_argument("--parallelism", type=int, default=1)
    parser.add_argument("--store", choices=["none", "memory", "kafka"], default="none")
    parser.add_argument("--bootstrap", default="127.0.0.1:9092", help="Kafka for --store kafka")
    parser.add_argument(
        "--event-log",
        choices=["off", "file"],
        default="off",
        help="file: keep the event log (JSON lines with payloads) beside the outputs",
    )
    parser.add_argument(
        "--metrics", choices=["on", "off"], default="on", help="the operator's Flink metrics"
    )
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-operator-", dir=REPO / ".cache"))
    config = Configuration()
    for name, value in flink_config(JobSettings(mode=args.mode))(work).items():
        config.set_string(name, value)
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(args.parallelism)

    records = [{"k": i % args.keys, "text": f"q{i}"} for i in range(args.inputs)]
    options = OperatorOptions(
        max_in_flight=args.max_in_flight,
        max_unfinished=args.max_unfinished,
        metrics=args.metrics == "on",
    )
    store = None
    if args.store != "none":
        store = StoreConfig(
            kind=args.store,
            bootstrap_servers=args.bootstrap if args.store == "kafka" else None,
            topic=f"bench-operator-{work.name}",
        )
    event_log = None
    if args.event_log == "file":
        event_log = EventLogConfig(path=str(work / "events-{subtask}.jsonl"))
    agents = AgentsExecutionEnvironment(env, options=options, store=store, event_log=event_log)
    outputs = agents.from_list(records, key="k").apply(one_call(args.latency))
    sink = FileSink.for_row_format(str(work / "out"), Encoder.simple_string_encoder()).build()
    outputs.to_datastream().map(stamp, output_type=Types.STRING()).sink_to(sink)

    load_before = os.getloadavg()[0]
    started = time.time()
    env.execute("bench-operator")
    wall = time.time() - started

    stamps = sorted(
        float(line)
        for part in (work / "out").rglob("*")
        if part.is_file()
        for line in part.read_text().split()
    )
    n = len(stamps)
    lo, hi = stamps[n // 10], stamps[(9 * n) // 10]
    rate = ((9 * n) // 10 - n // 10) / (hi - lo) if hi > lo else float("nan")
    ceiling = ideal_rate(args.max_in_flight, args.keys, args.inputs, args.latency)
    result = {
        "inputs": args.inputs,
        "keys": args.keys,
        "latency_s": args.latency,
        "mode": args.mode,
        "parallelism": args.parallelism,
        "store": args.store,
        "event_log": args.event_log,
        "metrics": args.metrics,
        "max_in_flight": args.max_in_flight,
        "max_unfinished": options.unfinished_bound,
        "outputs": n,
        "runs_per_s": round(rate, 1),
        "ceiling_runs_per_s": None if ceiling is None else round(ceiling, 1),
        "efficiency": None if ceiling is None else round(rate / ceiling, 3),
        "wall_s": round(wall, 1),
        "load_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        **peak_rss(),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
