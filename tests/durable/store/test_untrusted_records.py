"""Records nobody vouched for never stop a restore and never make the reader import code: a
deeply nested record, one over the record limit and one whose key is deeply nested are each
skipped as corrupt (naming topic, partition and offset) while the job's own records load, and
a forged type tag is not imported. On the in-memory store and on the real Kafka store, the
forged records written raw beside the store's own."""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Callable, Iterator

import pytest
from kafka import KafkaProducer

from flink_agents.durable.store import (
    ActionState,
    ActionStateStore,
    CallResult,
    InMemoryActionStateStore,
    InMemoryLog,
    PayloadError,
    RecordCodec,
    RunKey,
    partition_for,
)
from flink_agents.durable.store.store_config import StoreConfig

PARTITIONS = 2
WriteRaw = Callable[[int, bytes, bytes], None]
MakeStore = Callable[..., ActionStateStore]


@pytest.fixture(params=["memory", pytest.param("kafka", marks=pytest.mark.kafka)])
def store_and_raw_writer(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[MakeStore, WriteRaw]]:
    """A factory of stores over one log or topic (``make(secret=None)``: signed with
    ``secret``), and a way to append raw records to it."""
    built: list[ActionStateStore] = []
    secret_env = f"FA_TEST_SECRET_{uuid.uuid4().hex[:8]}"
    if request.param == "memory":
        log = InMemoryLog(PARTITIONS)

        def make(secret: bytes | None = None) -> ActionStateStore:
            built.append(InMemoryActionStateStore(log, secret=secret))
            return built[-1]

        def write(partition: int, key: bytes, value: bytes) -> None:
            log.append(partition, key, value)

        yield make, write
    else:
        servers = request.getfixturevalue("kafka_bootstrap")
        config = StoreConfig(
            kind="kafka",
            bootstrap_servers=servers,
            topic=f"test-untrusted-{uuid.uuid4().hex[:12]}",
            partitions=PARTITIONS,
            secret_env=secret_env,
        )
        producer = KafkaProducer(bootstrap_servers=servers, max_request_size=4_000_000)

        def make(secret: bytes | None = None) -> ActionStateStore:
            if secret is not None:
                monkeypatch.setenv(secret_env, secret.decode())
            # No secret given to this test's stores yet: unsigned records, on purpose.
            signing = "required" if os.environ.get(secret_env) else "off"
            built.append(config.model_copy(update={"signing": signing}).build())
            return built[-1]

        def write(partition: int, key: bytes, value: bytes) -> None:
            producer.send(config.topic, key=key, value=value, partition=partition).get(30)

        yield make, write
        producer.close()
    for store in built:
        store.close()


def _envelope(key: dict[str, object], body_tail: bytes) -> bytes:
    return (
        b'{"body":{"key":'
        + json.dumps(key).encode()
        + b',"completed":true,'
        + body_tail
        + b'},"kind":"action_state","v":1}'
    )


def test_forged_records_are_skipped_and_the_jobs_own_load(
    store_and_raw_writer: tuple[MakeStore, WriteRaw],
) -> None:
    make, write = store_and_raw_writer
    writer = make()
    marker = writer.recovery_marker()
    own = RunKey(agent="a", key="own", seq=0)
    writer.begin_run(own)
    state = ActionState(key=own.action("act"), events=[{"n": 1}])
    state.record_call(CallResult.pending("c").succeed({"answer": 42}))
    writer.put(state)
    writer.flush()

    forged = RunKey(agent="a", key="forged", seq=0)
    part = partition_for(forged, PARTITIONS)
    deep_key = forged.action("deep")
    deep = _envelope(deep_key.model_dump(), b'"events":[' + b"[" * 100_000 + b"]" * 100_000 + b"]")
    large_key = forged.action("large")
    large = _envelope(large_key.model_dump(), b'"events":[{"pad":"' + b"x" * 1_000_000 + b'"}]')
    tagged_key = forged.action("tagged")
    tagged = _envelope(
        tagged_key.model_dump(),
        b'"calls":[{"call_id":"t","status":"succeeded","payload":{},"payload_type":"this:X"}]',
    )
    write(part, deep_key.canonical().encode(), deep)
    write(part, large_key.canonical().encode(), large)
    write(part, b"[" * 50_000 + b"]" * 50_000, b"{}")  # a key nested too deep
    write(part, tagged_key.canonical().encode(), tagged)

    reader = make()
    report = reader.restore(marker)

    reasons = sorted(error.reason for error in report.corrupt)
    assert reasons == [
        "nested deeper than a record may be",
        "record key is not an action-state key",
        f"record of {len(large_key.canonical()) + len(large):,} bytes is over the limit of 983,040",
    ], reasons
    assert all(error.topic == reader.topic and error.partition == part for error in report.corrupt)
    assert len({error.offset for error in report.corrupt}) == 3
    restored = reader.get(own.action("act"))
    assert restored is not None and restored.calls[0].value() == {"answer": 42}
    # The forged tag is loaded as data, and never imported when read.
    found = reader.get(tagged_key)
    assert found is not None
    with pytest.raises(PayloadError, match="has not loaded"):
        found.calls[0].value()
    assert "this" not in sys.modules


def test_a_record_of_another_job_sharing_the_secret_is_skipped(
    store_and_raw_writer: tuple[MakeStore, WriteRaw],
) -> None:
    make, write = store_and_raw_writer
    writer = make(secret=b"shared")
    marker = writer.recovery_marker()
    own = RunKey(agent="a", key="own", seq=0)
    writer.begin_run(own)
    writer.put(ActionState(key=own.action("act"), events=[{"n": 1}]))
    writer.flush()
    # The same agent and key in another job (its own topic), signed with the same secret.
    theirs = RunKey(agent="a", key="theirs", seq=0).action("act")
    copied = RecordCodec(b"shared", scope="another-job").encode(
        theirs.canonical().encode(), ActionState(key=theirs, events=[{"n": "injected"}])
    )
    write(partition_for(theirs.run, PARTITIONS), theirs.canonical().encode(), copied)

    reader = make(secret=b"shared")
    report = reader.restore(marker)

    [error] = report.corrupt
    assert "written for another topic or job" in error.reason
    assert reader.get(theirs) is None and reader.get(own.action("act")) is not None
