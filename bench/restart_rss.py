"""The TaskManager's memory across restarts of one job (issue 37): the smallest form of the
soak's "RSS grows by about 19 MB per restart".

It submits one job to a running standalone cluster (``scripts/flink-cluster.sh``; start it with
``FLINK_TM_SLOTS=1`` and ``FLINK_TM_JAVA_OPTS=-XX:NativeMemoryTracking=summary`` to get the JVM's
own categories), then restarts it ``--restarts`` times the way the soak's ``checkpoint-failing``
fault does: a plain file where the next checkpoints' folders would go makes them fail, and with
no failed checkpoint tolerated each failure restarts the job (the same attempt-by-attempt
restart a task failure gives, never a cancel and resubmit). After each restart it waits until
every task is RUNNING, lets it settle and samples the TaskManager: ``/proc`` status (RSS, anon
and file parts, threads), ``smaps_rollup``, the number of mappings, and with NMT
``jcmd VM.native_memory summary`` per category. One JSON line per sample goes to ``--out``;
the end prints the growth per restart of each figure (least squares over the samples).

The job is the soak's support desk (``jobs/support_desk``: Kafka source and exactly-once sink,
Kafka action-state store, thread mode), idle or, with ``--rate``, fed tickets that the soak's
services (``bench.soak.SoakServices``: Pareto latencies) answer.

    PYTHONPATH=$PWD FLINK_REST_PORT=8281 FLINK_RPC_PORT=6323 FLINK_TM_SLOTS=1 \
        FLINK_TM_JAVA_OPTS=-XX:NativeMemoryTracking=summary scripts/flink-cluster.sh start
    KAFKA_PORT=9292 scripts/kafka.sh start
    .venv/bin/python -m bench.restart_rss --rest-port 8281 --bootstrap 127.0.0.1:9292 \
        --rate 6 --restarts 20 --out .cache/restart-rss/agent.jsonl

Optional per sample: ``--trim`` calls glibc's ``malloc_trim(0)`` in the TaskManager (through
gdb) before sampling, so RSS that glibc keeps but could give back (fragmentation, arenas) shows
as the difference between ``rss_before_trim_mb`` and ``rss_mb``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import yaml
from kafka.admin import KafkaAdminClient, NewTopic

from bench.native_heap import smaps_classes_mb
from bench.soak import SoakServices, Workload, soak_agent, ticket_lines
from bench.soak_flink import (
    block_checkpoints,
    next_checkpoint_id,
    restart_count,
    unblock_checkpoints,
)

REPO = Path(__file__).resolve().parents[1]
CLUSTER_SCRIPT = REPO / "scripts" / "flink-cluster.sh"
AGENT = REPO / "jobs" / "support_desk" / "agent.yaml"
CHECKPOINT_INTERVAL_MS = 1000
RESTART_DELAY_MS = 1000


def rest(port: int, path: str, method: str = "GET") -> Any:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read()
    return json.loads(body) if body else {}


def cluster_env(port: int) -> dict[str, str]:
    """FLINK_HOME, FLINK_CONF_DIR, ... of the cluster on ``port`` (``flink-cluster.sh env``)."""
    import os

    env = dict(os.environ, FLINK_REST_PORT=str(port), PYTHONPATH=str(REPO))
    line = subprocess.run(
        ["bash", str(CLUSTER_SCRIPT), "env"], env=env, capture_output=True, text=True, check=True
    ).stdout
    for word in line.split()[1:]:
        name, _, value = word.partition("=")
        env[name] = value
    return env


def taskmanager_pid(env: dict[str, str]) -> int:
    files = sorted(Path(env["FLINK_PID_DIR"]).glob("*taskexecutor*.pid"))
    pids = [int(line) for f in files for line in f.read_text().split()]
    if len(pids) != 1:
        raise SystemExit(f"expected one TaskManager, found pids {pids}: start with one")
    return pids[0]


def create_topics(bootstrap: str, names: list[str]) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(n, num_partitions=1, replication_factor=1) for n in names])
    finally:
        admin.close()


def agent_spec(
    folder: Path,
    bootstrap: str,
    run_id: str,
    agent: Path,
    probe: bool,
    delay_ms: int,
    kafka_event_log: bool,
) -> Path:
    """The soak's job spec (e2e ``write_spec`` plus ``bench.soak.job_settings``); its input
    topic is ``rss-input-<run_id>``."""
    topics = [f"rss-{kind}-{run_id}" for kind in ("input", "output", "store")]
    create_topics(bootstrap, topics)
    spec = {
        "name": f"restart-rss-agent-{run_id}",
        "agent": str(agent),
        "source": {
            "kind": "kafka",
            "topic": topics[0],
            "bootstrap_servers": bootstrap,
            "group_id": f"rss-{run_id}",
            "starting_offsets": "earliest",
        },
        "key": "customer",
        "sink": {
            "kind": "kafka",
            "topic": topics[1],
            "bootstrap_servers": bootstrap,
            "delivery": "exactly-once",
        },
        "execution_mode": "thread",
        "checkpointing": {
            "interval_ms": CHECKPOINT_INTERVAL_MS,
            "dir": str(folder / "ckpt"),
            "tolerable_failed_checkpoints": 0,
        },
        "restart_strategy": {
            "type": "fixed-delay",
            "attempts": 100_000,
            "delay_ms": delay_ms,
        },
        "store": {
            "kind": "kafka",
            "bootstrap_servers": bootstrap,
            "topic": topics[2],
            "partitions": 1,
        },
    }
    event_log: dict[str, Any] = {"listeners": []}
    if probe:
        event_log["listeners"].append("bench.restart_rss_probe:MallocProbe")
    if kafka_event_log:  # as the soak's job: its event log on a topic of its own
        topic = f"rss-events-{run_id}"
        create_topics(bootstrap, [topic])
        event_log["kafka"] = {"topic": topic, "bootstrap_servers": bootstrap, "partitions": 1}
    if event_log["listeners"] or "kafka" in event_log:
        spec["event_log"] = event_log
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def job_id_in(output: str) -> str:
    for word in output.replace(".", " ").split():
        if len(word) == 32 and all(c in "0123456789abcdef" for c in word):
            return word
    raise SystemExit(f"no JobID in:\n{output}")


def submit(args: argparse.Namespace, env: dict[str, str], folder: Path, run_id: str) -> str:
    """Submit the job (``flink-agents submit --detached``); its id."""
    agent = AGENT
    if args.rate > 0:
        agent = soak_agent(folder, f"http://127.0.0.1:{args.services_port}")
    spec = agent_spec(
        folder,
        args.bootstrap,
        run_id,
        agent,
        args.probe is not None,
        args.restart_delay_ms,
        args.kafka_event_log,
    )
    command = [
        sys.executable, "-m", "flink_agents.cli", "submit", str(spec),
        "--jobmanager", f"127.0.0.1:{args.rest_port}", "--detached",
    ]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, cwd=REPO)
    if done.returncode != 0:
        raise SystemExit(f"submit failed:\n{done.stdout}{done.stderr}")
    return job_id_in(done.stdout + done.stderr)


def broker_outage(bootstrap: str, seconds: float) -> None:
    """Stop the broker at ``bootstrap`` (started by ``scripts/kafka.sh`` on its port) for
    ``seconds``, then start it again."""
    import os

    env = dict(os.environ, KAFKA_PORT=bootstrap.rsplit(":", 1)[1])
    script = str(REPO / "scripts" / "kafka.sh")
    subprocess.run(["bash", script, "stop"], env=env, check=True, capture_output=True)
    time.sleep(seconds)
    subprocess.run(["bash", script, "start"], env=env, check=True, capture_output=True)


def running(port: int, job_id: str) -> bool:
    job = rest(port, f"/jobs/{job_id}")
    return bool(
        job["state"] == "RUNNING" and all(v["status"] == "RUNNING" for v in job["vertices"])
    )


def restarts(port: int, job_id: str) -> int:
    found = restart_count(rest(port, f"/jobs/{job_id}/metrics?get=numRestarts"))
    return found or 0


def wait(what: str, condition: Any, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.5)


def status_kb(pid: int) -> dict[str, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "RssAnon", "RssFile", "RssShmem", "Threads"):
            fields[name] = int(value.split()[0])
    return fields


def rollup_kb(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, _, value = line.partition(":")
        if value.strip().endswith("kB"):
            out[name] = int(value.split()[0])
    return out


NMT_LINE = re.compile(r"^-\s+(.+?) \(reserved=(\d+)KB, committed=(\d+)KB\)")
NMT_TOTAL = re.compile(r"^Total: reserved=(\d+)KB, committed=(\d+)KB")


def nmt_committed_kb(pid: int) -> dict[str, int]:
    """NMT's committed KB per category and in total (empty without NMT)."""
    done = subprocess.run(
        ["jcmd", str(pid), "VM.native_memory", "summary"], capture_output=True, text=True
    )
    out: dict[str, int] = {}
    for line in done.stdout.splitlines():
        line = line.strip()
        if m := NMT_TOTAL.match(line):
            out["Total"] = int(m.group(2))
        elif m := NMT_LINE.match(line):
            out[m.group(1).strip()] = int(m.group(3))
    return out


