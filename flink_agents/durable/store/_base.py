"""The action-state store contract, recovery markers and the partitioning rule."""

from __future__ import annotations

import dataclasses
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, Field

from flink_agents.durable.store._action_state import ActionState, ActionStateKey, RunKey
from flink_agents.durable.store._placement import CRC32, CRC32_PLACEMENT, KeyGroupRange, Placement
from flink_agents.durable.store._store_errors import CorruptRecordError, StoreError


def partition_for(run: RunKey, partitions: int, placement: Placement = CRC32_PLACEMENT) -> int:
    """Partition of every state of `run`'s Flink key under ``placement`` (crc32 of canonical JSON
    `[agent, key]` by default; see `Placement`).

    Both placements are stable across processes, platforms and Python versions (unlike `hash()`),
    so all states of one `(agent, key)` land in one partition for the lifetime of the topic.
    """
    return placement.partition(run.agent, run.key, partitions)


class PartitionMark(BaseModel):
    """Per-partition positions in a recovery marker.

    `low`: offset a restore reads from -- the earliest offset of any state of a run still open
    when the marker was taken, or `end` if none was. `end`: the partition's end offset then.
    """

    low: int = Field(ge=0)
    end: int = Field(ge=0)


class RecoveryMarker(BaseModel):
    """Where a restore starts; taken at checkpoint and stored with it (JSON-serializable).

    A restore reads each partition from `low`; of the records before `end` it keeps only those
    of `open_runs` (the runs in flight when the marker was taken), so it sees exactly the states
    written after the marker plus those of in-flight runs.
    """

    topic: str
    store_id: str
    taken: int
    partitions: dict[int, PartitionMark]
    open_runs: list[RunKey] = Field(default_factory=list)
    placement: str = Field(
        default=CRC32,
        description="How the store that took it placed records (`Placement.name`): a store "
        "restores only a marker of its own placement. Markers taken before placements were "
        "recorded were all taken under crc32.",
    )

    def to_json(self) -> str:
        """Serialize for Flink operator state."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> RecoveryMarker:
        """Parse a marker produced by `to_json`."""
        return cls.model_validate_json(text)

    @classmethod
    def merge(cls, markers: list[RecoveryMarker]) -> RecoveryMarker:
        """One marker covering all `markers` (for rescaling: union operator state).

        Takes the lowest `low` and highest `end` per partition and the union of open runs. A
        merged marker can be restored but not used to prune.
        """
        if not markers or len({(m.topic, m.placement) for m in markers}) != 1:
            raise StoreError(
                "merge needs at least one marker, all for the same topic and placement"
            )
        parts: dict[int, PartitionMark] = {}
        for marker in markers:
            for p, mark in marker.partitions.items():
                seen = parts.get(p)
                parts[p] = (
                    mark
                    if seen is None
                    else PartitionMark(low=min(seen.low, mark.low), end=max(seen.end, mark.end))
                )
        runs = sorted({r for m in markers for r in m.open_runs}, key=RunKey.canonical)
        return cls(
            topic=markers[0].topic,
            store_id="merged",
            taken=-1,
            partitions=parts,
            open_runs=runs,
            placement=markers[0].placement,
        )


@dataclasses.dataclass
class RestoreReport:
    """What a restore read: applied records, tombstones, records of runs that had ended
    before the marker (skipped), records written late by a replaced writer (fenced: their
    key has a record of a newer writer before them), records of keys other subtasks own
    (elsewhere), and corrupt records (skipped and
    reported)."""

    loaded: int = 0
    tombstones: int = 0
    skipped: int = 0
    fenced: int = 0
    elsewhere: int = 0
    """Records of keys another subtask owns (in a partition shared with it), not loaded."""
    corrupt: list[CorruptRecordError] = dataclasses.field(default_factory=list)


@runtime_checkable
class ActionStateStore(Protocol):
    """Durable per-action state, keyed by `ActionStateKey`.

    Lifecycle contract with the engine:
    - `begin_run(run)` when a run is admitted (including runs restored in flight), `put(state)`
      as actions progress, `end_run(run)` once the run's outputs are emitted.
    - `put` buffers; `flush()` returns once every buffered write is acknowledged (raises
      `StoreWriteError` otherwise). Call it before emitting a run's outputs.
    - at checkpoint: `recovery_marker()` (flushes first) and store the marker with the
      checkpoint; on restore: `restore(marker)`; when the checkpoint completes: `prune(marker)`.
    """

    #: The largest record (key and value, in bytes) `put` accepts (docs/state-store.md).
    max_record_bytes: int

    def put(self, state: ActionState) -> None:
        """Record `state` (replacing any previous state for its key); buffered until flush.
        Raises `RecordTooLargeError` if its record exceeds `max_record_bytes`."""

    def record_size(self, state: ActionState) -> int:
        """How many bytes the record of `state` (key and value) takes, without writing it."""

    def get(self, key: ActionStateKey) -> ActionState | None:
        """The latest state for `key` (including unflushed puts), or None."""

    def get_run(self, run: RunKey) -> list[ActionState]:
        """All states of `run`, in the order their actions were first put."""

    def begin_run(self, run: RunKey) -> None:
        """Mark `run` in flight: its states must survive a restore of the next marker."""

    def end_run(self, run: RunKey) -> None:
        """Mark `run` finished: its states are pruned once a later marker's checkpoint completes."""

    def flush(self, timeout: float | None = None) -> None:
        """Block until all buffered writes are acknowledged."""

    async def aflush(self, timeout: float | None = None) -> None:
        """`flush` without blocking the event loop."""

    def recovery_marker(self) -> RecoveryMarker:
        """Flush, then return the marker to store with the current checkpoint."""

    def restore(
        self, marker: RecoveryMarker, key_groups: KeyGroupRange | None = None
    ) -> RestoreReport:
        """Discard the in-memory view and rebuild it from the marker (see `RecoveryMarker`);
        the marker's open runs are open again afterwards. ``key_groups``: the Flink key groups
        of the restoring subtask; only their records are loaded, and under a key-group
        placement only the partitions that can hold them are read (None: every key)."""

    def prune(self, marker: RecoveryMarker) -> int:
        """Tombstone states of runs ended before `marker` was taken; returns how many."""

    def close(self) -> None:
        """Flush and release resources."""
