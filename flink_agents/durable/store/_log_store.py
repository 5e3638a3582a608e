"""Store logic shared by every log-backed store: the in-memory view and run bookkeeping.

A subclass supplies only the transport (send, await acknowledgements, end offsets, read a range).
The view maps each `ActionStateKey` to the envelope of its latest state: the bytes encoded once
for the write are the snapshot (a caller may go on mutating its state object), and `get` parses
a fresh copy. `put` only buffers: the transport sees a write when a flush takes the buffer, and
of several puts of one key between two flushes only the last (each state holds everything the
earlier ones did: a call's outcome, then the completed action): one record instead of two for
a typical action. For the recovery marker it tracks the runs that are open (begun or put, not
yet ended) and the earliest acknowledged offset of each run's states; for pruning, the marker
number at which each run ended.

The view is keyed by plain values: a state by its record key (bytes), a run by ``(agent, key,
seq)``, not by the `ActionStateKey` and `RunKey` models. It holds every run of the prune window
(a minute by default: tens of thousands of runs). Bytes, strings and tuples of them are not
tracked by Python's garbage collector; model instances are, with their ``__dict__`` and field
set: 11 tracked objects per run of three states, against none now, which every full collection
scanned while holding the interpreter lock (bench/results/analysis.md, "The store's cost inside
the operator at 0 ms").

Every record carries its writer's epoch (`LogStore.epoch`, the wall clock in ns when the store
was made, in the record's envelope: `RecordCodec.envelope`). A restore skips a record whose epoch
is below that of an earlier record of the same key: the late write of a store that was replaced
-- a TaskManager stopped past the heartbeat timeout and resumed after its task had been
restarted elsewhere (a zombie) -- never goes back on what the newer writer recorded. Records
without an epoch (tombstones, records of earlier versions or written by hand) read as epoch 0
and are never fenced.
"""

from __future__ import annotations

import abc
import asyncio
import json
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

from flink_agents.durable.store._action_state import ActionState, ActionStateKey, RunKey
from flink_agents.durable.store._base import (
    PartitionMark,
    RecoveryMarker,
    RestoreReport,
)
from flink_agents.durable.store._codec import RecordCodec, record_epoch
from flink_agents.durable.store._limits import DEFAULT_MAX_RECORD_BYTES
from flink_agents.durable.store._placement import ANY, CRC32_PLACEMENT, KeyGroupRange, Placement
from flink_agents.durable.store._store_errors import (
    CorruptRecordError,
    RecordTooLargeError,
    StoreError,
    StoreWriteError,
)

logger = logging.getLogger(__name__)

#: A record read back from the log: partition, offset, key, value (None for a tombstone).
LogRecord = tuple[int, int, bytes | None, bytes | None]

#: A run as the view keys it: ``(agent, key, seq)`` of its `RunKey` (see the module docstring).
_Run = tuple[str, str, int]


def _run_of(key: RunKey | ActionStateKey) -> _Run:
    """The view's form of a run, from its key or the key of one of its states."""
    return (key.agent, key.key, key.seq)


def _parse_key(key: bytes) -> ActionStateKey:
    """A record key's `ActionStateKey`, parsed by `json` (a `ValueError` if it is none):
    pydantic's parser refuses the escape of a lone surrogate, which `canonical_json` writes."""
    return ActionStateKey.model_validate(json.loads(key))


def _run_key(run: _Run) -> RunKey:
    agent, key, seq = run
    return RunKey(agent=agent, key=key, seq=seq)


