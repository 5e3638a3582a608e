"""Integration tests against the real Kafka broker (`scripts/kafka.sh start`)."""

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from flink_agents.durable.store import (
    DEFAULT_SECRET_ENV,
    ActionState,
    CallError,
    CallResult,
    KeyGroupRange,
    RecordCodec,
    RunKey,
    StoreError,
    partition_for,
)
from flink_agents.durable.store.kafka import KafkaActionStateStore, topic_partitions
from flink_agents.durable.store.store_config import StoreConfig
from flink_agents.runtime.recovery import compact
from tests.durable.store import payload_types
from tests.durable.store.payload_types import Exploding, Opaque, Point, Reply

pytestmark = pytest.mark.kafka

REPO = Path(__file__).resolve().parents[3]
PARTITIONS = 3


@pytest.fixture
def make_store(kafka_bootstrap, monkeypatch):
    """Factory for stores on one fresh topic; `secret` sets the HMAC secret for this test."""
    topic = f"test-store-{uuid.uuid4().hex[:12]}"
    secret_env = f"FA_TEST_SECRET_{uuid.uuid4().hex[:8]}"
    stores: list[KafkaActionStateStore] = []

    def make(secret: str | None = None) -> KafkaActionStateStore:
        if secret is not None:
            monkeypatch.setenv(secret_env, secret)
        config = StoreConfig(
            kind="kafka",
            bootstrap_servers=kafka_bootstrap,
            topic=topic,
            partitions=PARTITIONS,
            secret_env=secret_env,
            # No secret given to this test's stores yet: unsigned records, on purpose.
            signing="required" if os.environ.get(secret_env) else "off",
        )
        stores.append(KafkaActionStateStore(config))
        return stores[-1]

    yield make
    for store in stores:
        store.close()


def run(key: str, seq: int = 0) -> RunKey:
    return RunKey(agent="agent", key=key, seq=seq)


def state(r: RunKey, action: str = "act", value=1) -> ActionState:
    s = ActionState(key=r.action(action), events=[{"n": action}])
    s.record_call(CallResult.pending(f"{action}-0").succeed(value))
    return s


def test_every_record_kind_round_trips_through_kafka(make_store):
    writer = make_store(secret="s3cret")
    start = writer.recovery_marker()
    full = ActionState(
        key=run('user "1"_x').action("act"),
        completed=True,
        events=[{"type": "Out", "text": "é"}],
        memory_updates=[{"path": "a", "value": {"b": [1, 2]}}],
    )
    full.record_call(CallResult.pending("pending", function="chat", args_digest="a" * 64))
    full.record_call(CallResult.pending("model").succeed(Reply(text="hi", tokens=2)))
    full.record_call(CallResult.pending("point").succeed(Point(1, 2)))
    full.record_call(CallResult.pending("list").succeed([1, "two", None, {"x": 1.5}]))
    full.record_call(CallResult.pending("opaque").succeed(Opaque(9)))
    full.record_call(
        CallResult.pending("failed", attempts=4, failed_attempts=3).fail(
            CallError(type="E", message="m")
        )
    )
    writer.put(full)
    writer.flush()

    reader = make_store()
    report = reader.restore(start)
    assert report.loaded == 1 and report.corrupt == []
    back = reader.get(full.key)
    assert back == full
    assert back.call("model").value() == Reply(text="hi", tokens=2)
    assert back.call("point").value() == Point(1, 2)
    assert back.call("opaque").value() == Opaque(9)
    assert (back.call("failed").attempts, back.call("failed").failed_attempts) == (4, 3)


