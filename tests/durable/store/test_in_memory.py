import asyncio
import gc
import threading

import pytest

from flink_agents.durable.store import (
    ActionState,
    ActionStateStore,
    CallResult,
    InMemoryActionStateStore,
    InMemoryLog,
    KeyGroupRange,
    PartitionMark,
    PickleNotAllowedError,
    RecoveryMarker,
    RunKey,
    StoreError,
    StoreWriteError,
    key_group,
)
from flink_agents.runtime.recovery import compact
from tests.durable.store.payload_types import Opaque, Reply


def run(key: str, seq: int = 0) -> RunKey:
    return RunKey(agent="agent", key=key, seq=seq)


def state(r: RunKey, action: str = "act", value=1) -> ActionState:
    s = ActionState(key=r.action(action))
    s.record_call(CallResult.pending(f"{action}-0").succeed(value))
    return s


def test_satisfies_protocol_and_reads_own_writes_as_copies():
    store = InMemoryActionStateStore()
    assert isinstance(store, ActionStateStore)
    s = state(run("k"), value=Reply(text="a", tokens=1))
    store.put(s)
    s.completed = True  # mutating the caller's object must not change the store
    got = store.get(s.key)
    assert got is not None and not got.completed
    assert got.calls[0].value() == Reply(text="a", tokens=1)
    got.completed = True
    assert not store.get(s.key).completed
    assert store.get(run("other").action("act")) is None


def test_get_run_keeps_first_put_order_and_separates_keys_with_separators():
    store = InMemoryActionStateStore()
    r1, r2 = run("a_b"), RunKey(agent="agent_a", key="b", seq=0)
    for action in ("first", "second", "first"):
        store.put(state(r1, action))
    store.put(state(r2, "x"))
    assert [s.key.action for s in store.get_run(r1)] == ["first", "second"]
    assert [s.key.action for s in store.get_run(r2)] == ["x"]


def test_writes_reach_the_log_only_on_flush():
    log = InMemoryLog()
    store = InMemoryActionStateStore(log)
    store.put(state(run("k")))
    assert log.partitions == [[]]
    asyncio.run(store.aflush())
    assert len(log.partitions[0]) == 1


def test_back_pressure_flushes_when_pending_is_full():
    log = InMemoryLog()
    store = InMemoryActionStateStore(log, max_pending=2)
    for i in range(5):
        store.put(state(run(f"k{i}")))
    assert len(log.partitions[0]) == 4  # flushed twice, one write still buffered


def test_pickle_needs_a_secret():
    with pytest.raises(PickleNotAllowedError):
        InMemoryActionStateStore().put(state(run("k"), value=Opaque(1)))
    store = InMemoryActionStateStore(secret=b"s")
    store.put(state(run("k"), value=Opaque(1)))
    assert store.get(run("k").action("act")).calls[0].value() == Opaque(1)


def test_restore_sees_in_flight_and_later_runs_but_not_finished_ones():
    log = InMemoryLog(partitions=2)
    store = InMemoryActionStateStore(log)
    done, in_flight, later = run("done"), run("in-flight"), run("later")
    store.put(state(done))
    store.end_run(done)
    store.put(state(in_flight, "a1"))
    marker = RecoveryMarker.from_json(store.recovery_marker().to_json())
    store.put(state(in_flight, "a2"))
    store.put(state(later))
    store.flush()
    store.put(state(run("unflushed")))  # lost in the "crash"

    fresh = InMemoryActionStateStore(log)
    report = fresh.restore(marker)
    assert report.corrupt == []
    assert fresh.get(done.action("act")) is None
    assert [s.key.action for s in fresh.get_run(in_flight)] == ["a1", "a2"]
    assert fresh.get(later.action("act")) is not None
    assert fresh.get(run("unflushed").action("act")) is None


