"""Restore work per subtask: the same store topic restored at parallelism 1, 2 and 4, with records
placed by crc32 (every subtask reads every partition: the store before key-group placement) and
by key group (a subtask reads the partitions of its key groups).

For each placement: the store creates a topic of ``PARTITIONS`` partitions; a raw producer
appends ``records`` states of ended runs, each in the partition its placement names (valid
records of the store's format: one encoded template with the key swapped in). Then, for each
parallelism, each subtask in turn builds a fresh store and restores it from the start of its
partitions -- what a subtask does after a rescale that merges subtasks, or without any marker
(with a marker it reads from the marker's offsets on, in the same partitions). The crc32 rows
restore as the store did before placements (no key groups given: every key loaded); the
key-group rows as the Flink operator does now (``restore(marker, key_groups)``). Subtasks run
one after another, so each time is one subtask's alone on this machine. No JVM; needs the broker.

    .venv/bin/python -m bench.store_partitions [--records 100000] [--out FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
import uuid
from pathlib import Path

from kafka import KafkaProducer

from bench.store_rebuild import AGENT, sample
from flink_agents.durable.store import (
    CRC32_PLACEMENT,
    KeyGroupRange,
    PartitionMark,
    Placement,
    RecordCodec,
    RecoveryMarker,
    canonical_json,
)
from flink_agents.durable.store.kafka import KafkaActionStateStore
from flink_agents.durable.store.store_config import StoreConfig

PARTITIONS = 4
KEY_GROUPS = 128
PARALLELISMS = (1, 2, 4)


@dataclasses.dataclass(frozen=True)
class SubtaskRestore:
    placement: str
    parallelism: int
    subtask: int
    partitions_read: int
    records_read: int
    loaded: int
    restore_ms: float


def write_raw(bootstrap: str, topic: str, count: int, placement: Placement) -> float:
    """Append ``count`` ended-run records placed by ``placement``; return seconds taken."""
    width = 8
    template_key = canonical_json("o" * width)
    template = sample(template_key)
    key_bytes = template.key.canonical().encode()
    value = RecordCodec().encode(key_bytes, template)
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks=1, linger_ms=50, batch_size=1 << 20,
        max_request_size=4 << 20,
    )  # fmt: skip
    placeholder = ("o" * width).encode()
    t0 = time.perf_counter()
    for i in range(count):
        name = f"{i:0{width}d}"
        producer.send(
            topic,
            key=key_bytes.replace(placeholder, name.encode()),
            value=value.replace(placeholder, name.encode()),
            partition=placement.partition(AGENT, canonical_json(name), PARTITIONS),
        )
    producer.flush()
    producer.close()
    return time.perf_counter() - t0


def _store(bootstrap: str, topic: str, placement: Placement) -> KafkaActionStateStore:
    config = StoreConfig(
        kind="kafka", bootstrap_servers=bootstrap, topic=topic, partitions=4, signing="off"
    )
    return KafkaActionStateStore(config, placement=placement)


def measure(bootstrap: str, records: int, placement: Placement) -> list[SubtaskRestore]:
    """Every subtask's restore at each of ``PARALLELISMS``, over one topic of ``records``."""
    topic = f"bench-partitions-{uuid.uuid4().hex[:8]}"
    _store(bootstrap, topic, placement).close()  # creates the topic the store's way
    write_raw(bootstrap, topic, records, placement)
    from_start = RecoveryMarker(
        topic=topic,
        store_id="bench",
        taken=-1,
        partitions={p: PartitionMark(low=0, end=0) for p in range(PARTITIONS)},
        placement=placement.name,
    )
    rows: list[SubtaskRestore] = []
    for parallelism in PARALLELISMS:
        for subtask in range(parallelism):
            groups = KeyGroupRange.of_subtask(subtask, parallelism, KEY_GROUPS)
            store = _store(bootstrap, topic, placement)
            reading = placement.partitions_of(groups, PARTITIONS)
            # crc32: as before placements, every key loaded (no key groups given).
            scope = groups if placement.max_parallelism is not None else None
            t0 = time.perf_counter()
            report = store.restore(from_start, scope)
            restore_ms = (time.perf_counter() - t0) * 1000
            store.close()
            read = report.loaded + report.skipped + report.tombstones + report.elsewhere
            rows.append(
                SubtaskRestore(
                    placement.name,
                    parallelism,
                    subtask,
                    len(reading),
                    read + report.fenced + len(report.corrupt),
                    report.loaded,
                    round(restore_ms, 1),
                )
            )
    return rows


def table(rows: list[SubtaskRestore]) -> str:
    """Markdown: per placement and parallelism, the busiest subtask and the sum over all."""
    lines = [
        "| placement | parallelism | partitions read per subtask | records read per subtask "
        "(max) | records read, all subtasks | restore ms per subtask (max) | keys loaded "
        "per subtask (max) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for placement in dict.fromkeys(row.placement for row in rows):
        for parallelism in PARALLELISMS:
            group = [r for r in rows if r.placement == placement and r.parallelism == parallelism]
            lines.append(
                f"| {placement} | {parallelism} | {max(r.partitions_read for r in group)} | "
                f"{max(r.records_read for r in group):,} | "
                f"{sum(r.records_read for r in group):,} | "
                f"{max(r.restore_ms for r in group):,.0f} | {max(r.loaded for r in group):,} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--out", type=Path, help="write one JSON line per subtask restore")
    args = parser.parse_args()
    rows: list[SubtaskRestore] = []
    for placement in (CRC32_PLACEMENT, Placement(KEY_GROUPS)):
        rows += measure(args.bootstrap, args.records, placement)
    if args.out is not None:
        with args.out.open("w") as out:
            for row in rows:
                out.write(json.dumps(dataclasses.asdict(row) | {"records": args.records}) + "\n")
    print(table(rows))


if __name__ == "__main__":
    main()
