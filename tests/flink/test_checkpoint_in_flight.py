"""A checkpoint completes while a model call of several seconds is in flight.

The input comes from a real Kafka topic (an unbounded source, so the job stays in its running
phase); the scripted model takes 6 s; checkpoints are taken every 300 ms. A completed checkpoint
(its `_metadata` file) must appear while the model's own counter shows the call still running.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from flink_agents.flink import AgentsExecutionEnvironment
from flink_agents.providers.scripted import ScriptedChatModelConnection
from tests.flink.conftest import completed_checkpoints, filesystem_checkpoints, produce_json
from tests.sample_agents import react_agent

pytestmark = [pytest.mark.flink, pytest.mark.kafka]

MODEL = "slow-for-checkpoint"
LATENCY_S = 6.0


def test_checkpoint_completes_during_a_slow_model_call(
    make_flink_env, kafka_bootstrap: str, tmp_path: Path
) -> None:
    topic = f"ckpt-in-flight-{uuid.uuid4().hex[:8]}"
    produce_json(kafka_bootstrap, topic, [{"id": "k1", "city": "Oslo"}])

    checkpoints = tmp_path / "ckpt"
    env = make_flink_env(**filesystem_checkpoints(checkpoints, "300 ms"))
    ScriptedChatModelConnection.reset_stats(MODEL)
    agent = react_agent(
        [{"content": '{"city": "$input", "total": 1}'}], latency=LATENCY_S, name=MODEL
    )
    agents = AgentsExecutionEnvironment(env)
    outputs = agents.from_kafka(topic, bootstrap_servers=kafka_bootstrap, key="id").apply(agent)

    results = outputs.to_datastream().execute_and_collect()
    try:
        stats = ScriptedChatModelConnection.stats(MODEL)
        deadline = time.monotonic() + 60
        while stats.in_flight == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert stats.in_flight == 1, "the model call never started"
        call_started = time.monotonic()
        before = set(completed_checkpoints(checkpoints))

        completed_during_call: list[Path] = []
        while stats.in_flight == 1 and not completed_during_call:
            completed_during_call = [
                p for p in completed_checkpoints(checkpoints) if p not in before
            ]
            time.sleep(0.05)
        still_in_flight = stats.in_flight == 1 and stats.total == 1
        waited = time.monotonic() - call_started

        assert completed_during_call, "no checkpoint completed while the model call was running"
        assert still_in_flight, "the call had already finished: the checkpoint may have waited"
        assert waited < LATENCY_S

        answer = json.loads(next(results))
        assert answer["output"] == {"city": "Oslo", "total": 1}
    finally:
        results.close()
