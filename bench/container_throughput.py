"""Throughput of the one-call job on the cluster of containers, at 1 and 2 TaskManagers.

    make image && make bench-containers        # python -m bench.container_throughput

The cluster is ``scripts/containers.sh``'s (a broker, a JobManager and TaskManagers of one slot
each, all containers of the project image on the host network), brought up here with as many
TaskManagers as the highest parallelism measured, unless one is up already, and down at the end
if it was brought up here. Its ports and image come from the same environment as the script's
(``CLUSTER_KAFKA_PORT``, ``CLUSTER_REST_PORT``, ``CLUSTER_RPC_PORT``, ``IMAGE``).

Each job is ``bench/cluster_throughput.py``'s: the one-call agent on the scripted model (every
call sleeps ``--latency``, 0 by default: the CPU-bound point, where a second TaskManager's own
interpreter is what adds throughput), inputs round-robin over ``--keys`` keys, Kafka in and out,
thread mode, the Kafka store, checkpoints every second. Parallelism p runs p subtasks, one per
TaskManager (one slot each), so parallelism 1 runs on 1 TaskManager and parallelism 2 on 2; the
REST API's placement of the job's subtasks is recorded with each row. The input topic is filled
before the job is submitted (from a container of the image, ``containers.sh submit``); the rate
is taken from the output records' broker timestamps over the middle 80 %, then the job is cancelled
and its topics deleted.

An unrecorded warm-up job at the highest parallelism first (every TaskManager's interpreter
loads the package once), then ``--rounds`` rounds, the parallelisms in reverse order every
other round. One JSON row per job goes to ``--out`` (``--append``: after its rows), with the load
average and the machine's CPU busy share while it ran, and the cores each container of the
cluster used while the rate was measured (from its cgroup, ``bench/container_cpu.py``): on a
shared machine the containers get what the scheduler gives their cgroups, whatever the number of
TaskManagers. The table of medians is printed at the end (``--report-only`` redraws it from
``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.error
import uuid
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka.admin import AdminClient

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.cluster_throughput import (  # noqa: E402
    create_topics,
    fill,
    job_spec,
    middle_rate,
    middle_window,
    output_times,
    rest,
    submitted_job,
)
from bench.container_cpu import CpuSampler, engine  # noqa: E402
from bench.report import fmt, table  # noqa: E402
from bench.workloads import one_call  # noqa: E402
from flink_agents.plan.compile import compile_agent  # noqa: E402

Row = dict[str, Any]
CLUSTER_SCRIPT = REPO / "scripts" / "containers.sh"
KAFKA_PORT = int(os.environ.get("CLUSTER_KAFKA_PORT", "19092"))
REST_PORT = os.environ.get("CLUSTER_REST_PORT", "18081")
REST_URL = f"http://127.0.0.1:{REST_PORT}"
CONTAINER = f"flink-agents-{REST_PORT}-"
"""The cluster's containers' names: this, then broker, jobmanager, taskmanager-N (containers.sh)."""
IMAGE = os.environ.get("IMAGE", "flink-agents:0.1.0")


def containers(
    taskmanagers: int, *args: str, timeout_s: float = 300
) -> subprocess.CompletedProcess[str]:
    """``scripts/containers.sh ARGS`` for a cluster of ``taskmanagers`` TaskManagers."""
    env = {**os.environ, "CLUSTER_TASKMANAGERS": str(taskmanagers)}
    return subprocess.run(
        ["bash", str(CLUSTER_SCRIPT), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def image_id() -> str:
    """``IMAGE``'s ID (12 digits) and build date."""
    fields = engine("image", "inspect", "--format", "{{.Id}} {{.Created}}", IMAGE).split()
    return f"{fields[0][:12]} built {fields[1]} {fields[2][:8]}" if len(fields) > 2 else "?"


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot (/proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def busy_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total > 0 else float("nan")


def taskmanagers_of(job: str) -> list[str]:
    """The TaskManagers the job's subtasks were placed on (every vertex), sorted."""
    found: set[str] = set()
    for vertex in rest(REST_URL, f"/jobs/{job}")["vertices"]:
        placed = rest(REST_URL, f"/jobs/{job}/vertices/{vertex['id']}/taskmanagers")
        found.update(tm["taskmanager-id"] for tm in placed["taskmanagers"])
    return sorted(found)


def wait_for_free_slots(slots: int, timeout_s: float = 120) -> None:
    """Until the cancelled job's slots are free again (the next job needs them)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if rest(REST_URL, "/overview")["slots-available"] >= slots:
                return
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{slots} free slots not within {timeout_s} s")


def delete_topics(bootstrap: str, topics: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive its futures
    for future in admin.delete_topics(topics).values():
        try:
            future.result(timeout=30)
        except Exception as error:  # a store topic the job never created: nothing to keep small
            print(f"[bench] deleting a topic: {error}", file=sys.stderr)


def measure_job(parallelism: int, args: argparse.Namespace, slots: int) -> Row:
    """One job at ``parallelism`` on the cluster; its row."""
    bootstrap = f"127.0.0.1:{KAFKA_PORT}"
    run = uuid.uuid4().hex[:8]
    topics = {name: f"bench-containers-{name}-{run}" for name in ("input", "output", "store")}
    create_topics(bootstrap, topics, parallelism)
    fill(bootstrap, topics["input"], args.inputs, args.keys)
    # The job's folder is mounted into the job client's container and shipped to the cluster
    # (-pyfs); the image's user (uid 9999) reads it.
    work = REPO / ".cache" / "container-bench" / run
    work.mkdir(parents=True)
    (work / "one_call.plan.json").write_text(compile_agent(one_call(args.latency)).to_json())
    spec = job_spec(
        run, "one_call.plan.json", bootstrap, topics, parallelism, f"/flink-data/checkpoints/{run}"
    )
    (work / "job.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    for path in (work.parent, work, *work.iterdir()):
        path.chmod(0o755 if path.is_dir() else 0o644)

    row: Row = {
        "parallelism": parallelism,
        "inputs": args.inputs,
        "keys": args.keys,
        "latency_s": args.latency,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_before": load(),
    }
    roles = ["broker", "jobmanager", *(f"taskmanager-{n}" for n in range(1, slots + 1))]
    ticks, started = cpu_ticks(), time.monotonic()
    with CpuSampler([CONTAINER + role for role in roles]) as sampler:
        job = submitted_job(containers(slots, "submit", str(work / "job.yaml"), "--detached"))
        row["submit_s"] = round(time.monotonic() - started, 1)
        try:
            times = output_times(bootstrap, topics["output"], args.inputs, timeout=600)
            row["taskmanagers_used"] = len(taskmanagers_of(job))
        finally:
            rest(REST_URL, f"/jobs/{job}?mode=cancel", method="PATCH")
    # The cores each container used while the rate was measured (the middle 80 % of outputs).
    window_start, window_end, _ = middle_window(times)
    cores = {
        name.removeprefix(CONTAINER): used
        for name, used in sampler.cores(window_start, window_end).items()
    }
    row["cores"] = cores
    taskmanagers = [used for role, used in cores.items() if role.startswith("taskmanager")]
    row["taskmanager_cores"] = round(sum(taskmanagers), 2) if taskmanagers else None
    row["wall_s"] = round(time.monotonic() - started, 1)
    row["cpu_busy"] = round(busy_share(ticks, cpu_ticks()), 2)
    row["load_after"] = load()
    row["outputs"] = len(times)
    row["runs_per_s"] = round(middle_rate(times), 1)
    row["taskmanagers_registered"] = rest(REST_URL, "/overview")["taskmanagers"]
    wait_for_free_slots(slots)
    delete_topics(bootstrap, list(topics.values()))
    return row


def order(parallelisms: list[int], round_index: int) -> list[int]:
    """This round's order of the parallelisms: reversed every other round."""
    return parallelisms if round_index % 2 == 0 else parallelisms[::-1]


SUMMARY_HEADERS = (
    "parallelism", "TaskManagers used", "jobs", "runs/s", "median runs/s", "over the lowest",
    "TaskManager cores (median)", "runs per TaskManager CPU-second (median)",
    "machine CPU busy (median)",
)  # fmt: skip
JOB_HEADERS = (
    "round", "parallelism", "started (UTC)", "runs/s", "outputs", "submit s", "wall s",
    "load before", "load after", "machine CPU busy", "TaskManager cores",
)  # fmt: skip


def median_of(values: list[float | None]) -> float | None:
    """The median of the values measured (None: not measured), or None."""
    measured = [v for v in values if v is not None]
    return statistics.median(measured) if measured else None


def per_core(row: Row) -> float | None:
    cores = row.get("taskmanager_cores")
    return row["runs_per_s"] / cores if cores else None


def report(rows: list[Row]) -> str:
    """Medians per parallelism with the gain over the lowest and the cores the TaskManagers
    got, then every job with the load it ran under."""
    by_p: dict[int, list[Row]] = {}
    for r in rows:
        by_p.setdefault(r["parallelism"], []).append(r)
    medians = {p: statistics.median(r["runs_per_s"] for r in rs) for p, rs in by_p.items()}
    lowest = medians[min(medians)]
    summary = [
        [
            fmt(p),
            "/".join(fmt(n) for n in sorted({r["taskmanagers_used"] for r in rs})),
            fmt(len(rs)),
            ", ".join(fmt(r["runs_per_s"], 1) for r in rs),
            f"**{fmt(medians[p], 1)}**",
            f"{medians[p] / lowest:.2f}x",
            fmt(median_of([r.get("taskmanager_cores") for r in rs]), 2),
            fmt(median_of([per_core(r) for r in rs]), 1),
            fmt(statistics.median(r["cpu_busy"] for r in rs), 2),
        ]
        for p, rs in sorted(by_p.items())
    ]
    jobs = [
        [
            fmt(r["round"]),
            fmt(r["parallelism"]),
            r["started"],
            fmt(r["runs_per_s"], 1),
            f"{fmt(r['outputs'])}/{fmt(r['inputs'])}",
            fmt(r["submit_s"], 1),
            fmt(r["wall_s"], 1),
            r["load_before"],
            r["load_after"],
            fmt(r["cpu_busy"], 2),
            fmt(r.get("taskmanager_cores"), 2),
        ]
        for r in rows
    ]
    return table(SUMMARY_HEADERS, summary) + "\n\n" + table(JOB_HEADERS, jobs)


def measure(args: argparse.Namespace) -> None:
    """Bring the cluster up if needed, warm it up, run the rounds into ``args.out`` (after its
    rounds, numbered on from them, with ``--append``)."""
    slots = max(args.parallelisms)
    up_here = containers(slots, "status").returncode != 0
    try:
        if up_here:
            started = time.monotonic()
            done = containers(slots, "up")
            if done.returncode != 0:
                raise RuntimeError(f"containers.sh up failed:\n{done.stdout}{done.stderr}")
            print(f"[bench] cluster up in {time.monotonic() - started:.0f} s", flush=True)
        image = image_id()
        if args.warmup_inputs:
            warm = argparse.Namespace(**{**vars(args), "inputs": args.warmup_inputs})
            print(f"[bench] warm-up {json.dumps(measure_job(slots, warm, slots))}", flush=True)
        earlier = rows_in(args.out) if args.append and args.out.exists() else []
        first = max((r["round"] for r in earlier), default=-1) + 1
        with args.out.open("a" if args.append else "w") as out:
            for round_index in range(first, first + args.rounds):
                for parallelism in order(args.parallelisms, round_index):
                    row = measure_job(parallelism, args, slots)
                    row = {"round": round_index, **row, "image": f"{IMAGE} {image}"}
                    print(json.dumps(row), file=out, flush=True)
                    print(json.dumps(row), flush=True)
    finally:
        if up_here:
            containers(slots, "down")


def rows_in(path: Path) -> list[Row]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--parallelisms", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--inputs", type=int, default=10_000)
    parser.add_argument("--warmup-inputs", type=int, default=3_000, help="0: no warm-up job")
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--out", type=Path, default=REPO / ".cache" / "container-throughput.jsonl")
    parser.add_argument("--append", action="store_true", help="more rounds after --out's")
    parser.add_argument("--report-only", action="store_true", help="the tables from --out")
    args = parser.parse_args()
    if not args.report_only:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        started, load_start = time.time(), load()
        measure(args)
        print(f"wall {(time.time() - started) / 60:.1f} min; load {load_start} -> {load()}")
    print(report(rows_in(args.out)))


if __name__ == "__main__":
    main()
