"""Compaction of a key's long-term memory on the key's timer (docs/memory.md, "Compacting a
key's memory"), through the keyed logic and the real store path (in memory and on Kafka): a run
that takes a set past ``max_items`` schedules one compaction, which merges the older items with
one model call; across a crash the compaction happens once per crossing and the model is asked
once.

Driven like tests/runtime/test_timers.py (keyed state in a dict, a store log shared by the
attempts).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any, ClassVar

import pytest

from examples.customer_memory import with_memory
from flink_agents.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    ChatRequest,
    LongTermMemorySetup,
    MemoryCompaction,
    ResourceDescriptor,
    ResourceType,
)
from flink_agents.durable.identity import canonical_json
from flink_agents.durable.store import InMemoryLog, StoreConfig
from flink_agents.observability import EventLog, MetricsListener
from flink_agents.observability.sinks.metrics import (
    MEMORY_COMPACTIONS,
    MEMORY_ITEMS_AFTER_COMPACTION,
    MEMORY_ITEMS_BEFORE_COMPACTION,
)
from flink_agents.plan import compile_agent
from flink_agents.plan.errors import PlanValidationError
from flink_agents.plan.models import AgentPlan
from flink_agents.providers import ScriptedChatModelConnection
from flink_agents.runtime import Runtime
from flink_agents.runtime.compaction_runs import COMPACTED_FROM, compaction_input
from flink_agents.runtime.keyed import SavedKey
from tests.memory_samples import DIMENSIONS, memory_plan, remember, run_keyed
from tests.observability.sinks.test_metrics import RecordingSink
from tests.runtime.test_timers import Timers

COMPACTOR = "compactor"
MERGED = ["merged: early facts", "merged: middle facts"]


class RecordingCompactor(ScriptedChatModelConnection):
    """The scripted compactor, keeping the user message of every request it is sent."""

    shown: ClassVar[list[str]] = []

    async def chat(self, request: ChatRequest) -> ChatMessage:
        self.shown.append(str(request.messages[-1].content))
        return await super().chat(request)


def compaction_plan(max_items: int = 3, keep_recent: int = 1) -> AgentPlan:
    """The ``remember`` agent whose ``facts`` set is compacted a minute after a run takes it
    past ``max_items``, by a scripted model answering :data:`MERGED`."""
    compaction = MemoryCompaction(
        chat_model=COMPACTOR, max_items=max_items, keep_recent=keep_recent, delay_seconds=60
    )
    agent = with_memory(Agent(name="memory"), DIMENSIONS, compaction=compaction)
    agent.add_resource(
        "compactor_connection",
        ResourceType.CHAT_MODEL_CONNECTION,
        ResourceDescriptor.of(
            RecordingCompactor, name=COMPACTOR, turns=[{"content": json.dumps(MERGED)}]
        ),
    )
    agent.add_resource(
        COMPACTOR,
        ResourceType.CHAT_MODEL,
        ResourceDescriptor.of(ChatModelSetup, connection="compactor_connection", model="c"),
    )
    agent.add_action(remember)
    return compile_agent(agent)


PLAN = compaction_plan()


@pytest.fixture(autouse=True)
def fresh_compactor() -> None:
    ScriptedChatModelConnection.reset_stats(COMPACTOR)
    RecordingCompactor.shown.clear()


@pytest.fixture(params=["memory", pytest.param("kafka", marks=pytest.mark.kafka)])
def attempts(request, monkeypatch):
    """Opens attempt ``n`` of the compacting agent over keyed state ``table``; the attempts
    share one store's log: in memory, or a fresh topic of the real Kafka broker."""
    log = InMemoryLog()
    store = None
    if request.param == "kafka":
        topic = f"test-compaction-{uuid.uuid4().hex[:12]}"
        bootstrap = request.getfixturevalue("kafka_bootstrap")
        store = StoreConfig(kind="kafka", bootstrap_servers=bootstrap, topic=topic, partitions=2)
    return lambda table, n: Timers(monkeypatch, log, table, n, store, PLAN)


def saved(table: dict, key: Any) -> SavedKey:
    return SavedKey.model_validate_json(table[json.dumps(key)])


def facts(table: dict, key: Any) -> list[tuple[str, Any]]:
    """The key's ``facts``: (text, how many items it merged) in the order they were written."""
    items = saved(table, key).runs.long_term_memory.get("facts", {})
    return [(item.text, item.metadata.get(COMPACTED_FROM)) for item in items.values()]


def settle(attempt: Timers, key: Any, timeout: float = 10.0) -> None:
    """Visit the key until none of its inputs is pending (a compaction emits no output)."""
    deadline = time.monotonic() + timeout
    while saved(attempt.table, key).runs.pending:
        assert time.monotonic() < deadline, "the key's runs did not finish"
        attempt.visit(key)
        time.sleep(0.02)


def remember_facts(attempt: Timers, key: Any, *texts: str) -> None:
    attempt.send(key, {"facts": list(texts)})
    attempt.answers(key)


def test_a_run_taking_a_set_past_max_items_schedules_one_compaction_of_its_older_items(attempts):
    with attempts({}, 0) as attempt:
        remember_facts(attempt, "ada", "f1", "f2", "f3")  # at max_items: no compaction
        assert attempt.follow_up_timers == []
        remember_facts(attempt, "ada", "f4")  # the crossing
        [at] = attempt.follow_up_timers
        remember_facts(attempt, "ada", "f5")  # still past it: no second request
        assert attempt.follow_up_timers == [at]
        [scheduled] = saved(attempt.table, "ada").runs.scheduled
        assert scheduled.input == compaction_input("facts")

        assert attempt.fire("ada", at) == []  # a compaction has no output
        settle(attempt, "ada")
        table = attempt.table
    # The four older items merged into the model's facts (first), the most recent one kept.
    assert facts(table, "ada") == [("f5", None), (MERGED[0], 4), (MERGED[1], 4)]
    assert saved(table, "ada").runs.scheduled == []
    assert RecordingCompactor.shown == ["1. f1\n2. f2\n3. f3\n4. f4"]


