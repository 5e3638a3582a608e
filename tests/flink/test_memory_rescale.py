"""A key's memory moves with the key when a job is restored from a savepoint at another
parallelism (docs/memory.md, "The keyed-state backend").

One job (Kafka input topic, Kafka action-state store) runs once per parallelism of a sequence,
each time started from the savepoint the run before stopped with. In every phase each key gets
one input, which writes a long-term memory item (and appends it to a short-term list); the
first also writes two short-term entries, ``brief`` (expires in :data:`BRIEF_TTL_S`) and
``lasting`` (in an hour). Every answer lists what the key's memory then holds: after a restore
at another parallelism -- a key group on a subtask that did not own it -- the key's own items of
every earlier phase, none of another key's (keys ``1`` and ``"1"`` are two keys), ``brief``
expired and ``lasting`` kept. The keys are chosen so that both subtasks of parallelism 2 own
some.

Slow (each phase starts a job: a few minutes on a loaded machine), so it runs from
``make memory-rescale``, not ``make test``: a split (1 -> 2), then a merge and a split
(2 -> 1 -> 2).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from pyflink.java_gateway import get_gateway

from examples.customer_memory import with_memory
from flink_agents.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents.durable.store import KeyGroupRange, canonical_json, key_group
from flink_agents.durable.store.store_config import StoreConfig
from flink_agents.flink import AgentsExecutionEnvironment, OperatorOptions
from tests.fixtures.upgrade.job import AppendLines, read_outputs
from tests.flink.conftest import produce_json, stop_with_savepoint

pytestmark = [pytest.mark.flink, pytest.mark.kafka]

MAX_PARALLELISM = 128
KEYS: list[Any] = [1, "1", "ada", "bob", "cyd", "dan", 7, "eve"]
BRIEF_TTL_S = 2.0
"""The short-term entry ``brief`` expires this long after the run that wrote it was admitted."""
WAIT_S = 300


@action(InputEvent)
async def keep_and_tell(event: InputEvent, ctx: RunnerContext) -> None:
    """Write the input's ``fact`` (and, in the ``first`` input, the short-term entries), then
    answer with everything the key's memory holds."""
    facts = ctx.long_term_memory["facts"]
    stm = ctx.short_term_memory
    text = event.input["fact"]
    await facts.add(text)
    stm.set("written", [*stm.get("written", []), text])
    if event.input["first"]:
        stm.set("brief", "soon gone", ttl=BRIEF_TTL_S)
        stm.set("lasting", "kept", ttl=3600)
    hits = await facts.search("fact", k=100)
    output = {
        "facts": sorted(hit.text for hit in hits),
        "count": len(facts),
        "written": stm.get("written"),
        "brief": stm.get("brief"),
        "lasting": stm.get("lasting"),
    }
    ctx.send_event(OutputEvent(output=output))


def _fact(key: Any, n: int) -> str:
    return f"{canonical_json(key)} fact {n}"


def _agent() -> Agent:
    agent = with_memory(Agent(name="memory_rescale"), dimensions=32)
    agent.add_action(keep_and_tell)
    return agent


def _run(
    make_flink_env: Any,
    *,
    parallelism: int,
    savepoint: Path | None,
    input_topic: str,
    store_topic: str,
    bootstrap: str,
    outputs: Path,
    expect: int,
    work: Path,
) -> Path:
    """Run the job at ``parallelism`` (from ``savepoint``) until ``outputs`` holds ``expect``
    answers, then stop it with a savepoint; returns the savepoint."""
    settings = {} if savepoint is None else {"execution.state-recovery.path": savepoint.as_uri()}
    env = make_flink_env(**settings)
    env.set_parallelism(parallelism)
    env.set_max_parallelism(MAX_PARALLELISM)
    agents = AgentsExecutionEnvironment(
        env,
        options=OperatorOptions(started_from_savepoint=savepoint is not None),
        store=StoreConfig(
            kind="kafka", bootstrap_servers=bootstrap, topic=store_topic, partitions=2
        ),
    )
    answers = (
        agents.from_kafka(input_topic, bootstrap_servers=bootstrap, key="k")
        .apply(_agent())
        .to_datastream()
        .map(AppendLines(str(outputs)))
        .uid("append-answers")
    )
    discarding = get_gateway().jvm.org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink
    answers._j_data_stream.sinkTo(discarding()).name("discard").uid("discard")
    client = env.execute_async(f"memory-rescale-p{parallelism}")
    deadline = time.monotonic() + WAIT_S
    while len(read_outputs(outputs)) < expect:
        if time.monotonic() > deadline:
            client.cancel().result()
            raise TimeoutError(f"{len(read_outputs(outputs))} of {expect} answers in {WAIT_S} s")
        time.sleep(0.1)
    return stop_with_savepoint(client, work / "savepoints")


def _by_key(outputs: Path) -> dict[Any, list[dict[str, Any]]]:
    """Each key's answers in ``outputs``, in the order its runs answered."""
    answers: dict[str, list[dict[str, Any]]] = {}
    for line in read_outputs(outputs):
        assert "error" not in line, line
        answers.setdefault(json.dumps(line["key"]), []).append(line["output"])
    return {json.loads(key): outputs for key, outputs in answers.items()}


SLOW = pytest.mark.skipif(
    os.environ.get("FLINK_AGENTS_SLOW_MEMORY") != "1",
    reason="slow (minutes): runs from `make memory-rescale`",
)


@SLOW
@pytest.mark.parametrize(
    "parallelisms",
    [pytest.param((1, 2), id="split"), pytest.param((2, 1, 2), id="merge-and-split")],
)
def test_every_key_keeps_its_memory_with_its_new_owner(
    make_flink_env: Any, kafka_bootstrap: str, tmp_path: Path, parallelisms: tuple[int, ...]
) -> None:
    owners = {
        subtask
        for key in KEYS
        for subtask in range(2)
        if key_group(canonical_json(key), MAX_PARALLELISM)
        in KeyGroupRange.of_subtask(subtask, 2, MAX_PARALLELISM)
    }
    assert owners == {0, 1}, "the keys must be split over both subtasks of parallelism 2"
    run = uuid.uuid4().hex[:12]
    job = {
        "input_topic": f"memory-rescale-in-{run}",
        "store_topic": f"memory-rescale-store-{run}",
        "bootstrap": kafka_bootstrap,
        "work": tmp_path,
    }
    savepoint: Path | None = None
    for phase, parallelism in enumerate(parallelisms):
        if phase == 1:
            # The first phase's runs were admitted before their answers were read: once
            # BRIEF_TTL_S has passed, the runs admitted from now on see `brief` expired.
            time.sleep(BRIEF_TTL_S)
        inputs = [{"k": key, "fact": _fact(key, phase), "first": phase == 0} for key in KEYS]
        produce_json(kafka_bootstrap, job["input_topic"], inputs)
        outputs = tmp_path / f"phase-{phase}.jsonl"
        savepoint = _run(
            make_flink_env,
            parallelism=parallelism,
            savepoint=savepoint,
            outputs=outputs,
            expect=len(KEYS),
            **job,
        )
        short_term = {"brief": "soon gone" if phase == 0 else None, "lasting": "kept"}
        mine = {key: [_fact(key, n) for n in range(phase + 1)] for key in KEYS}
        assert _by_key(outputs) == {
            key: [{"facts": mine[key], "count": phase + 1, "written": mine[key], **short_term}]
            for key in KEYS
        }, f"phase {phase}, at parallelism {parallelism}"