def malloc_trim(pid: int) -> None:
    subprocess.run(
        ["gdb", "-p", str(pid), "-batch", "-ex", "call (int) malloc_trim(0)"],
        capture_output=True,
        text=True,
        timeout=120,
    )


def ask_probe(folder: Path, request: dict[str, Any], timeout_s: float = 60) -> dict[str, Any]:
    """The job's answer to ``request`` (:mod:`bench.restart_rss_probe`), {} when none came."""
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / "request.tmp"
    partial.write_text(json.dumps(request))
    partial.replace(folder / "request.json")
    reply = folder / f"reply-{request['id']}.json"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if reply.exists():
            return dict(json.loads(reply.read_text()))
        time.sleep(0.2)
    return {}


def sample(pid: int, n: int, trim: bool, burst: int) -> dict[str, Any]:
    row: dict[str, Any] = {"restart": n * burst, "time": time.time()}
    before = status_kb(pid)
    if trim:
        row["rss_before_trim_mb"] = before["VmRSS"] / 1024
        malloc_trim(pid)
    status = status_kb(pid)
    row["rss_mb"] = status["VmRSS"] / 1024
    row["anon_mb"] = status["RssAnon"] / 1024
    row["file_mb"] = status["RssFile"] / 1024
    row["threads"] = status["Threads"]
    row["maps"] = len(Path(f"/proc/{pid}/maps").read_text().splitlines())
    row["rollup_kb"] = rollup_kb(pid)
    row["smaps_mb"] = smaps_classes_mb(pid)
    row["nmt_kb"] = nmt_committed_kb(pid)
    return row


