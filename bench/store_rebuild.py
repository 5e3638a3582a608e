"""Store rebuild after a restore: the same post-checkpoint state, behind 10k or 1M older records.

For each size: the store creates its topic; a fast raw producer appends ``older`` records of
runs that had ended (valid action-state records of the store's format, one template with the
key swapped in); the store then writes states of ``open`` runs still in flight, takes the
recovery marker (what a checkpoint keeps), and writes ``after`` states of new runs. A fresh
store is timed restoring from that marker. The post-marker state is the same for every size,
so the restore time should not grow with the topic. No JVM; needs the broker.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from kafka import KafkaProducer

from flink_agents.durable.store import (
    ActionState,
    CallResult,
    PartitionMark,
    RecordCodec,
    RecoveryMarker,
    RunKey,
    partition_for,
)
from flink_agents.durable.store.kafka import KafkaActionStateStore
from flink_agents.durable.store.store_config import StoreConfig

PARTITIONS = 4
AGENT = "bench"
_KEY_WIDTH = 8


@dataclass(frozen=True)
class RebuildResult:
    older: int
    open_runs: int
    after: int
    write_s: float
    restore_ms: float
    loaded: int
    full_rebuild_ms: float | None


def sample(key: str) -> ActionState:
    """One finished chat action of one run, ~0.6 KB encoded."""
    run = RunKey(agent=AGENT, key=key, seq=0)
    state = ActionState(key=run.action("chat"), events=[{"type": "Reply", "text": "x" * 200}])
    state.record_call(CallResult.pending("chat-0", function="chat").succeed({"text": "y" * 200}))
    return state


def write_older_raw(bootstrap: str, topic: str, count: int) -> float:
    """Append ``count`` ended-run records with a plain producer; return seconds taken.

    Encoding one template and swapping the key in is ~50x faster than encoding every state,
    and yields the same bytes the store would write for that key.
    """
    template_key = "o" * _KEY_WIDTH
    template = sample(template_key)
    key_bytes = template.key.canonical().encode()
    value = RecordCodec().encode(key_bytes, template)
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks=1, linger_ms=50, batch_size=1 << 20,
        max_request_size=4 << 20,
    )  # fmt: skip
    placeholder = template_key.encode()
    t0 = time.perf_counter()
    for i in range(count):
        name = f"{i:0{_KEY_WIDTH}d}"
        swapped = name.encode()
        partition = partition_for(RunKey(agent=AGENT, key=name, seq=0), PARTITIONS)
        producer.send(
            topic,
            key=key_bytes.replace(placeholder, swapped),
            value=value.replace(placeholder, swapped),
            partition=partition,
        )
    producer.flush()
    producer.close()
    return time.perf_counter() - t0


def _store(bootstrap: str, topic: str) -> KafkaActionStateStore:
    return KafkaActionStateStore(
        StoreConfig(kind="kafka", bootstrap_servers=bootstrap, topic=topic, partitions=PARTITIONS)
    )


def _put(store: KafkaActionStateStore, prefix: str, count: int) -> None:
    for i in range(count):
        store.put(sample(f"{prefix}-{i}"))
    store.flush()


def measure(
    bootstrap: str, older: int, *, open_runs: int = 200, after: int = 1000, full: bool = False
) -> RebuildResult:
    topic = f"bench-rebuild-{older}-{uuid.uuid4().hex[:8]}"
    writer = _store(bootstrap, topic)  # creates the topic the store's way
    write_s = write_older_raw(bootstrap, topic, older)
    _put(writer, "open", open_runs)  # in flight at the checkpoint: never ended
    marker = writer.recovery_marker()
    _put(writer, "new", after)
    writer.close()

    reader = _store(bootstrap, topic)
    t0 = time.perf_counter()
    report = reader.restore(marker)
    restore_ms = (time.perf_counter() - t0) * 1000
    full_ms = None
    if full:  # what a store without a marker would read: everything from offset 0
        zero = {p: PartitionMark(low=0, end=0) for p in range(PARTITIONS)}
        t0 = time.perf_counter()
        reader.restore(RecoveryMarker(topic=topic, store_id="-", taken=-1, partitions=zero))
        full_ms = (time.perf_counter() - t0) * 1000
    reader.close()
    return RebuildResult(older, open_runs, after, write_s, restore_ms, report.loaded, full_ms)