def test_restore_skips_runs_that_ended_before_the_marker_above_the_low_water():
    log = InMemoryLog()
    store = InMemoryActionStateStore(log)
    open_, done = run("open"), run("done")
    store.put(state(open_))
    store.put(state(done))  # written after the low-water offset, but ended before the marker
    store.end_run(done)
    marker = store.recovery_marker()
    assert marker.open_runs == [open_]
    fresh = InMemoryActionStateStore(log)
    report = fresh.restore(marker)
    assert (report.loaded, report.skipped) == (1, 1)
    assert fresh.state_keys() == [open_.action("act")]


def test_low_water_follows_the_oldest_run_not_yet_pruned():
    # An ended run holds the low-water mark until it is pruned: should the store fail before
    # that, the restore must find its records to tombstone them (see the test below).
    log = InMemoryLog()
    store = InMemoryActionStateStore(log)
    a, b = run("a"), run("b")
    store.put(state(a))
    store.put(state(b))
    assert store.recovery_marker().partitions[0].low == 0
    store.end_run(a)
    assert store.recovery_marker().partitions[0].low == 0
    store.prune(store.recovery_marker())  # tombstones a at offset 2
    assert store.recovery_marker().partitions[0].low == 1
    store.end_run(b)
    store.prune(store.recovery_marker())
    mark = store.recovery_marker().partitions[0]
    assert (mark.low, mark.end) == (4, 4)


def test_restored_in_flight_run_keeps_the_low_water():
    log = InMemoryLog()
    store = InMemoryActionStateStore(log)
    r = run("r")
    store.put(state(r))
    marker = store.recovery_marker()
    fresh = InMemoryActionStateStore(log)
    fresh.restore(marker)  # the in-flight run is open again without begin_run
    assert fresh.recovery_marker().partitions[0].low == 0
    fresh.end_run(r)
    fresh.prune(fresh.recovery_marker())
    assert fresh.recovery_marker().partitions[0].low == 2  # past its record and tombstone


def test_a_marker_after_a_restore_covers_restored_runs_until_they_are_pruned():
    # A run found by a restore may be replayed (its input comes again from the source): until
    # it ends and is pruned, a later marker must not pass its records, or a second failure
    # would lose them (or leave them in the topic for good).
    log = InMemoryLog()
    store = InMemoryActionStateStore(log)
    in_flight, later = run("in-flight"), run("later")
    store.put(state(in_flight))
    marker = compact(store.recovery_marker())
    store.put(state(later))
    store.end_run(later)  # ended after the checkpoint: it replays too
    store.flush()

    fresh = InMemoryActionStateStore(log)
    fresh.restore(marker)
    assert sorted(fresh.recovery_marker().open_runs, key=RunKey.canonical) == [in_flight, later]
    assert fresh.recovery_marker().partitions[0].low == 0
    fresh.begin_run(in_flight)
    fresh.end_run(in_flight)
    assert fresh.recovery_marker().partitions[0].low == 0
    fresh.begin_run(later)
    fresh.end_run(later)
    assert fresh.recovery_marker().partitions[0].low == 0
    assert fresh.prune(fresh.recovery_marker()) == 2
    assert fresh.recovery_marker().partitions[0].low == 4  # past both tombstones


def test_restored_runs_never_replayed_stop_holding_the_low_water_at_the_next_prune():
    # A restore without key groups reads other subtasks' keys too; they never run here, so
    # they are let go (not tombstoned: only their owner may) once a marker taken after the
    # restore is old enough to prune with.
    log = InMemoryLog()
    store = InMemoryActionStateStore(log)
    foreign, replayed = run("foreign"), run("replayed")
    store.put(state(foreign))
    store.put(state(replayed))
    marker = compact(store.recovery_marker())
    store.flush()

    fresh = InMemoryActionStateStore(log)
    fresh.restore(marker)
    fresh.begin_run(replayed)
    taken_after_restore = fresh.recovery_marker()
    fresh.end_run(replayed)
    assert fresh.recovery_marker().partitions[0].low == 0  # foreign holds the low-water mark
    assert fresh.prune(taken_after_restore) == 0  # replayed ended after that marker: kept
    assert fresh.get(foreign.action("act")) is None  # let go, without a tombstone
    assert fresh.recovery_marker().partitions[0].low == 1  # replayed, ended, not pruned yet
    assert fresh.prune(fresh.recovery_marker()) == 1
    assert log.partitions[0][-1] == (replayed.action("act").canonical().encode(), None)
    assert fresh.recovery_marker().partitions[0].low == 3