def slope(points: list[tuple[float, float]]) -> float:
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    den = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / den if den else 0.0


def summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Growth per restart of each figure, over the samples after the ``skip`` first."""
    out = {}
    for key in ("rss_mb", "anon_mb", "file_mb", "threads", "maps"):
        out[key] = slope([(r["restart"], r[key]) for r in rows])
    if "rss_before_trim_mb" in rows[0]:
        out["rss_before_trim_mb"] = slope([(r["restart"], r["rss_before_trim_mb"]) for r in rows])
    for kind in rows[-1]["smaps_mb"]:
        out[f"smaps:{kind}"] = slope([(r["restart"], r["smaps_mb"].get(kind, 0.0)) for r in rows])
    for category in rows[-1]["nmt_kb"]:
        points = [(r["restart"], r["nmt_kb"].get(category, 0) / 1024) for r in rows]
        out[f"nmt:{category}"] = slope(points)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rest-port", type=int, default=8281)
    parser.add_argument("--bootstrap", default="127.0.0.1:9292")
    parser.add_argument("--restarts", type=int, default=20)
    parser.add_argument("--settle", type=float, default=8.0, help="seconds after RUNNING")
    parser.add_argument("--skip", type=int, default=3, help="first samples left out of slopes")
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="tickets per second to the agent job (0: idle); the services on --services-port "
        "(start the cluster with FLINK_AGENTS_EXAMPLE_SERVICES=http://127.0.0.1:PORT)",
    )
    parser.add_argument("--services-port", type=int, default=8965)
    parser.add_argument("--latency-scale", type=float, default=0.08)
    parser.add_argument(
        "--probe",
        type=Path,
        default=None,
        help="ask bench.restart_rss_probe in the job (the TaskManager started with "
        "FLINK_AGENTS_RSS_PROBE_DIR=this folder) for malloc's figures at each sample",
    )
    parser.add_argument("--probe-trim", action="store_true", help="the probe calls malloc_trim")
    parser.add_argument("--probe-types", action="store_true", help="gc objects by type")
    parser.add_argument(
        "--tracemalloc",
        type=int,
        default=-1,
        help="start tracemalloc (this many frames) at this sample, report growth since after",
    )
    parser.add_argument(
        "--restart-delay-ms",
        type=int,
        default=RESTART_DELAY_MS,
        help="the restart strategy's delay: with traffic, the backlog a restart meets",
    )
    parser.add_argument(
        "--kafka-event-log", action="store_true", help="the job's event log on a topic, as the soak"
    )
    parser.add_argument(
        "--broker-outage",
        type=float,
        default=0.0,
        help="stop the broker this many seconds before each burst (the script's own broker!)",
    )
    parser.add_argument(
        "--burst",
        type=int,
        default=1,
        help="restarts in a row per sample (--restarts counts samples; checkpoints keep "
        "failing until then), as the soak's checkpoint-failing fault restarted the job 1-7 times",
    )
    parser.add_argument(
        "--no-restart",
        type=float,
        default=0.0,
        help="the control: wait this many seconds instead of each restart",
    )
    parser.add_argument("--trim", action="store_true", help="malloc_trim(0) before each sample")
    parser.add_argument("--out", type=Path, default=REPO / ".cache" / "restart-rss" / "run.jsonl")
    args = parser.parse_args()

    env = cluster_env(args.rest_port)
    pid = taskmanager_pid(env)
    run_id = uuid.uuid4().hex[:8]
    folder = REPO / ".cache" / "restart-rss" / run_id
    folder.mkdir(parents=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    workload: Workload | None = None
    if args.rate > 0:
        SoakServices(args.services_port, 37, args.latency_scale).start()
    job_id = submit(args, env, folder, run_id)
    checkpoints = folder / "ckpt"
    print(f"job {job_id}, TaskManager pid {pid}, samples in {args.out}", flush=True)
    if args.rate > 0:
        workload = Workload(
            args.bootstrap, f"rss-input-{run_id}", args.rate, ticket_lines(40)
        ).start()
    rows: list[dict[str, Any]] = []
    try:
        with args.out.open("w") as out:
            for n in range(args.restarts + 1):
                wait("the job running", lambda: running(args.rest_port, job_id), 180)
                time.sleep(args.settle)
                row = sample(pid, n, args.trim, args.burst)
                row["job_restarts"] = restarts(args.rest_port, job_id)
                if args.probe is not None:
                    request: dict[str, Any] = {
                        "id": f"{run_id}-{n}",
                        "trim": args.probe_trim,
                        "types": args.probe_types,
                    }
                    if args.tracemalloc >= 0 and n >= args.tracemalloc:
                        request["tracemalloc"] = "start" if n == args.tracemalloc else "snapshot"
                        request["frames"] = 10
                    row["probe"] = ask_probe(args.probe, request)
                    found = row["probe"]
                    if found:
                        print(
                            f"  probe: rss {found['rss_mb']:.1f}, malloc "
                            + ", ".join(f"{k} {v:.1f}" for k, v in found["malloc_mb"].items())
                            + (
                                f"; after trim rss {found['rss_after_trim_mb']:.1f}, "
                                f"fordblks {found['malloc_after_trim_mb']['fordblks']:.1f}"
                                if "rss_after_trim_mb" in found
                                else ""
                            )
                            + f"; blocks {found['python_blocks']}"
                            + (
                                f", traced {found['traced_mb']:.1f} MB"
                                if "traced_mb" in found
                                else ""
                            ),
                            flush=True,
                        )
                rows.append(row)
                out.write(json.dumps(row) + "\n")
                out.flush()
                print(
                    f"restart {row['restart']}: rss {row['rss_mb']:.1f} MB "
                    f"(anon {row['anon_mb']:.1f}), "
                    f"threads {row['threads']}, maps {row['maps']}, "
                    f"NMT {row['nmt_kb'].get('Total', 0) / 1024:.1f} MB",
                    flush=True,
                )
                if n == args.restarts:
                    break
                if args.no_restart:  # the control: as long as a restart takes, without one
                    time.sleep(args.no_restart)
                    continue
                if args.broker_outage:  # the soak's broker-outage fault, on this script's broker
                    broker_outage(args.bootstrap, args.broker_outage)
                before = restarts(args.rest_port, job_id)
                history = rest(args.rest_port, f"/jobs/{job_id}/checkpoints")["history"]
                made = block_checkpoints(
                    checkpoints / job_id, next_checkpoint_id(history), 50 * args.burst
                )
                try:
                    wait(
                        "a restart",
                        lambda seen=before: restarts(args.rest_port, job_id) >= seen + args.burst,
                        120 * args.burst,
                    )
                finally:
                    unblock_checkpoints(made)
    finally:
        if workload is not None:
            workload.stop()
        rest(args.rest_port, f"/jobs/{job_id}?mode=cancel", method="PATCH")
    kept = rows[args.skip :]
    if len(kept) >= 2:
        growth = summary(kept)
        print(f"growth per restart over restarts {kept[0]['restart']}..{kept[-1]['restart']}:")
        for key, value in sorted(growth.items(), key=lambda kv: -abs(kv[1])):
            if abs(value) >= 0.05:
                print(f"  {key:40s} {value:+8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
