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
average before and after the job. With the operator's metrics on, the job's REST API is read
every 0.5 s while it runs, with the CPU time of the JVM and of its threads from /proc; over the
middle of the job (from the first reading past 10 % of the runs to the last before 90 %):
``visits_per_run``, the operator's timer visits (``operator.visits``) per run finished
(``runs.finished``), ``idle_visit_share``, the share of them that emitted nothing, and
``cpu_ms_per_run`` of the JVM, of its agent threads (operator, engine loop, store) and of the
operator thread alone: counts and CPU, less moved by other load on the machine than runs/s;
and the mean of the runs in flight and queued in the engine (is it fed enough?).
With ``--event-log file``, ``emit_delay_ms`` is the time from a run's end (its
``run_finished`` record) to its output leaving the operator, p50 and p99. The figures for the
operator's targets (1,000 keys, Kafka store on) come from this script; `make bench` runs the
wider matrix (see bench/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from pyflink.common import Configuration, Encoder, Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import FileSink

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.cluster import JobSettings, flink_config  # noqa: E402
from bench.procs import java_children, peak_rss_mb  # noqa: E402
from bench.workloads import one_call  # noqa: E402
from flink_agents.durable.store.store_config import StoreConfig  # noqa: E402
from flink_agents.flink import AgentsExecutionEnvironment, OperatorOptions  # noqa: E402
from flink_agents.flink.job_status import (  # noqa: E402
    free_local_port,
    local_rest_settings,
    local_rest_url,
)
from flink_agents.observability import EventLogConfig  # noqa: E402


def stamp(line: str) -> str:
    return f"{time.time():.6f}"


def stamp_with_output(line: str) -> str:
    """The stamp and the output record it belongs to (matched to the event log afterwards)."""
    return f"{time.time():.6f} {line}"


VISIT_METRICS = {
    "visits": "flink_agents.operator.visits",
    "idle": "flink_agents.operator.visits_idle",
    "runs": "flink_agents.runs.finished",
    "in_flight": "flink_agents.runs.in_flight",
    "queued": "flink_agents.runs.queued",
}


class JobSampler:
    """Reads the operator's visit and run counters from the job's REST API (summed over
    subtasks) every ``every_s`` while the job runs, with the CPU time of the mini-cluster JVM
    and of its agent threads (``/proc``) at that moment."""

    def __init__(self, rest_url: str, job_id: str, every_s: float = 0.5) -> None:
        self._jobs = f"{rest_url}/jobs/{job_id}"
        self._every_s = every_s
        self._stop = threading.Event()
        self.samples: list[dict[str, float]] = []
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def stop(self) -> list[dict[str, float]]:
        self._stop.set()
        self._thread.join()
        return self.samples

    def _poll(self) -> None:
        while not self._stop.wait(self._every_s):
            try:
                reading = self._read()
            except (OSError, ValueError, StopIteration):  # starting, or already gone
                continue
            if reading is not None:
                self.samples.append({**reading, **jvm_cpu_s()})

    def _read(self) -> dict[str, float] | None:
        vertices = _get(self._jobs)["vertices"]
        agent = next(v["id"] for v in vertices if "agent:" in v["name"])
        base = f"{self._jobs}/vertices/{agent}/subtasks/metrics"
        ids = {
            name: metric["id"]
            for metric in _get(base)
            for name, suffix in VISIT_METRICS.items()
            if metric["id"].endswith(suffix)
        }
        if len(ids) < len(VISIT_METRICS):
            return None
        query = urllib.parse.urlencode({"get": ",".join(ids.values()), "agg": "sum"})
        sums = {metric["id"]: metric.get("sum") for metric in _get(f"{base}?{query}")}
        if any(sums.get(i) is None for i in ids.values()):
            return None
        return {name: float(sums[i]) for name, i in ids.items()}


def jvm_cpu_s() -> dict[str, float]:
    """CPU seconds so far of the mini-cluster JVM, of its operator thread and of all its agent
    threads. The operator thread is the first thread named after the agent's task (``agent:``):
    the Python threads it starts (the engine's loop, the store's) inherit its name, later."""
    [jvm] = java_children(os.getpid())
    tick = os.sysconf("SC_CLK_TCK")
    agent: list[tuple[int, float]] = []
    for task in Path(f"/proc/{jvm}/task").iterdir():
        try:
            if (task / "comm").read_text().startswith("agent:"):
                agent.append((int(task.name), _cpu_ticks(task / "stat") / tick))
        except OSError:
            continue  # the thread ended
    return {
        "jvm_cpu_s": _cpu_ticks(Path(f"/proc/{jvm}/stat")) / tick,
        "operator_cpu_s": min(agent)[1] if agent else 0.0,
        "agent_threads_cpu_s": sum(cpu for _, cpu in agent),
    }


def _cpu_ticks(stat: Path) -> int:
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=2) as answer:
        return json.load(answer)


