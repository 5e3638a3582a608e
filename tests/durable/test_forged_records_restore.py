"""A job whose store topic holds forged records restores and finishes its run in flight: a
record nested too deep for the parser, one over the record limit and one signed by another
job are written beside the run's own between the crash and the restore; the replay hands back
the calls recorded before the crash and makes only the one that was in flight. Through the real
store path: the in-memory store and Kafka (the ``stores`` fixture)."""

from __future__ import annotations

import json

import pytest
from kafka import KafkaProducer

from flink_agents.durable.store import (
    ActionState,
    InMemoryActionStateStore,
    RecordCodec,
    RunKey,
    partition_for,
)
from flink_agents.testing import Stores, agent_plan
from tests.durable import helpers as h
from tests.durable.helpers import PROBE, crash_then_replay

pytestmark = pytest.mark.usefixtures("fresh_probe_and_requests")


def _forged(agent: str) -> list[tuple[RunKey, bytes, bytes]]:
    """Records (run, record key, value) of a run of ``agent`` that no store of this job wrote."""
    run = RunKey(agent=agent, key=json.dumps("k"), seq=0)
    head = (
        b'{"body":{"key":%s,"completed":true,'
        % json.dumps(run.action("forged").model_dump()).encode()
    )
    tail = b'},"kind":"action_state","v":1}'
    deep = head + b'"events":[' + b"[" * 100_000 + b"]" * 100_000 + b"]" + tail
    large = head + b'"events":[{"pad":"' + b"x" * 1_000_000 + b'"}]' + tail
    other = ActionState(key=run.action("other_job"), completed=True)
    signed = RecordCodec(b"their-secret", scope="another-job").encode(
        other.key.canonical().encode(), other
    )
    forged_key = run.action("forged").canonical().encode()
    return [
        (run, forged_key, deep),
        (run, forged_key, large),
        (run, other.key.canonical().encode(), signed),
    ]


def test_a_run_in_flight_finishes_past_forged_records(
    stores: Stores, request: pytest.FixtureRequest
) -> None:
    plan = agent_plan(h.three_calls)
    store = stores.first

    def write_forged_records() -> None:
        records = _forged(plan.name)
        if isinstance(store, InMemoryActionStateStore):
            for run, key, value in records:
                store.log.append(partition_for(run, store.partitions), key, value)
            return
        producer = KafkaProducer(
            bootstrap_servers=request.getfixturevalue("kafka_bootstrap"),
            max_request_size=4_000_000,
        )
        for run, key, value in records:
            partition = partition_for(run, store.partitions)
            producer.send(store.topic, key=key, value=value, partition=partition).get(30)
        producer.close()

    result, _ = crash_then_replay(
        plan, stores, {"n": 1}, hold="third", between=write_forged_records
    )

    assert result.error is None and result.output_values == [[2, 3, 4]]
    assert PROBE.counts == {"third": 1}  # first and second handed back, not made again
    reasons = [error.reason for error in stores.latest.restore(stores.marker).corrupt]
    # The Kafka store signs (its default): the unsigned records are refused before they are
    # parsed, and another job's signature does not verify. The memory store here has no secret:
    # it parses unsigned records, within the caps, and refuses signed ones unchecked.
    expected = {
        "kafka": ["record is not signed", "record of 1,000,", "HMAC does not match"],
        "memory": ["nested deeper than a record may be", "record of 1,000,", "record is signed"],
    }[request.node.callspec.params["stores"]]
    assert [reason[: len(start)] for reason, start in zip(reasons, expected, strict=True)] == (
        expected
    )
    assert "over the limit of 983,040" in reasons[1]