def test_a_restore_for_key_groups_tombstones_its_never_replayed_runs_at_the_next_prune():
    # Runs that ended inside the prune delay before a failure were never pruned by the failed
    # attempt, and their input does not come again: the checkpoint's marker still covers them
    # and the subtask that owns their key groups tombstones them, or every failover would leave
    # a prune delay's records in the topic for good.
    groups = KeyGroupRange.of_subtask(0, 2, 128)
    runs = [run(f"customer-{i}") for i in range(20)]
    mine, replayed = [r for r in runs if key_group(r.key, 128) in groups][:2]
    other = next(r for r in runs if key_group(r.key, 128) not in groups)
    log = InMemoryLog()
    store = InMemoryActionStateStore(log)
    for r in (mine, other, replayed):
        store.put(state(r))
        store.end_run(r)
    marker = compact(store.recovery_marker())  # in the checkpoint restored below
    # The attempt fails here, before a prune.

    fresh = InMemoryActionStateStore(log)
    fresh.restore(marker, groups)
    fresh.begin_run(replayed)
    fresh.end_run(replayed)
    assert fresh.prune(fresh.recovery_marker()) == 2
    tombstoned = [key for key, value in log.partitions[0] if value is None]
    # The other subtask's run is left to its owner.
    assert tombstoned == [r.action("act").canonical().encode() for r in (mine, replayed)]


def test_a_restored_run_paused_at_a_wait_is_not_let_go_at_the_next_prune():
    # A paused key is visited again only when its decision or deadline comes, maybe long after
    # the restore: its run's records stay for the resumed run to replay.
    log = InMemoryLog()
    store = InMemoryActionStateStore(log)
    paused, resumed = run("paused"), run("resumed")
    for r in (paused, resumed):
        s = state(r)
        s.record_call(CallResult.pending("wait", kind="wait"))
        store.put(s)
    decided = state(resumed)  # a later state of the same action: its wait resolved
    decided.record_call(CallResult.pending("wait", kind="wait").succeed({"verdict": "approve"}))
    store.put(decided)
    marker = compact(store.recovery_marker())
    store.flush()

    fresh = InMemoryActionStateStore(log)
    fresh.restore(marker)
    assert fresh.prune(fresh.recovery_marker()) == 0
    assert fresh.get(paused.action("act")) is not None  # kept, and holding the low-water mark
    assert fresh.get(resumed.action("act")) is None  # not paused any more: let go
    assert [r.key for r in fresh.recovery_marker().open_runs] == ["paused"]


def test_prune_tombstones_runs_ended_before_the_marker():
    log = InMemoryLog()
    store = InMemoryActionStateStore(log)
    old, late, open_ = run("old"), run("late"), run("open")
    store.put(state(old, "a"))
    store.put(state(old, "b"))
    store.put(state(late))
    store.put(state(open_))
    store.end_run(old)
    marker = store.recovery_marker()
    store.end_run(late)  # ended after the marker: must survive this prune
    assert store.prune(marker) == 2
    assert log.partitions[0][-2:] == [
        (old.action("a").canonical().encode(), None),
        (old.action("b").canonical().encode(), None),
    ]
    assert store.get_run(old) == []
    assert store.get(late.action("act")) is not None
    assert store.prune(store.recovery_marker()) == 1

    fresh = InMemoryActionStateStore(log)
    report = fresh.restore(
        RecoveryMarker(topic="memory", store_id="x", taken=0, partitions={0: {"low": 0, "end": 0}})
    )
    assert report.tombstones == 3
    assert fresh.state_count == 1 and fresh.get(open_.action("act")) is not None
    with pytest.raises(StoreError, match="taken by this store"):
        fresh.prune(marker)