class LogStore(abc.ABC):
    """An `ActionStateStore` over a partitioned append-only log.

    Used from one thread (the engine's loop), except for flushes, which may run in worker
    threads (`aflush`) at any time: they are serialized with each other and with
    `recovery_marker`, `prune` and `restore`, so a marker never misses the offset of a write
    that another thread's flush is still waiting for.
    """

    def __init__(
        self,
        *,
        topic: str,
        partitions: int,
        codec: RecordCodec,
        max_pending: int,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        placement: Placement = CRC32_PLACEMENT,
    ):
        if partitions < 1 or max_pending < 1 or max_record_bytes < 1:
            raise ValueError("partitions, max_pending and max_record_bytes must be positive")
        self.topic = topic
        #: The largest record `put` accepts: key and value (signed, if it is), in bytes.
        self.max_record_bytes = max_record_bytes
        self.partitions = partitions
        #: Where runs' records go (docs/state-store.md, "Partitioning"); fixed for the topic.
        self.placement = placement
        self._codec = codec
        self._max_pending = max_pending
        self._store_id = uuid.uuid4().hex
        #: Stamped on every record written; newer stores have higher epochs (see the module).
        self.epoch = time.time_ns()
        self._states: dict[bytes, bytes] = {}  # record key -> envelope
        # The record keys of each run's states; a tuple, which the collector stops tracking.
        self._runs: dict[_Run, tuple[bytes, ...]] = {}
        # Per run not yet pruned: the partition and offset of its first acknowledged state.
        self._first_offset: dict[_Run, tuple[int, int]] = {}
        self._open: set[_Run] = set()
        self._ended: dict[_Run, int] = {}
        # Runs a restore found that have not begun here since, and the marker count then.
        self._restored_idle: set[_Run] = set()
        self._restored_at = 0
        # Whether the last restore read only this subtask's keys (see `_let_go_of_restored_idle`).
        self._restored_own_keys = False
        self._markers_taken = 0
        # Writes not sent yet, latest per record key: (run, envelope or None for a tombstone).
        self._unsent: dict[bytes, tuple[_Run, bytes | None]] = {}
        # An `aflush` thread takes the buffer while the loop thread adds to it.
        self._pending_lock = threading.Lock()
        # Held by a flush from taking its batch until its offsets are recorded, and by the
        # operations that read or reset those offsets.
        self._flush_lock = threading.RLock()
        # The first batch lost since the last restore (see `flush`).
        self._lost: BaseException | None = None
        # During a restore from a marker of unknown placement: records placed by crc32 found.
        self._placement_unknown = False
        self._legacy_found = False
        # During a restore: the record keys whose state holds an open wait (a paused run).
        self._paused_keys: set[bytes] = set()

    # -- transport ---------------------------------------------------------------------------

    @abc.abstractmethod
    def _send(self, records: list[tuple[int, bytes, bytes | None]]) -> list[Any]:
        """Start writing `(partition, key, value)` records, in order; return a handle per
        record for `_await`."""

    @abc.abstractmethod
    def _await(self, handles: list[Any], timeout: float | None) -> list[int]:
        """Wait for `handles`; return their offsets or raise `StoreWriteError`."""

    @abc.abstractmethod
    def _end_offsets(self, partitions: list[int] | None = None) -> dict[int, int]:
        """Current end offset of ``partitions`` (None: every partition)."""

    @abc.abstractmethod
    def _read(self, starts: dict[int, int]) -> Iterator[LogRecord]:
        """Records of the partitions in `starts`, from their start offsets up to their end
        offsets at call time."""

    # -- ActionStateStore ---------------------------------------------------------------------

    def put(self, state: ActionState) -> None:
        """Buffer `state`; raises `PickleNotAllowedError` or `RecordTooLargeError` at once if
        it cannot be written (nothing is buffered then)."""
        key = state.key
        key_bytes = key.canonical().encode("utf-8")
        envelope = self._codec.envelope(state, epoch=self.epoch)
        size = self._size(key_bytes, envelope)
        if size > self.max_record_bytes:
            raise RecordTooLargeError(key.canonical(), size, self.max_record_bytes)
        if len(self._unsent) >= self._max_pending:
            self.flush()  # back-pressure: bounded number of unacknowledged writes
        run = _run_of(key)
        self._enqueue(run, key_bytes, envelope)
        self._remember(key_bytes, run, envelope)
        self._begin(run)

    def record_size(self, state: ActionState) -> int:
        """How many bytes `put` would write for `state` (key and value), checked against
        `max_record_bytes`."""
        key_bytes = state.key.canonical().encode("utf-8")
        return self._size(key_bytes, self._codec.envelope(state, epoch=self.epoch))

    def _size(self, key: bytes, envelope: bytes) -> int:
        return len(key) + len(envelope) + self._codec.seal_bytes

    def get(self, key: ActionStateKey) -> ActionState | None:
        """The latest state for `key` (a fresh copy), or None."""
        envelope = self._states.get(key.canonical().encode("utf-8"))
        return None if envelope is None else self._load(envelope)

    def get_run(self, run: RunKey) -> list[ActionState]:
        """All states of `run` (fresh copies), in first-put order."""
        return [self._load(self._states[k]) for k in self._runs.get(_run_of(run), ())]

    def begin_run(self, run: RunKey) -> None:
        """Mark `run` open."""
        self._begin(_run_of(run))

    def end_run(self, run: RunKey) -> None:
        """Mark `run` ended as of the next marker."""
        ended = _run_of(run)
        self._open.discard(ended)
        self._restored_idle.discard(ended)  # pruned as it ended here, not let go
        self._ended[ended] = self._markers_taken

    def flush(self, timeout: float | None = None) -> None:
        """Send every buffered write and wait until each is acknowledged; raise
        `StoreWriteError` if not.

        Also waits for a flush running in another thread, whose batch may hold earlier writes,
        and raises if any batch was lost since the last restore: a synchronous settle would
        otherwise send a run's next call although the run's earlier write, taken by an `aflush`
        that failed in its worker thread, never reached the log.
        """
        with self._flush_lock:
            if self._lost is not None:
                raise StoreWriteError(
                    f"an earlier write to {self.topic!r} was lost: {self._lost}"
                ) from self._lost
            with self._pending_lock:
                unsent, self._unsent = self._unsent, {}
            if not unsent:
                return
            records = [
                (self._partition(run), key, self._seal(key, envelope))
                for key, (run, envelope) in unsent.items()
            ]
            try:
                offsets = self._await(self._send(records), timeout)
            except Exception as exc:
                self._lost = exc
                raise
            for (run, envelope), (partition, _, _), offset in zip(
                unsent.values(), records, offsets, strict=True
            ):
                if envelope is not None:  # a tombstone does not count towards the first offset
                    self._note_offset(run, partition, offset)

    async def aflush(self, timeout: float | None = None) -> None:
        """`flush` in a worker thread."""
        await asyncio.to_thread(self.flush, timeout)

    def recovery_marker(self) -> RecoveryMarker:
        """Flush, then mark per partition the low-water offset of the runs not yet pruned (open
        or ended) and the end.

        Ended runs count until `prune` tombstones them: a failure before that prune would
        otherwise leave their records below every later marker, read by no restore and so
        tombstoned by no one. Covered, a restore finds them, and its owner tombstones them a
        prune delay later (`_let_go_of_restored_idle`)."""
        with self._flush_lock:
            self.flush()
            ends = self._end_offsets()
            lows = dict(ends)
            for partition, offset in self._first_offset.values():
                lows[partition] = min(lows[partition], offset)
        marker = RecoveryMarker(
            topic=self.topic,
            store_id=self._store_id,
            taken=self._markers_taken,
            partitions={p: PartitionMark(low=lows[p], end=ends[p]) for p in ends},
            open_runs=sorted(map(_run_key, self._open), key=RunKey.canonical),
            placement=self.placement.name,
        )
        self._markers_taken += 1
        return marker

    def restore(
        self, marker: RecoveryMarker, key_groups: KeyGroupRange | None = None
    ) -> RestoreReport:
        """Rebuild the view from `marker`'s low offsets; skip (and report) corrupt records.

        ``key_groups``: the restoring subtask's Flink key groups. Only their keys' records are
        loaded, and under a key-group placement only the partitions that can hold them are read
        (`Placement.partitions_of`). None: every key, every partition.
        """
        with self._flush_lock:
            report = self._restore(marker, key_groups)
            self._lost = None  # the view was rebuilt from what the log holds
            return report

    def _restore(self, marker: RecoveryMarker, key_groups: KeyGroupRange | None) -> RestoreReport:
        if marker.topic != self.topic:
            raise StoreError(f"marker is for topic {marker.topic!r}, store uses {self.topic!r}")
        self._adopt_placement(marker, key_groups)
        if set(marker.partitions) != set(range(self.partitions)):
            raise StoreError(
                f"marker covers partitions {sorted(marker.partitions)}, topic {self.topic!r} "
                f"has {self.partitions}; the partition count of a store topic must not change"
            )
        if self._unsent:
            raise StoreError("restore with unflushed writes")
        # A marker of unknown placement (`ANY`): every partition, records of either placement.
        self._placement_unknown = marker.placement == ANY and self.placement.checked
        self._legacy_found = False
        if self._placement_unknown:
            reading = list(range(self.partitions))
        else:
            reading = self.placement.partitions_of(key_groups, self.partitions)
        self._check_not_shorter(marker, reading)
        tables = (self._states, self._runs, self._first_offset, self._open, self._ended)
        for table in (*tables, self._restored_idle):
            table.clear()
        self._restored_own_keys = key_groups is not None
        open_runs = {_run_of(run) for run in marker.open_runs}
        report = RestoreReport()
        starts = {p: marker.partitions[p].low for p in reading}
        epochs: dict[bytes, int] = {}  # per record key, the highest writer epoch read
        for partition, offset, key, value in self._read(starts):
            epoch = 0 if value is None else record_epoch(value)
            if epoch:  # 0: written without an epoch (an earlier version, a tool): never fenced
                if epoch < epochs.get(key or b"", 0):
                    report.fenced += 1  # a replaced writer's late record
                    continue
                epochs[key or b""] = epoch
            try:
                self._apply(marker, open_runs, key_groups, partition, offset, key, value, report)
            except CorruptRecordError as exc:
                logger.error("skipping %s", exc)
                report.corrupt.append(exc)
        if self._legacy_found:
            logger.warning(
                "store topic %r holds records placed by crc32 (written before key-group "
                "placement): this store goes on placing records so",
                self.topic,
            )
            self.placement = CRC32_PLACEMENT
        # Every run found may be replayed (its input comes again): it stays open, holding the
        # low-water mark, until it ends here or `prune` lets it go (see there). A paused run
        # is never let go: its key is not visited until its decision or deadline comes, which
        # may be long after the restore, and its resumed run replays these records.
        self._open.update(open_runs, self._runs)
        paused = {run for run, keys in self._runs.items() if not self._paused_keys.isdisjoint(keys)}
        self._paused_keys.clear()
        self._restored_idle.update(run for run in self._runs if run not in paused)
        self._restored_at = self._markers_taken
        logger.info(
            "restored %d states (%d paused runs) from %r, %d of %d partitions (%d records, "
            "%d tombstones, %d skipped, %d fenced, %d of other subtasks, %d corrupt)",
            len(self._states),
            len(paused),
            self.topic,
            len(reading),
            self.partitions,
            report.loaded,
            report.tombstones,
            report.skipped,
            report.fenced,
            report.elsewhere,
            len(report.corrupt),
        )
        return report

    def _adopt_placement(self, marker: RecoveryMarker, key_groups: KeyGroupRange | None) -> None:
        """Place records as the topic was written, which the marker names: a topic written
        before key-group placement (crc32, or a marker without a placement) keeps crc32 and
        every subtask reads every partition. A marker of the tools' placement (`ANY`: taken
        without knowing it) changes nothing here (see `_restore`)."""
        if marker.placement in (self.placement.name, ANY) or not self.placement.checked:
            return
        named = Placement.named(marker.placement)
        if named.max_parallelism is not None and (
            key_groups is None or key_groups.max_parallelism != named.max_parallelism
        ):
            raise StoreError(
                f"the recovery marker says the records of topic {self.topic!r} were placed by "
                f"{marker.placement}, and this subtask's key groups are "
                f"{'unknown' if key_groups is None else key_groups.max_parallelism}: a job's "
                "max parallelism is fixed for the life of its store topic"
            )
        logger.warning(
            "store topic %r: its records were placed by %s (the recovery marker says so), "
            "this store was to place them by %s; it goes on as the topic was written "
            "(docs/state-store.md, 'Partitioning')",
            self.topic,
            marker.placement,
            self.placement.name,
        )
        self.placement = named

    def _check_not_shorter(self, marker: RecoveryMarker, reading: list[int]) -> None:
        """A log's end offsets never go back (compaction keeps offsets): a partition ending
        before the marker's end means the topic was deleted (and created again) since the marker
        was taken. Restoring would find none of the records the marker covers and hand the
        replay nothing back: every recorded call would silently run again. Checked for the
        partitions a restore reads (`reading`)."""
        ends = self._end_offsets(reading)
        shorter = {
            p: (marker.partitions[p].end, ends[p])
            for p in reading
            if ends[p] < marker.partitions[p].end
        }
        if shorter:
            found = ", ".join(
                f"partition {p} ends at {end}, the marker at {marked}"
                for p, (marked, end) in sorted(shorter.items())
            )
            raise StoreError(
                f"store topic {self.topic!r} is shorter than the recovery marker ({found}): it "
                "was deleted or recreated since the checkpoint, and its records are gone; "
                "restore the topic or start the job afresh (without the checkpoint)"
            )

    def prune(self, marker: RecoveryMarker) -> int:
        """Tombstone all states of runs ended before `marker` was taken (and the restored runs
        let go, see `_let_go_of_restored_idle`); flush; return the tombstones written."""
        if marker.store_id != self._store_id:
            raise StoreError("prune needs a marker taken by this store instance")
        done = [run for run, taken in self._ended.items() if taken <= marker.taken]
        with self._flush_lock:
            count = self._let_go_of_restored_idle() if marker.taken >= self._restored_at else 0
            for run in done:
                del self._ended[run]
                count += self._tombstone(run, self._drop_run(run))
            self.flush()
        return count

    def _let_go_of_restored_idle(self) -> int:
        """Drop the restored runs that never began here; return the tombstones written.

        Most ended before the restored checkpoint, inside the prune delay, so the failed attempt
        never pruned them; the others' input did not come again within the delay. A restore for
        this subtask's key groups read only keys it owns: their runs are tombstoned, else each
        failover would leave a prune delay's worth of records in the topic for good. A restore
        without key groups read every key, other subtasks' too: only their owner may tombstone
        them, so they are just dropped. Paused runs are not among them (see `_restore`). Called
        by `prune` with a marker taken after the restore, that is, at least the delay later.
        """
        count = 0
        for run in self._restored_idle:
            self._open.discard(run)
            keys = self._drop_run(run)
            if self._restored_own_keys:
                count += self._tombstone(run, keys)
        self._restored_idle.clear()
        return count

    def _tombstone(self, run: _Run, keys: tuple[bytes, ...]) -> int:
        for key in keys:
            self._enqueue(run, key, None)
        return len(keys)

    def _drop_run(self, run: _Run) -> tuple[bytes, ...]:
        """Remove `run` from the in-memory view; return the record keys of the states it had."""
        self._first_offset.pop(run, None)
        keys = self._runs.pop(run, ())
        for key in keys:
            del self._states[key]
        return keys

    def history(self) -> Iterator[ActionState]:
        """Every action state still in the topic, in log order per partition, states of pruned
        runs included (a tombstone hides a record from restores, but the record stays readable
        until compaction removes it). For tools (`flink-agents store export`); corrupt records
        are logged and skipped. Reads without touching the view."""
        for partition, offset, key, value in self._read(dict.fromkeys(range(self.partitions), 0)):
            if value is None:
                continue
            try:
                record = self._codec.decode(
                    key or b"", value, topic=self.topic, partition=partition, offset=offset
                )
            except CorruptRecordError as exc:
                logger.error("skipping %s", exc)
                continue
            if isinstance(record, ActionState):
                yield record

    def state_keys(self) -> list[ActionStateKey]:
        """Keys of all states in the in-memory view (for inspection)."""
        return [_parse_key(key) for key in self._states]

    @property
    def state_count(self) -> int:
        """Number of states in the in-memory view."""
        return len(self._states)

    # -- helpers ------------------------------------------------------------------------------

    def _begin(self, run: _Run) -> None:
        self._open.add(run)
        self._ended.pop(run, None)
        self._restored_idle.discard(run)

    def _partition(self, run: _Run) -> int:
        return self.placement.partition(run[0], run[1], self.partitions)

    def _note_offset(self, run: _Run, partition: int, offset: int) -> None:
        first = self._first_offset.get(run)
        if first is None or offset < first[1]:
            self._first_offset[run] = (partition, offset)

    def _enqueue(self, run: _Run, key: bytes, envelope: bytes | None) -> None:
        with self._pending_lock:  # replaces an unsent earlier write of the same key
            self._unsent[key] = (run, envelope)

    def _seal(self, key: bytes, envelope: bytes | None) -> bytes | None:
        return None if envelope is None else self._codec.seal(key, envelope)

    def _remember(self, key: bytes, run: _Run, envelope: bytes) -> None:
        if key not in self._states:
            self._runs[run] = (*self._runs.get(run, ()), key)
        self._states[key] = envelope

    def _load(self, envelope: bytes) -> ActionState:
        state = self._codec.load(envelope)
        assert isinstance(state, ActionState)  # only action states are put or restored
        return state

    def _forget(self, key: bytes, run: _Run) -> None:
        if self._states.pop(key, None) is None:
            return
        keys = tuple(k for k in self._runs[run] if k != key)
        if keys:
            self._runs[run] = keys
        else:
            del self._runs[run]
            self._first_offset.pop(run, None)

    def _apply(
        self,
        marker: RecoveryMarker,
        open_runs: set[_Run],
        key_groups: KeyGroupRange | None,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        report: RestoreReport,
    ) -> None:
        def corrupt(reason: str) -> CorruptRecordError:
            return CorruptRecordError(self.topic, partition, offset, reason)

        size = len(key or b"") + len(value or b"")
        if size > self.max_record_bytes:  # no store writes one: forged, or another job's
            raise corrupt(
                f"record of {size:,} bytes is over the limit of {self.max_record_bytes:,}"
            )
        try:
            state_key = _parse_key(key or b"")
        except (ValueError, RecursionError):
            raise corrupt("record key is not an action-state key") from None
        if not self.placement.owns(key_groups, state_key.key):
            report.elsewhere += 1  # another subtask's key, in a partition shared with it
            return
        if value is None:
            # By the key's canonical form, as states are kept: a tombstone's key may be written
            # in another (equal) JSON form.
            canonical = state_key.canonical().encode("utf-8")
            self._forget(canonical, _run_of(state_key))
            self._paused_keys.discard(canonical)
            report.tombstones += 1
            return
        if offset < marker.partitions[partition].end and _run_of(state_key) not in open_runs:
            report.skipped += 1  # the run had ended before the marker: not needed for replay
            return
        record, envelope = self._codec.open(
            key or b"", value, topic=self.topic, partition=partition, offset=offset
        )
        if not isinstance(record, ActionState):
            raise corrupt(f"expected an action_state record, got {type(record).__name__}")
        run = _run_of(record.key)
        if self.placement.checked and self._partition(run) != partition:
            if self._placement_unknown and CRC32_PLACEMENT.partition(*run[:2], self.partitions) == (
                partition
            ):
                self._legacy_found = True  # a topic written before key-group placement
            else:
                raise corrupt(
                    f"record is in the wrong partition for its key under {self.placement.name} "
                    "placement"
                )
        # `open` checked that the record key is the canonical form of the key in the body.
        self._remember(key or b"", run, envelope)
        if any(call.is_open_wait for call in record.calls):  # the run is paused
            self._paused_keys.add(key or b"")
        else:  # a later state of the action: its wait resolved
            self._paused_keys.discard(key or b"")
        self._note_offset(run, partition, offset)
        report.loaded += 1
