"""Compaction of a key's long-term memory on the mini-cluster with the Kafka store, across a real
failure (docs/memory.md, "Compacting a key's memory on its timer"): each customer's second input
takes its ``facts`` past ``max_items``, which schedules a compaction on the key's timer; the job
checkpoints every 300 ms and fails once on purpose (``FailOnce`` of examples/demo.py) after
those inputs' outputs, before the compactions are due. Flink restores the checkpoint; every key
is compacted exactly once (one model call each) and its last input reads the compacted set.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import pytest
from pyflink.common import Encoder, Types
from pyflink.datastream.connectors.file_system import FileSink

from examples.customer_memory import with_memory
from examples.demo import FailOnce, read_outputs
from flink_agents.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    ChatRequest,
    InputEvent,
    MemoryCompaction,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents.durable.store import StoreConfig
from flink_agents.flink import AgentsExecutionEnvironment
from flink_agents.plan import compile_agent
from flink_agents.providers import ScriptedChatModelConnection
from tests.flink.conftest import job_spec_settings

pytestmark = [
    pytest.mark.flink,
    pytest.mark.kafka,
    pytest.mark.skipif(
        os.environ.get("FLINK_AGENTS_SLOW_MEMORY") != "1",
        reason="slow (about two minutes): runs from `make memory-rescale`",
    ),
]

CUSTOMERS = 4
TICKS = 40  # inputs of other keys, so the bounded source outlives the compactions' timers
RECORDS_PER_SECOND = 6
MERGED = ["merged fact"]


class WitnessedCompactor(ScriptedChatModelConnection):
    """The scripted compactor, writing a line per call to the file ``witness`` (the job's
    Python workers may run in another process): the customer its first item names."""

    witness: str

    async def chat(self, request: ChatRequest) -> ChatMessage:
        first_item = str(request.messages[-1].content).splitlines()[0]
        with open(self.witness, "a") as calls:
            calls.write(f"{time.time()} {first_item.split()[2]}\n")  # "1. fact <key> <n>"
        return await super().chat(request)


@action(InputEvent)
async def remember_or_read(event: InputEvent, ctx: RunnerContext) -> None:
    """Adds the input's ``facts`` (outputs the set's size), or outputs the set's texts."""
    given = event.input
    if "tick" in given:  # an output, so the failure comes soon after the crossings
        ctx.send_event(OutputEvent(output={"tick": given["tick"]}))
        return
    facts = ctx.long_term_memory["facts"]
    if given.get("read"):
        hits = await facts.search("fact", k=10)
        ctx.send_event(OutputEvent(output={"texts": sorted(hit.text for hit in hits)}))
        return
    for text in given["facts"]:
        await facts.add(text)
    ctx.send_event(OutputEvent(output={"count": len(facts)}))


def compacting_agent(witness: Path) -> Agent:
    compaction = MemoryCompaction(
        chat_model="compactor", max_items=3, keep_recent=1, delay_seconds=3
    )
    agent = with_memory(Agent(name="compacting_job"), 64, compaction=compaction)
    agent.add_resource(
        "compactor_connection",
        ResourceType.CHAT_MODEL_CONNECTION,
        ResourceDescriptor.of(
            WitnessedCompactor,
            name="compactor",
            witness=str(witness),
            turns=[{"content": json.dumps(MERGED)}],
        ),
    )
    agent.add_resource(
        "compactor",
        ResourceType.CHAT_MODEL,
        ResourceDescriptor.of(ChatModelSetup, connection="compactor_connection", model="c"),
    )
    agent.add_action(remember_or_read)
    return agent


def test_each_crossing_is_compacted_once_across_a_failover(
    make_flink_env, kafka_bootstrap: str, tmp_path: Path
) -> None:
    witness = tmp_path / "compactions.txt"
    witness.touch()
    checkpoints = tmp_path / "ckpt"
    env = make_flink_env(
        **job_spec_settings(
            checkpoints,
            checkpointing={"interval_ms": 300},
            restart_strategy={"delay_ms": 500},
        )
    )
    store = StoreConfig(
        kind="kafka",
        bootstrap_servers=kafka_bootstrap,
        topic=f"test-compaction-{uuid.uuid4().hex}",
    )
    customers = [f"c-{n}" for n in range(CUSTOMERS)]
    records = [
        {"k": key, "facts": [f"fact {key} {round * 2 + n}" for n in range(2)]}
        for round in range(2)
        for key in customers
    ]
    records += [{"k": f"tick-{n}", "tick": n} for n in range(TICKS)]
    records += [{"k": key, "read": True} for key in customers]
    agents = AgentsExecutionEnvironment(env, store=store)
    outputs = (
        agents.from_list(records, key="k", records_per_second=RECORDS_PER_SECOND)
        .apply(compile_agent(compacting_agent(witness)))
        .to_datastream()
    )
    marker = tmp_path / "failure-injected"
    outputs = outputs.map(
        FailOnce(str(marker), 2 * CUSTOMERS, str(checkpoints)), output_type=Types.STRING()
    )
    out_dir = tmp_path / "out"
    outputs.sink_to(FileSink.for_row_format(str(out_dir), Encoder.simple_string_encoder()).build())
    env.execute("compaction-failover")

    assert marker.exists(), "the injected failure did not happen"
    failed_at = float(marker.read_text())
    lines = read_outputs(out_dir)
    assert not [line for line in lines if "error" in line], lines
    counts = sorted(
        (line["key"], line["output"]["count"]) for line in lines if "count" in line["output"]
    )
    assert counts == sorted((key, n) for key in customers for n in (2, 4))  # 4: the crossing
    read = {line["key"]: line["output"]["texts"] for line in lines if "texts" in line["output"]}
    # The three older facts merged, the most recent kept.
    assert read == {key: sorted([f"fact {key} 3", *MERGED]) for key in customers}

    calls = [line.split() for line in witness.read_text().splitlines()]
    assert sorted(key for _, key in calls) == customers  # one model call per key
    assert min(float(at) for at, _ in calls) > failed_at  # due after the failure