def test_corrupt_records_are_skipped_and_reported():
    log = InMemoryLog()
    store = InMemoryActionStateStore(log, secret=b"s")
    good = state(run("good"))
    store.put(good)
    marker_start = RecoveryMarker(
        topic="memory", store_id="x", taken=0, partitions={0: {"low": 0, "end": 0}}
    )
    store.flush()
    log.append(0, b"junk", b"\x00garbage")
    log.append(0, good.key.canonical().encode(), None)
    log.append(0, b"not-a-key", None)

    fresh = InMemoryActionStateStore(log, secret=b"s")
    report = fresh.restore(marker_start)
    assert [e.offset for e in report.corrupt] == [1, 3]
    assert "topic='memory' partition=0 offset=1" in str(report.corrupt[0])
    assert report.tombstones == 1 and fresh.state_count == 0


def test_restore_rejects_foreign_markers():
    store = InMemoryActionStateStore(InMemoryLog(partitions=2))
    with pytest.raises(StoreError, match="partition count"):
        store.restore(
            RecoveryMarker(
                topic="memory", store_id="x", taken=0, partitions={0: {"low": 0, "end": 0}}
            )
        )
    with pytest.raises(StoreError, match="topic"):
        store.restore(RecoveryMarker(topic="t", store_id="x", taken=0, partitions={}))


def test_restore_refuses_a_log_shorter_than_the_marker():
    store = InMemoryActionStateStore(InMemoryLog(partitions=2))
    store.put(state(run("k")))
    marker = store.recovery_marker()
    # The topic deleted and created again: empty, so the marker's records are gone.
    recreated = InMemoryActionStateStore(InMemoryLog(partitions=2))
    with pytest.raises(StoreError, match="shorter than the recovery marker"):
        recreated.restore(marker)


def test_merge_takes_lowest_low_and_highest_end():
    a = RecoveryMarker(topic="t", store_id="a", taken=1, partitions={0: {"low": 5, "end": 9}})
    b = RecoveryMarker(
        topic="t",
        store_id="b",
        taken=4,
        partitions={0: {"low": 2, "end": 7}, 1: {"low": 3, "end": 3}},
    )
    merged = RecoveryMarker.merge([a, b])
    assert {p: (m.low, m.end) for p, m in merged.partitions.items()} == {0: (2, 9), 1: (3, 3)}
    with pytest.raises(StoreError):
        RecoveryMarker.merge([a, RecoveryMarker(topic="u", store_id="c", taken=0, partitions={})])


class _GatedStore(InMemoryActionStateStore):
    """Acknowledges writes only once `gate` is set, like a broker round trip in flight."""

    def __init__(self, log: InMemoryLog) -> None:
        super().__init__(log)
        self.gate = threading.Event()
        self.awaiting = threading.Event()

    def _await(self, handles, timeout):
        self.awaiting.set()
        self.gate.wait(5)
        return super()._await(handles, timeout)


def test_marker_waits_for_a_flush_running_in_another_thread():
    log = InMemoryLog()
    store = _GatedStore(log)
    r = run("k")
    store.put(state(r))
    worker = threading.Thread(target=store.flush)  # what `aflush` does
    worker.start()
    assert store.awaiting.wait(5)  # the worker took the batch; nothing is pending here
    threading.Timer(0.2, store.gate.set).start()
    marker = store.recovery_marker()
    worker.join(5)
    # The open run's first write is in the worker's batch: the marker must start before it.
    assert marker.partitions[0].low == 0 and marker.partitions[0].end == 1
    restored = InMemoryActionStateStore(log)
    restored.restore(marker)
    assert restored.get(r.action("act")) is not None


def test_prune_while_another_thread_flushes_loses_no_write():
    log = InMemoryLog()
    store = _GatedStore(log)
    store.gate.set()
    ended = run("done")
    store.put(state(ended))
    store.end_run(ended)
    marker = store.recovery_marker()
    store.gate.clear()
    store.put(state(run("open")))
    worker = threading.Thread(target=store.flush)
    worker.start()
    assert store.awaiting.wait(5)
    threading.Timer(0.2, store.gate.set).start()
    assert store.prune(marker) == 1
    worker.join(5)
    assert [value is None for _, value in log.partitions[0]] == [False, False, True]


