"""A slow sink behind the agent operator: back-pressure reaches the operator, which keeps its
runs in flight within its bound, checkpoints keep completing, and no output is lost or doubled.

The input is a real Kafka topic (an unbounded source, so the job stays running and takes
checkpoints); the model answers in 20 ms, the sink takes 60 ms per record in a task of its own
(a network boundary, so the pressure travels through Flink's buffers as in a real job). Records
of 4 KB in 4 KB network buffers keep those buffers small enough for the pressure to reach the
agent operator within 150 inputs.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from flink_agents.flink import AgentsExecutionEnvironment
from flink_agents.providers.scripted import ScriptedChatModelConnection
from flink_agents.runtime.options import OperatorOptions
from tests.flink.conftest import completed_checkpoints, filesystem_checkpoints, produce_json
from tests.sample_agents import react_agent

pytestmark = [pytest.mark.flink, pytest.mark.kafka]

MODEL = "behind-a-slow-sink"
INPUTS = 150
BOUND = 4
SINK_SECONDS = 0.06


def slow_sink(value: str) -> str:
    """The sink's work: 60 ms a record."""
    time.sleep(SINK_SECONDS)
    return value


def _last_checkpoint(folder: Path) -> int:
    """The number of the newest completed checkpoint (Flink deletes the ones it subsumes)."""
    done = [int(p.parent.name.removeprefix("chk-")) for p in completed_checkpoints(folder)]
    return max(done, default=0)


def test_a_slow_sink_slows_the_agent_without_loss_and_checkpoints_go_on(
    make_flink_env, kafka_bootstrap: str, tmp_path: Path
) -> None:
    topic = f"backpressure-{uuid.uuid4().hex[:8]}"
    # 4 KB records in 4 KB network buffers: a few dozen fill the buffers between the tasks
    tickets = [{"id": f"t{n}", "city": f"c{n}-" + "x" * 4096} for n in range(INPUTS)]
    produce_json(kafka_bootstrap, topic, tickets)

    checkpoints = tmp_path / "ckpt"
    env = make_flink_env(
        **filesystem_checkpoints(checkpoints, "500 ms"),
        **{"taskmanager.memory.segment-size": "4kb"},
    )
    ScriptedChatModelConnection.reset_stats(MODEL)
    agent = react_agent([{"content": '{"city": "$input", "total": 1}'}], latency=0.02, name=MODEL)
    agents = AgentsExecutionEnvironment(env, options=OperatorOptions(max_in_flight=BOUND))
    outputs = agents.from_kafka(topic, bootstrap_servers=kafka_bootstrap, key="id").apply(agent)
    sunk = outputs.to_datastream().map(slow_sink).disable_chaining()

    results = sunk.execute_and_collect()
    seen: list[str] = []
    calls_at_half = 0
    try:
        first = json.loads(next(results))
        seen.append(first["key"])
        before = _last_checkpoint(checkpoints)
        for _ in range(INPUTS - 1):
            seen.append(json.loads(next(results))["key"])
            if len(seen) == INPUTS // 2:
                calls_at_half = ScriptedChatModelConnection.stats(MODEL).total
        during = _last_checkpoint(checkpoints) - before
    finally:
        results.close()

    assert sorted(seen) == sorted(f"t{n}" for n in range(INPUTS))  # each once, none lost
    # The sink alone needs 150 x 60 ms = 9 s, the agent alone under 1 s: that the agent had not
    # finished when half the outputs were through the sink is the pressure reaching it.
    assert calls_at_half < INPUTS, "the agent ran ahead unhindered: no back-pressure reached it"
    stats = ScriptedChatModelConnection.stats(MODEL)
    assert stats.total == INPUTS
    assert 1 <= stats.max_in_flight <= BOUND
    assert during >= 3, f"only {during} checkpoint(s) completed under back-pressure"