def test_earlier_compactions_facts_are_merged_first_at_the_next_crossing(attempts):
    with attempts({}, 0) as attempt:
        remember_facts(attempt, "ada", "f1", "f2", "f3", "f4")
        [first] = attempt.follow_up_timers
        attempt.fire("ada", first)
        settle(attempt, "ada")  # f4, then the two merged facts: 3 items
        remember_facts(attempt, "ada", "f5")  # the second crossing
        [_, second] = attempt.follow_up_timers
        attempt.fire("ada", second)
        settle(attempt, "ada")
        table = attempt.table
    assert RecordingCompactor.shown[1] == f"1. {MERGED[0]}\n2. {MERGED[1]}\n3. f4"
    assert [text for text, _ in facts(table, "ada")] == ["f5", *MERGED]


def test_a_crash_in_the_compaction_replays_it_without_asking_the_model_again(attempts):
    with attempts({}, 0) as first:
        remember_facts(first, "ada", "f1", "f2", "f3", "f4")
        [at] = first.follow_up_timers
        first.fire("ada", at)  # the compaction's input is pending in the key's state
        checkpoint = dict(first.table)
        settle(first, "ada")  # its model call recorded; then the task died before a checkpoint

    with attempts(checkpoint, 1) as second:
        assert [p.input for p in saved(checkpoint, "ada").runs.pending] == [
            compaction_input("facts")
        ]
        settle(second, "ada")  # the restored input runs again, with its seq
        assert second.follow_up_timers == []
        table = second.table
    assert facts(table, "ada") == [("f4", None), (MERGED[0], 3), (MERGED[1], 3)]
    assert ScriptedChatModelConnection.stats(COMPACTOR).total == 1  # handed back on replay


def test_a_crash_before_the_crossing_run_was_checkpointed_schedules_its_compaction_once(attempts):
    with attempts({}, 0) as first:
        remember_facts(first, "ada", "f1", "f2", "f3")
        first.send("ada", {"facts": ["f4"]})
        checkpoint = dict(first.table)  # the crossing run in flight
        first.answers("ada")
        [live_at] = first.follow_up_timers  # scheduled live, lost with the task

    with attempts(checkpoint, 1) as second:
        second.answers("ada")  # the crossing run replays and commits once
        [at] = second.follow_up_timers
        [scheduled] = saved(second.table, "ada").runs.scheduled
        second.fire("ada", max(at, live_at))
        settle(second, "ada")
        assert second.fire("ada", max(at, live_at) + 60_000) == []
        table = second.table
    assert scheduled.input == compaction_input("facts")
    assert facts(table, "ada") == [("f4", None), (MERGED[0], 3), (MERGED[1], 3)]
    assert ScriptedChatModelConnection.stats(COMPACTOR).total == 1


def test_a_compaction_is_counted_in_the_metrics() -> None:
    metrics, sink = MetricsListener(), RecordingSink()

    async def scenario() -> None:
        engine = Runtime.build(PLAN, event_log=EventLog([metrics])).engine
        engine.submit("ada", {"facts": ["f1", "f2", "f3", "f4", "f5"]})
        engine.submit("ada", compaction_input("facts"))
        await engine.drain()
        [crossing, compaction] = engine.take_results()
        assert [s.input for s in crossing.scheduled] == [compaction_input("facts")]
        assert compaction.outputs == [] and compaction.scheduled == ()
        await engine.close()

    asyncio.run(scenario())
    metrics.publish(sink)
    assert sink.counters[MEMORY_COMPACTIONS] == 1
    assert sink.samples[MEMORY_ITEMS_BEFORE_COMPACTION] == [5]
    assert sink.samples[MEMORY_ITEMS_AFTER_COMPACTION] == [3]  # f5 and the two merged facts


def test_keep_recent_leaves_at_least_two_items_to_merge() -> None:
    with pytest.raises(ValueError, match="keep_recent"):
        MemoryCompaction(chat_model="c", max_items=3, keep_recent=2)


def test_a_compacted_set_on_a_vector_store_is_refused_at_compile(tmp_path: Any) -> None:
    agent = with_memory(Agent(name="memory"), DIMENSIONS)
    agent.add_resource(
        "memory_store",
        ResourceType.VECTOR_STORE,
        ResourceDescriptor.of("flink_agents.providers.chroma:ChromaVectorStore", path="x"),
    )
    agent.add_resource(
        "notes",
        ResourceType.LONG_TERM_MEMORY,
        ResourceDescriptor.of(
            LongTermMemorySetup,
            embedding_model="embedding_model",
            backend="vector_store",
            vector_store="memory_store",
            compaction=MemoryCompaction(chat_model="embedding_model", max_items=10),
        ),
    )
    agent.add_action(remember)
    with pytest.raises(PlanValidationError) as error:
        compile_agent(agent)
    assert any(
        issue.path == "/resources/notes/arguments/compaction"
        and "compaction is for backend 'keyed_state'" in issue.message
        for issue in error.value.issues
    ), error.value.issues


def test_a_compaction_of_a_set_no_longer_compacted_does_nothing() -> None:
    """A follow-up kept in a key's state, restored with a plan without the set's compaction."""
    [result], states = run_keyed(memory_plan(remember), [("ada", compaction_input("facts"))])
    assert (result.outputs, result.error) == ([], None)
    assert states[canonical_json("ada")].long_term_memory == {}
