"""CPU of an idle agent job: a Kafka source with nothing to read, the Kafka store on.

Runs the one-call agent (thread mode, mini-cluster, checkpoints every second) on an empty topic
and samples the CPU time of every thread of the JVM (which in thread mode also hosts the Python
worker and the store's librdkafka threads) from /proc over a window: first while the topic has
never had a record, then again after a burst of inputs has been answered, to show that finished
runs leave no timers or polling behind.

    .venv/bin/python -m bench.idle_cpu --seconds 20 --burst 1000

Prints one JSON line: per phase, the share of one core for the whole JVM, for the store's
librdkafka threads, and for the JVM's busiest threads (grouped by thread name).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyflink.common import Configuration, Encoder
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import FileSink

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.cluster import JobSettings, flink_config  # noqa: E402
from bench.procs import wait_for_jvm  # noqa: E402
from bench.workloads import one_call  # noqa: E402
from flink_agents.durable.store.store_config import StoreConfig  # noqa: E402
from flink_agents.flink import AgentsExecutionEnvironment  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def thread_ticks(pid: int) -> dict[tuple[int, str], int]:
    """utime + stime of every thread of `pid`, keyed by (tid, name)."""
    ticks = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue  # the thread ended
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        ticks[(int(task.name), name)] = int(fields[11]) + int(fields[12])
    return ticks


def sample(pid: int, seconds: float) -> dict[str, object]:
    """Share of one core used by the JVM over `seconds`, and its five busiest thread names."""
    before, started = thread_ticks(pid), time.monotonic()
    time.sleep(seconds)
    after, elapsed = thread_ticks(pid), time.monotonic() - started
    by_name: collections.Counter[str] = collections.Counter()
    for thread, total in after.items():
        by_name[thread[1]] += total - before.get(thread, 0)
    core = TICKS * elapsed
    # librdkafka names its threads rdk:*; the store's Python threads have no OS name of their
    # own here, so they count under the JVM's total only.
    rdkafka = sum(t for name, t in by_name.items() if name.startswith("rdk:"))
    return {
        "jvm_core_share": round(sum(by_name.values()) / core, 3),
        "librdkafka_core_share": round(rdkafka / core, 3),
        "busiest_threads": {name: round(t / core, 3) for name, t in by_name.most_common(5)},
    }


def answered(out: Path) -> int:
    return sum(len(part.read_text().splitlines()) for part in out.rglob("*") if part.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=15.0)
    parser.add_argument("--burst", type=int, default=1000)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-idle-", dir=REPO / ".cache"))
    topic = f"bench-idle-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result()

    config = Configuration()
    for name, value in flink_config(JobSettings())(work).items():
        config.set_string(name, value)
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(1)
    store = StoreConfig(kind="kafka", bootstrap_servers=args.bootstrap, topic=f"{topic}-store")
    agents = AgentsExecutionEnvironment(env, store=store)
    outputs = agents.from_kafka(topic, bootstrap_servers=args.bootstrap, key="k").apply(
        one_call(0.0)
    )
    out = work / "out"
    sink = FileSink.for_row_format(str(out), Encoder.simple_string_encoder()).build()
    outputs.to_datastream().sink_to(sink)
    job = env.execute_async("bench-idle")
    pid = wait_for_jvm(os.getpid())
    try:
        time.sleep(args.warmup)  # job start, first checkpoints
        never_fed = sample(pid, args.seconds)

        producer = Producer({"bootstrap.servers": args.bootstrap})
        for i in range(args.burst):
            producer.produce(topic, json.dumps({"k": i % 100, "text": f"q{i}"}).encode())
        producer.flush()
        deadline = time.monotonic() + 120
        # Outputs become visible when the file sink commits (at checkpoints).
        while answered(out) < args.burst and time.monotonic() < deadline:
            time.sleep(1)
        done = answered(out)
        time.sleep(2)
        after_burst = sample(pid, args.seconds)
    finally:
        job.cancel().result()
    print(
        json.dumps(
            {
                "seconds": args.seconds,
                "never_fed": never_fed,
                "burst": args.burst,
                "burst_answered": done,
                "after_burst": after_burst,
            }
        )
    )


if __name__ == "__main__":
    main()
