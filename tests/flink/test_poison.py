"""A poison input (its action fails on every attempt) and a malformed one on the mini-cluster:
each becomes an error record, also on the dead-letter topic, and the job ends instead of
crash-looping (the session's environment has no restart strategy: a failure would fail it)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition

from flink_agents.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents.flink.job import JobSpec
from flink_agents.flink.job_runner import build

pytestmark = [pytest.mark.flink, pytest.mark.kafka]


def _refuse(order: str) -> str:
    raise ValueError(f"order {order} is malformed")


@action(InputEvent)
async def handle_order(event: InputEvent, ctx: RunnerContext) -> None:
    order = event.input["order"]
    if order.startswith("poison"):
        await ctx.durable_execute_async(_refuse, order)  # fails on every attempt
    ctx.send_event(OutputEvent(output=f"shipped {order}"))


ORDERS = Agent(name="orders", error_policy="emit")
ORDERS.add_action(handle_order)


def _read_topic(bootstrap: str, topic: str, expected: int) -> list[dict]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=30_000)
    try:
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
        consumer.assign(partitions)
        consumer.seek_to_beginning()
        found = []
        for message in consumer:
            found.append(json.loads(message.value))
            if len(found) >= expected:
                break
        return found
    finally:
        consumer.close()


def test_a_poison_input_becomes_an_error_record_on_the_dead_letter_topic(
    fresh_flink_env, kafka_bootstrap: str, tmp_path: Path
) -> None:
    run = uuid.uuid4().hex[:8]
    inputs = tmp_path / "orders.jsonl"
    lines = ['{"order": "a-1"}', '{"order": "poison-2"}', "not json", '{"order": "a-3"}']
    inputs.write_text("\n".join(lines) + "\n")
    spec = JobSpec(
        name="poison",
        agent="tests.flink.test_poison:ORDERS",
        source={"kind": "list", "path": str(inputs)},
        key="order",
        sink={"kind": "file", "path": str(tmp_path / "out")},
        dead_letter={"topic": f"test-dead-letter-{run}", "bootstrap_servers": kafka_bootstrap},
        store={
            "kind": "kafka",
            "bootstrap_servers": kafka_bootstrap,
            "topic": f"test-poison-{run}",
        },
    )
    build(spec, fresh_flink_env)
    fresh_flink_env.execute("poison")  # raises if the job failed: no crash loop, no failure

    outputs = [
        json.loads(line)
        for part in (tmp_path / "out").rglob("*")
        if part.is_file() and not part.name.startswith(".")
        for line in part.read_text().splitlines()
    ]
    answers = sorted(o["output"] for o in outputs if "output" in o)
    # A bad record has no key (its record leaves the field out).
    errors = sorted((o.get("key", ""), o["error"]["error_type"]) for o in outputs if "error" in o)
    assert answers == ["shipped a-1", "shipped a-3"]
    assert errors == [("", "BadRecord"), ("poison-2", "ValueError")]
    dead = _read_topic(kafka_bootstrap, spec.dead_letter.topic, expected=2)
    assert sorted((o.get("key", ""), o["error"]["error_type"]) for o in dead) == errors
