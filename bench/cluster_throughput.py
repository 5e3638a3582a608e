"""Throughput of the keyed operator on the standalone cluster, Kafka in and out.

In thread mode every subtask of one TaskManager shares its embedded interpreter (one GIL), so
more cores need more TaskManagers. Start the cluster with one slot per TaskManager and as many
TaskManagers as the parallelism, then run this script:

    FLINK_TM_SLOTS=1 scripts/flink-cluster.sh start
    scripts/flink-cluster.sh start-taskmanager       # a second TaskManager, for --parallelism 2
    .venv/bin/python -m bench.cluster_throughput --parallelism 2

It fills an input topic, submits the one-call agent (thread mode, Kafka store on) with
``flink-agents submit``, reads the answers back, takes the rate from the output records'
timestamps over the middle 80 %, and cancels the job. Prints one JSON line.

The output topic stamps each record with the time the broker appended it (``LogAppendTime``):
the sink's own timestamps are the inputs' (an answer emitted while its input's element is
processed keeps that element's timestamp, see ``flink_agents.flink.operator.OutputTimestamps``),
which are the times the input topic was filled, not when the answer came out.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import yaml
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.workloads import one_call  # noqa: E402
from flink_agents.plan.compile import compile_agent  # noqa: E402


def rest(url: str, path: str, method: str = "GET") -> dict:
    request = urllib.request.Request(url + path, method=method)
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read()
    return json.loads(body) if body else {}


def cluster_env() -> dict[str, str]:
    """This environment plus the cluster's FLINK_* folders, without PyFlink's loopback marker."""
    exported = subprocess.run(
        ["bash", str(REPO / "scripts" / "flink-cluster.sh"), "env"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYFLINK_")}
    for assignment in exported.removeprefix("export ").split():
        name, _, value = assignment.partition("=")
        env[name] = value
    return env


def fill(bootstrap: str, topic: str, inputs: int, keys: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(inputs):
        producer.produce(topic, json.dumps({"k": i % keys, "text": f"q{i}"}).encode())
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush()


def submit(spec: Path, jobmanager: str) -> str:
    command = [sys.executable, "-m", "flink_agents.cli", "submit", str(spec)]
    done = subprocess.run(
        [*command, "--jobmanager", jobmanager, "--detached"],
        env=cluster_env(),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    return submitted_job(done)


def submitted_job(done: subprocess.CompletedProcess[str]) -> str:
    """The JobID that a finished ``flink-agents submit --detached`` printed."""
    output = done.stdout + done.stderr
    if done.returncode != 0:
        raise RuntimeError(f"flink-agents submit failed ({done.returncode}):\n{output}")
    for word in output.replace(".", " ").split():
        if len(word) == 32 and all(c in "0123456789abcdef" for c in word):
            return word
    raise RuntimeError(f"no JobID in the submit output:\n{output}")


def create_topics(bootstrap: str, topics: dict[str, str], parallelism: int) -> None:
    """The input topic with a partition per subtask and a one-partition output topic whose
    records the broker stamps as it appends them (the store creates its own topic)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    appended = {"message.timestamp.type": "LogAppendTime"}
    created = admin.create_topics(
        [
            NewTopic(topics["input"], num_partitions=parallelism, replication_factor=1),
            NewTopic(topics["output"], num_partitions=1, replication_factor=1, config=appended),
        ]
    )
    for future in created.values():
        future.result()


def job_spec(
    run: str,
    plan: str,
    bootstrap: str,
    topics: dict[str, str],
    parallelism: int,
    checkpoint_dir: str,
) -> dict[str, object]:
    """The one-call job: Kafka in and out, thread mode, the Kafka store, checkpoints every s."""
    kafka = {"kind": "kafka", "bootstrap_servers": bootstrap}
    return {
        "name": f"bench-cluster-{run}",
        "agent": plan,
        "source": {**kafka, "topic": topics["input"], "group_id": f"bench-{run}"},
        "key": "k",
        "sink": {**kafka, "topic": topics["output"]},
        "parallelism": parallelism,
        "execution_mode": "thread",
        "checkpointing": {"interval_ms": 1000, "dir": checkpoint_dir},
        "store": {**kafka, "topic": topics["store"]},
    }


def output_times(bootstrap: str, topic: str, expected: int, timeout: float) -> list[float]:
    """Broker timestamps (s) of the output records, once `expected` arrived or at the timeout."""
    reader = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
        }
    )
    reader.assign([TopicPartition(topic, 0, 0)])
    times: list[float] = []
    deadline = time.monotonic() + timeout
    try:
        while len(times) < expected and time.monotonic() < deadline:
            for message in reader.consume(num_messages=1000, timeout=0.5):
                if message.error() is None:
                    kind, stamp = message.timestamp()
                    if kind != TIMESTAMP_LOG_APPEND_TIME:
                        raise RuntimeError(f"{topic} is not stamped by the broker ({kind})")
                    times.append(stamp / 1000)
    finally:
        reader.close()
    return sorted(times)


def middle_window(times: list[float]) -> tuple[float, float, int]:
    """The 10th and the 90th percentile of the sorted output times (start-up and drain left
    out), and the number of outputs between them."""
    n = len(times)
    first, last = n // 10, (9 * n) // 10
    return (times[first], times[last], last - first) if n >= 2 else (0.0, 0.0, 0)


def middle_rate(times: list[float]) -> float:
    """Outputs per second over :func:`middle_window`; nan when it spans no time."""
    start, end, outputs = middle_window(times)
    return outputs / (end - start) if end > start else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=20_000)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--parallelism", type=int, default=1)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--rest", default="http://127.0.0.1:8081")
    args = parser.parse_args()

    run = uuid.uuid4().hex[:8]
    topics = {name: f"bench-cluster-{name}-{run}" for name in ("input", "output", "store")}
    create_topics(args.bootstrap, topics, args.parallelism)
    fill(args.bootstrap, topics["input"], args.inputs, args.keys)

    work = Path(tempfile.mkdtemp(prefix="bench-cluster-", dir=REPO / ".cache"))
    plan = work / "one_call.plan.json"
    plan.write_text(compile_agent(one_call(args.latency)).to_json())
    spec = job_spec(run, str(plan), args.bootstrap, topics, args.parallelism, str(work / "ckpt"))
    spec_path = work / "job.yaml"
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))

    taskmanagers = rest(args.rest, "/overview")["taskmanagers"]
    job = submit(spec_path, args.rest.removeprefix("http://"))
    try:
        times = output_times(args.bootstrap, topics["output"], args.inputs, timeout=600)
    finally:
        rest(args.rest, f"/jobs/{job}?mode=cancel", method="PATCH")
    n = len(times)
    rate = middle_rate(times)
    print(
        json.dumps(
            {
                "inputs": args.inputs,
                "keys": args.keys,
                "latency_s": args.latency,
                "parallelism": args.parallelism,
                "taskmanagers": taskmanagers,
                "outputs": n,
                "runs_per_s": round(rate, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