def test_fresh_process_restores_from_marker(make_store, kafka_bootstrap):
    store = make_store(secret=os.environ[DEFAULT_SECRET_ENV])  # the child's secret
    done, in_flight, later = run("done"), run("in-flight"), run("later")
    store.put(state(done, value="done"))
    store.end_run(done)
    store.put(state(in_flight, "a1", value="before"))
    # Unrelated traffic before the marker, on every partition: must not be read back.
    for i in range(20):
        store.put(state(run(f"old-{i}")))
        store.end_run(run(f"old-{i}"))
    marker = store.recovery_marker()
    store.put(state(in_flight, "a2", value="after"))
    store.put(state(later, value=Point(3, 4)))
    store.flush()

    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.durable.store.restore_child",
            kafka_bootstrap,
            store.topic,
            str(PARTITIONS),
            marker.to_json(),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    seen = json.loads(out.stdout.strip().splitlines()[-1])["states"]
    assert seen == {
        in_flight.action("a1").canonical(): [["str", "before"]],
        in_flight.action("a2").canonical(): [["str", "after"]],
        later.action("act").canonical(): [["Point", {"x": 3, "y": 4}]],
    }


def test_garbage_and_forged_records_are_reported_and_skipped(make_store, kafka_bootstrap):
    payload_types.UNPICKLED.clear()
    store = make_store(secret="right")
    start = store.recovery_marker()
    victim = run("victim")
    store.put(state(victim, "a"))
    store.flush()

    key = victim.action("b").canonical().encode()
    forged = RecordCodec(b"wrong").encode(key, state(victim, "b", value=Exploding("forged")))
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    p = partition_for(victim, PARTITIONS)
    bad_offsets = [
        producer.send(store.topic, key=b"junk", value=b"\x00\x01garbage", partition=p)
        .get(30)
        .offset,
        producer.send(store.topic, key=key, value=forged, partition=p).get(30).offset,
    ]
    producer.close()
    store.put(state(victim, "c"))
    store.flush()

    reader = make_store()
    report = reader.restore(start)
    assert [(e.partition, e.offset) for e in report.corrupt] == [(p, o) for o in bad_offsets]
    assert all(e.topic == store.topic for e in report.corrupt)
    assert "not an action-state key" in report.corrupt[0].reason
    assert "HMAC does not match" in report.corrupt[1].reason
    assert f"offset={bad_offsets[1]}" in str(report.corrupt[1])
    assert [s.key.action for s in reader.get_run(victim)] == ["a", "c"]
    assert payload_types.UNPICKLED == []
    # A second restore over the same records does not fail either (no crash loop).
    assert len(reader.restore(start).corrupt) == 2


def test_prune_writes_tombstones_and_rebuild_skips_pruned(make_store, kafka_bootstrap):
    store = make_store()
    start = store.recovery_marker()
    old, kept = run("old"), run("kept")
    store.put(state(old, "a"))
    store.put(state(old, "b"))
    store.put(state(kept))
    store.end_run(old)
    marker = store.recovery_marker()
    assert store.prune(marker) == 2

    consumer = KafkaConsumer(bootstrap_servers=kafka_bootstrap, enable_auto_commit=False)
    tp = TopicPartition(store.topic, partition_for(old, PARTITIONS))
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    end = consumer.end_offsets([tp])[tp]
    records = []
    while consumer.position(tp) < end:
        for batch in consumer.poll(timeout_ms=1000).values():
            records.extend(batch)
    consumer.close()
    tombstones = {r.key for r in records if r.value is None}
    assert tombstones == {
        old.action("a").canonical().encode(),
        old.action("b").canonical().encode(),
    }

    reader = make_store()
    report = reader.restore(start)
    assert report.tombstones == 2
    assert reader.get_run(old) == []
    assert reader.get(kept.action("act")) is not None


def test_runs_a_failed_attempt_never_pruned_are_tombstoned_after_the_restore(make_store):
    # The attempt's runs ended, it took the marker of its last checkpoint, and it failed before
    # its prune: the restored subtask (it owns every key group here) tombstones them, so no
    # record of theirs outlives compaction.
    failed = make_store()
    ended = [run(f"customer-{i}") for i in range(5)]
    for r in ended:
        failed.put(state(r))
        failed.end_run(r)
    marker = compact(failed.recovery_marker())

    restored = make_store()
    restored.restore(marker, KeyGroupRange.of_subtask(0, 1, 128))
    assert restored.prune(restored.recovery_marker()) == len(ended)

    report = make_store().restore(marker)
    assert (report.loaded, report.tombstones) == (len(ended), len(ended))
    assert restored.state_keys() == []


