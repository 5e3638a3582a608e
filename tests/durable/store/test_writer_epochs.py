"""A replaced writer's late records never go back on a newer writer's (zombie fencing).

A TaskManager stopped past the heartbeat timeout has its task restarted elsewhere; when it
resumes, the engine its old attempt left running may still write states it had in flight. Every
record carries its store's epoch, and a restore skips a record older than an earlier record of
the same key (e2e/test_standalone_external_faults.py shows the zombie on the real cluster).
"""

from flink_agents.durable.store import (
    ActionState,
    CallResult,
    InMemoryActionStateStore,
    InMemoryLog,
    RecordCodec,
    RunKey,
)
from flink_agents.durable.store._codec import record_epoch

RUN = RunKey(agent="agent", key="k", seq=0)


def progress(calls: int, *, completed: bool = False) -> ActionState:
    """The action ``act`` of RUN with ``calls`` succeeded calls."""
    state = ActionState(key=RUN.action("act"), completed=completed)
    for n in range(calls):
        state.record_call(CallResult.pending(f"call-{n}").succeed(n))
    return state


def test_a_replaced_writers_late_record_is_fenced_at_restore() -> None:
    log = InMemoryLog()
    zombie = InMemoryActionStateStore(log)
    zombie.put(progress(1))
    zombie.flush()
    marker = zombie.recovery_marker()
    current = InMemoryActionStateStore(log)  # the restarted attempt, elsewhere
    current.restore(marker)
    current.put(progress(2, completed=True))
    current.flush()
    zombie.put(progress(1))  # resumed: writes what it had in flight, after the newer record
    zombie.flush()

    after = InMemoryActionStateStore(log)
    report = after.restore(marker)

    assert report.fenced == 1
    restored = after.get(RUN.action("act"))
    assert restored is not None and restored.completed and len(restored.calls) == 2


def test_the_same_writer_may_go_back_on_its_own_record() -> None:
    """A replay mismatch under the ``warn`` policy drops recorded calls: a writer's own later
    record wins even when it holds less."""
    log = InMemoryLog()
    store = InMemoryActionStateStore(log)
    store.put(progress(2))
    store.put(progress(1))
    store.flush()

    after = InMemoryActionStateStore(log)
    report = after.restore(store.recovery_marker())

    assert report.fenced == 0
    restored = after.get(RUN.action("act"))
    assert restored is not None and len(restored.calls) == 1


def test_a_record_without_an_epoch_is_never_fenced() -> None:
    """Records of earlier versions, or written by hand (a tombstone), carry no epoch."""
    log = InMemoryLog()
    store = InMemoryActionStateStore(log)
    store.put(progress(1))
    store.flush()
    log.append(0, RUN.action("act").canonical().encode(), None)  # epoch 0

    after = InMemoryActionStateStore(log)
    report = after.restore(store.recovery_marker())

    assert report.fenced == 0 and report.tombstones == 1
    assert after.get(RUN.action("act")) is None


def test_the_epoch_is_read_from_a_record_without_parsing_it() -> None:
    key = RUN.action("act").canonical().encode()
    for secret in (None, b"s3cret"):
        codec = RecordCodec(secret)
        stamped = codec.seal(key, codec.envelope(progress(1), epoch=1_796_000_000_000_000_000))
        assert record_epoch(stamped) == 1_796_000_000_000_000_000
        assert record_epoch(codec.seal(key, codec.envelope(progress(1)))) == 0
    # An earlier version's record, whose body happens to hold the field's text, has none.
    older = b'{"body":{"note":",\\"epoch\\":5}"},"kind":"action_state","v":1}'
    assert record_epoch(older) == 0
