"""Micro-benchmark of KafkaActionStateStore: write throughput and rebuild time after a marker.

Not a test. Needs the broker (`scripts/kafka.sh start`). Example:

    .venv/bin/python bench/store_bench.py --bootstrap 127.0.0.1:9092 --writes 20000

For each "older" size it writes that many states of finished runs, takes a marker, writes
`--after` new states, then times (a) a restore from the marker in a fresh store and (b) for
contrast a full rebuild from offset 0 (what a marker-less store would have to do).
"""

from __future__ import annotations

import argparse
import logging
import time
import uuid

from flink_agents.durable.store import (
    ActionState,
    CallResult,
    PartitionMark,
    RecoveryMarker,
    RunKey,
)
from flink_agents.durable.store.kafka import KafkaActionStateStore
from flink_agents.durable.store.store_config import StoreConfig


def make_store(bootstrap: str, topic: str, partitions: int) -> KafkaActionStateStore:
    config = StoreConfig(
        kind="kafka", bootstrap_servers=bootstrap, topic=topic, partitions=partitions
    )
    return KafkaActionStateStore(config)


def sample(key: str) -> ActionState:
    run = RunKey(agent="bench", key=key, seq=0)
    state = ActionState(key=run.action("chat"), events=[{"type": "Reply", "text": "x" * 200}])
    state.record_call(CallResult.pending("chat-0", function="chat").succeed({"text": "y" * 200}))
    return state


def write(store: KafkaActionStateStore, prefix: str, n: int, *, end: bool) -> float:
    """Put n states (ending their runs if `end`), flush; return seconds taken."""
    t0 = time.perf_counter()
    for i in range(n):
        state = sample(f"{prefix}-{i}")
        store.put(state)
        if end:
            store.end_run(state.key.run)
    store.flush()
    return time.perf_counter() - t0


def timed_restore(store: KafkaActionStateStore, marker: RecoveryMarker) -> tuple[float, int]:
    t0 = time.perf_counter()
    store.restore(marker)
    return time.perf_counter() - t0, store.state_count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--writes", type=int, default=20_000)
    parser.add_argument("--older", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--after", type=int, default=1_000)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    run_id = uuid.uuid4().hex[:8]
    store = make_store(args.bootstrap, f"bench-writes-{run_id}", args.partitions)
    seconds = write(store, "w", args.writes, end=False)
    store.close()
    print(
        f"| put + one flush | {args.writes:,} states | {seconds:.2f} s "
        f"| {args.writes / seconds:,.0f} states/s |"
    )

    print(
        "\n| older records | new after marker | restore from marker | states "
        "| full rebuild | states |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for older in args.older:
        topic = f"bench-restore-{older}-{run_id}"
        writer = make_store(args.bootstrap, topic, args.partitions)
        write(writer, "old", older, end=True)
        marker = writer.recovery_marker()
        write(writer, "new", args.after, end=False)
        writer.close()
        reader = make_store(args.bootstrap, topic, args.partitions)
        from_marker = timed_restore(reader, marker)
        zero = {p: PartitionMark(low=0, end=0) for p in range(args.partitions)}
        full = timed_restore(
            reader, RecoveryMarker(topic=topic, store_id="-", taken=-1, partitions=zero)
        )
        reader.close()
        print(
            f"| {older:,} | {args.after:,} | {from_marker[0] * 1000:,.0f} ms | {from_marker[1]:,} "
            f"| {full[0] * 1000:,.0f} ms | {full[1]:,} |"
        )


if __name__ == "__main__":
    main()