def _kafka(command: str) -> None:
    subprocess.run(
        ["bash", str(REPO / "scripts/kafka.sh"), command], cwd=REPO, check=True, timeout=180
    )


def test_no_record_lost_across_broker_restart(make_store):
    store = make_store()
    start = store.recovery_marker()
    for i in range(50):
        store.put(state(run(f"before-{i}")))
    store.flush()
    try:
        _kafka("stop")
        for i in range(50):
            store.put(state(run(f"during-{i}")))  # buffered while the broker is down
        time.sleep(1)
    finally:
        _kafka("start")
    store.flush(timeout=120)  # returns only once every write is acknowledged
    for i in range(50):
        store.put(state(run(f"after-{i}")))
    store.flush(timeout=60)

    reader = make_store()
    report = reader.restore(start)
    assert report.corrupt == []
    assert reader.state_count == 150
    for prefix in ("before", "during", "after"):
        assert reader.get(run(f"{prefix}-7").action("act")) is not None


def test_an_unreachable_broker_is_named_in_a_clear_error():
    config = StoreConfig(
        kind="kafka",
        bootstrap_servers="127.0.0.1:1",
        topic="never-created",
        request_timeout_ms=2000,
    )
    with pytest.raises(StoreError, match=r"127\.0\.0\.1:1 .*'never-created'.*reachable"):
        KafkaActionStateStore(config)


def test_a_replaced_writers_late_record_is_fenced_on_kafka(make_store):
    """The writer epoch travels as a record header: a zombie's late write is fenced at restore
    (tests/durable/store/test_writer_epochs.py has the rules on the memory store)."""
    r = run("zombie")
    zombie = make_store()
    zombie.put(state(r, value="first"))
    zombie.flush()
    marker = zombie.recovery_marker()
    current = make_store()
    current.restore(marker)
    newer = state(r, value="first")
    newer.completed = True
    current.put(newer)
    current.flush()
    zombie.put(state(r, value="first"))  # resumed after the newer writer's record
    zombie.flush()

    after = make_store()
    report = after.restore(marker)

    assert report.fenced == 1
    assert after.get(r.action("act")).completed


def _topic_exists(bootstrap: str, topic: str) -> bool:
    from confluent_kafka.admin import AdminClient

    return topic in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics


def test_a_store_opened_for_reading_refuses_a_missing_topic_and_never_creates_it(
    kafka_bootstrap,
):
    # The broker auto-creates topics (scripts/kafka.sh): a metadata request naming the topic,
    # or the store's own creation, would make a mistyped name read as an empty topic.
    topic = f"test-store-missing-{uuid.uuid4().hex[:12]}"
    with pytest.raises(StoreError, match=f"store topic '{topic}' at .*: no such topic"):
        KafkaActionStateStore.existing(kafka_bootstrap, topic)
    with pytest.raises(StoreError, match="no such topic"):
        KafkaActionStateStore.existing(kafka_bootstrap, topic, partitions=PARTITIONS)
    time.sleep(0.5)  # an auto-creation is asynchronous on the broker
    assert not _topic_exists(kafka_bootstrap, topic)


def test_a_store_opened_for_reading_takes_the_topics_partition_count(make_store, kafka_bootstrap):
    writer = make_store(secret=os.environ[DEFAULT_SECRET_ENV])  # the reader's secret
    written = state(run('"k"'))
    writer.put(written)
    writer.flush()
    reader = KafkaActionStateStore.existing(kafka_bootstrap, writer.topic)
    try:
        assert reader.partitions == PARTITIONS
        assert [s.key for s in reader.history()] == [written.key]
    finally:
        reader.close()
    with pytest.raises(StoreError, match=f"has {PARTITIONS} partitions, configured 5"):
        KafkaActionStateStore.existing(kafka_bootstrap, writer.topic, partitions=5)


def test_looking_for_a_topic_on_an_unreachable_broker_is_a_clear_error():
    with pytest.raises(StoreError, match=r"no answer from Kafka at 127\.0\.0\.1:1 within 2 s"):
        topic_partitions("127.0.0.1:1", "never-created", 2.0)