def test_puts_of_one_key_between_flushes_send_only_the_latest_state():
    log = InMemoryLog()
    store = InMemoryActionStateStore(log)
    start = store.recovery_marker()
    r = run("k")
    store.put(state(r, value=1))
    store.put(state(r, value=2))  # the same action's state again: replaces the unsent write
    store.put(state(r, action="other"))
    assert log.partitions[0] == []  # nothing is sent before a flush
    store.flush()
    assert len(log.partitions[0]) == 2
    store.put(state(r, value=3))  # after a flush: a new record
    store.flush()
    assert len(log.partitions[0]) == 3
    restored = InMemoryActionStateStore(log)
    restored.restore(start)
    latest = restored.get(r.action("act"))
    assert latest is not None and latest.calls[0].value(int) == 3


def test_the_view_of_ended_runs_is_not_scanned_by_the_garbage_collector():
    # The view holds every run of the prune window (a minute of runs by default). Kept as
    # bytes, strings and tuples, a full collection does not scan models for every state (it
    # scanned 11 objects per run of three actions, holding the interpreter lock).
    store = InMemoryActionStateStore()
    runs = [run(f"k{i}") for i in range(300)]
    gc.collect()
    before = len(gc.get_objects())
    for r in runs:
        for action in ("start", "chat", "finish"):
            store.put(state(r, action))
        store.end_run(r)
    store.flush()
    gc.collect()
    assert (len(gc.get_objects()) - before) / len(runs) < 0.1
    assert [s.key for s in store.get_run(runs[0])] == [
        runs[0].action(action) for action in ("start", "chat", "finish")
    ]


def test_a_tombstone_with_its_key_in_another_json_form_still_hides_the_state():
    # Keys are compared as action-state keys, not as bytes: a tombstone written by hand (or a
    # tool) with the fields in another order removes the state on restore too.
    log = InMemoryLog()
    store = InMemoryActionStateStore(log)
    r = run("k")
    store.put(state(r))
    store.flush()
    key = r.action("act")
    log.append(0, key.model_dump_json().encode(), None)  # field order: agent, key, seq, ...
    assert key.model_dump_json().encode() != key.canonical().encode()
    fresh = InMemoryActionStateStore(log)
    start = RecoveryMarker(
        topic="memory", store_id="x", taken=-1, partitions={0: PartitionMark(low=0, end=0)}
    )
    report = fresh.restore(start)
    assert (report.loaded, report.tombstones) == (1, 1)
    assert fresh.get(key) is None and fresh.state_count == 0


class _FirstBatchLostStore(_GatedStore):
    """The first batch fails once ``gate`` is set, as a write the broker never acknowledged."""

    def _await(self, handles, timeout):
        if not self.awaiting.is_set():
            self.awaiting.set()
            self.gate.wait(5)
            raise StoreWriteError("not acknowledged")
        return super()._await(handles, timeout)


def test_a_batch_lost_in_aflush_fails_every_later_flush_until_a_restore():
    """A synchronous settle flushes on the loop thread while the run's write is in the batch an
    `aflush` took: that batch failing in its worker thread must fail the settle too, though the
    settle's own flush has nothing left to send."""
    log = InMemoryLog()
    store = _FirstBatchLostStore(log)

    async def scenario() -> None:
        store.put(state(run("k")))
        flushing = asyncio.ensure_future(store.aflush())
        assert await asyncio.to_thread(store.awaiting.wait, 5)  # aflush took the batch
        threading.Timer(0.2, store.gate.set).start()
        with pytest.raises(StoreWriteError):
            store.flush()  # blocks the loop, as a synchronous action's settle does
        with pytest.raises(StoreWriteError):
            await flushing

    asyncio.run(asyncio.wait_for(scenario(), 10))
    with pytest.raises(StoreWriteError, match="was lost"):
        store.flush()  # also with nothing to send: until a restore
    store.restore(InMemoryActionStateStore(log).recovery_marker())
    store.flush()  # nothing lost since the restore
