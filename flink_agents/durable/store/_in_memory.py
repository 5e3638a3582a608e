"""In-memory action-state store: same semantics as the Kafka store, for tests and local runs
(the same record limit too: `max_record_bytes`, enforced by `LogStore.put`).

Records go through the same codec into an `InMemoryLog`. Writes reach the log only on `flush`,
so a test can simulate a crash by dropping a store and restoring a new one over the same log.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from flink_agents.durable.store._codec import RecordCodec
from flink_agents.durable.store._limits import DEFAULT_MAX_RECORD_BYTES
from flink_agents.durable.store._log_store import LogRecord, LogStore
from flink_agents.durable.store._placement import CRC32_PLACEMENT, Placement


class InMemoryLog:
    """A partitioned append-only log of `(key, value)` records; value None is a tombstone."""

    def __init__(self, partitions: int = 1) -> None:
        self.partitions: list[list[tuple[bytes, bytes | None]]] = [[] for _ in range(partitions)]

    def append(self, partition: int, key: bytes, value: bytes | None) -> int:
        """Append a record; return its offset."""
        records = self.partitions[partition]
        records.append((key, value))
        return len(records) - 1


class InMemoryActionStateStore(LogStore):
    """`ActionStateStore` over an `InMemoryLog` (a fresh one unless given)."""

    def __init__(
        self,
        log: InMemoryLog | None = None,
        *,
        secret: bytes | None = None,
        max_pending: int = 10_000,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        placement: Placement = CRC32_PLACEMENT,
    ) -> None:
        self.log = log or InMemoryLog()
        super().__init__(
            topic="memory",
            partitions=len(self.log.partitions),
            codec=RecordCodec(secret, scope="memory"),
            max_pending=max_pending,
            max_record_bytes=max_record_bytes,
            placement=placement,
        )

    def _send(self, records: list[tuple[int, bytes, bytes | None]]) -> list[Any]:
        return list(records)

    def _await(self, handles: list[Any], timeout: float | None) -> list[int]:
        return [self.log.append(*handle) for handle in handles]

    def _end_offsets(self, partitions: list[int] | None = None) -> dict[int, int]:
        wanted = range(self.partitions) if partitions is None else partitions
        return {p: len(self.log.partitions[p]) for p in wanted}

    def _read(self, starts: dict[int, int]) -> Iterator[LogRecord]:
        ends = self._end_offsets(list(starts))
        for p, start in sorted(starts.items()):
            for offset in range(start, ends[p]):
                key, value = self.log.partitions[p][offset]
                yield p, offset, key, value

    def close(self) -> None:
        """Flush buffered writes into the log."""
        self.flush()