def sampled_figures(samples: list[dict[str, float]], inputs: int) -> dict[str, Any]:
    """Visits per run and CPU ms per run between the first sample past 10 % of the runs and
    the last before 90 % (the middle of the job, as the rate); the share of visits that
    emitted nothing over the same stretch."""
    middle = [s for s in samples if 0.1 * inputs <= s["runs"] <= 0.9 * inputs]
    if len(middle) < 2 or middle[-1]["runs"] == middle[0]["runs"]:
        return {"visits_per_run": None}
    first, last = middle[0], middle[-1]
    runs = last["runs"] - first["runs"]
    visits = last["visits"] - first["visits"]

    def per_run(name: str, scale: float = 1.0) -> float:
        return round((last[name] - first[name]) * scale / runs, 3)

    return {
        "visits_per_run": per_run("visits"),
        "idle_visit_share": round((last["idle"] - first["idle"]) / visits, 3) if visits else None,
        "cpu_ms_per_run": {
            "jvm": per_run("jvm_cpu_s", 1000),
            "agent_threads": per_run("agent_threads_cpu_s", 1000),
            "operator_thread": per_run("operator_cpu_s", 1000),
        },
        "mean_in_flight": round(sum(s["in_flight"] for s in middle) / len(middle), 1),
        "mean_queued": round(sum(s["queued"] for s in middle) / len(middle), 1),
        "sampled_runs": int(runs),
    }


def emit_delays(stamped: list[str], events: Path) -> dict[str, Any]:
    """p50/p99 (ms) of output stamp minus its run's ``run_finished`` time (the last one: a
    replayed run finishes again), over the middle 80 % of outputs as the rate: at the end the
    end-of-input visits wait for one key after another."""
    finished: dict[tuple[str, int], float] = {}
    for part in events.parent.glob(events.name):
        for line in part.read_text().splitlines():
            record = json.loads(line)
            if record.get("kind") == "run_finished":
                finished[(json.dumps(record["key"]), record["seq"])] = record["time"]
    delays = []
    ordered = sorted(stamped)  # by stamp: each line starts with its fixed-width wall time
    for line in ordered[len(ordered) // 10 : (9 * len(ordered)) // 10]:
        at, _, text = line.partition(" ")
        output = json.loads(text)
        ended = finished.get((json.dumps(output["key"]), output["seq"]))
        if ended is not None:
            delays.append((float(at) - ended) * 1000)
    if not delays:
        return {"emit_delay_ms": None}
    delays.sort()
    return {
        "emit_delay_ms": {
            "p50": round(delays[len(delays) // 2], 1),
            "p99": round(delays[(99 * len(delays)) // 100], 1),
            "matched": len(delays),
        }
    }


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
    port = free_local_port()
    settings = {**flink_config(JobSettings(mode=args.mode))(work), **local_rest_settings(port)}
    for name, value in settings.items():
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
    stamper = stamp_with_output if event_log is not None else stamp
    outputs.to_datastream().map(stamper, output_type=Types.STRING()).sink_to(sink)

    load_before = os.getloadavg()[0]
    started = time.time()
    client = env.execute_async("bench-operator")
    sampler = JobSampler(local_rest_url(port), str(client.get_job_id()))
    try:
        client.get_job_execution_result().result()
    finally:
        samples = sampler.stop()
    wall = time.time() - started

    lines = [
        line
        for part in (work / "out").rglob("*")
        if part.is_file()
        for line in part.read_text().splitlines()
    ]
    stamps = sorted(float(line.partition(" ")[0]) for line in lines)
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
        **sampled_figures(samples, args.inputs),
        **(emit_delays(lines, work / "events-*.jsonl") if event_log is not None else {}),
        **peak_rss(),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
