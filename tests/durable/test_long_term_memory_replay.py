"""Long-term memory through the real store path (``DurableCalls`` over the in-memory store and
over Kafka, the ``stores`` fixture): crashes at seeded moments never duplicate an item, a replay
shows the model the context the live run saw however memory grew since, and a replayed
``delete_key`` deletes again."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from examples.customer_memory import build_agent
from flink_agents.api import (
    ChatMessage,
    Event,
    InputEvent,
    OutputEvent,
    RunnerContext,
    action,
)
from flink_agents.api.chat import ChatRequest
from flink_agents.api.long_term_memory import StoredMemory
from flink_agents.durable.identity import CallIdentity, canonical_json
from flink_agents.plan import compile_agent
from flink_agents.providers.hashing_embeddings import hashed_vector
from flink_agents.runtime import Runtime, run_local
from flink_agents.testing import Stores, crash_and_replay, resume
from tests.memory_samples import memory_plan, remember, stored_facts
from tests.sample_agents import RecordingChatConnection

KEYS = 10
RUNS = 100
FACTS_PER_RUN = 3


def tickets() -> list[dict[str, Any]]:
    """100 runs over 10 customers, three facts each (300 distinct texts)."""
    return [
        {
            "customer": f"c{run % KEYS}",
            "facts": [f"customer c{run % KEYS} fact {run}-{n}" for n in range(FACTS_PER_RUN)],
        }
        for run in range(RUNS)
    ]


@pytest.mark.parametrize("seed", range(5))
def test_crashes_at_seeded_moments_leave_exactly_one_item_per_fact(
    stores: Stores, seed: int
) -> None:
    crash_at = random.Random(seed).randint(1, RUNS * FACTS_PER_RUN)  # the n-th embedding call
    inputs = tickets()

    result = crash_and_replay(
        memory_plan(remember), inputs, key="customer", crash_at=crash_at, stores=stores
    )

    assert result.crashed
    assert result.reinvoked() == set()
    stored = stored_facts(result.key_states)
    written = [item_id for run in result.results for item_id in run.output_values[0]]
    assert len(stored) == len(written) == RUNS * FACTS_PER_RUN
    assert set(stored) == set(written)  # by id: each write once, none twice
    # Every id is the one the run's identity gives its write, live or replayed.
    assert set(stored) == {
        CallIdentity(
            run.run_id, run.run_id.input_event_id, "remember", f"memory:facts:add:{n}"
        ).digest()
        for run in result.results
        for n in range(FACTS_PER_RUN)
    }
    assert sorted(stored.values()) == sorted(text for run in inputs for text in run["facts"])
    for key, state in result.key_states.items():  # each customer's facts with its key
        texts = [item.text for item in state.long_term_memory["facts"].values()]
        assert len(texts) == RUNS // KEYS * FACTS_PER_RUN
        assert all(text.startswith(f"customer {json.loads(key)} ") for text in texts)


class HangingChat(RecordingChatConnection):
    """Records every request; while ``hang`` is set, never answers (the process dies with the
    prompt sent and the reply not recorded)."""

    hang: ClassVar[bool] = False

    async def chat(self, request: ChatRequest) -> ChatMessage:
        self.requests.append(request)
        if HangingChat.hang:
            await asyncio.Event().wait()  # until the engine is closed
        return await super(RecordingChatConnection, self).chat(request)


@pytest.fixture
def recorded_requests() -> Iterator[list[ChatRequest]]:
    RecordingChatConnection.requests.clear()
    HangingChat.hang = False
    yield RecordingChatConnection.requests
    RecordingChatConnection.requests.clear()
    HangingChat.hang = False


FIRST = {"customer": "ada", "text": "My router is an XR-500 and the wifi keeps dropping."}
SECOND = {"customer": "ada", "text": "Which firmware should I install on my router?"}
LATER = "Firmware question: which router firmware should I install? I have an XR-900 router."


def test_a_forced_replay_after_more_writes_shows_the_model_byte_identical_context(
    stores: Stores, recorded_requests: list[ChatRequest]
) -> None:
    plan = compile_agent(build_agent(HangingChat))

    async def scenario() -> None:
        engine = Runtime.build(plan, store=stores.first).engine
        engine.submit("ada", FIRST)
        await engine.drain()
        HangingChat.hang = True
        engine.submit("ada", SECOND)
        running = asyncio.ensure_future(engine.drain())
        while len(recorded_requests) < 2:  # the second ticket's prompt reached the model
            await asyncio.sleep(0.01)
        state = engine.snapshot_key("ada")  # the checkpoint: the second ticket pending
        running.cancel()
        await engine.close()
        HangingChat.hang = False
        # Memory grew before the replay: a fact nearer to the second ticket's question.
        grown = dict(state.long_term_memory["facts"])
        grown["later"] = StoredMemory(text=LATER, embedding=hashed_vector(LATER, 256))
        state.long_term_memory = {"facts": grown}
        result, after = await resume(plan, stores.restored(), "ada", state)
        assert result.output_values[0]["remembered"] == [FIRST["text"]]
        assert len(after.long_term_memory["facts"]) == 3
        # Control: a new run asking the same finds the newer fact (a search that was not
        # recorded would have shown it to the model on the replay too).
        engine = Runtime.build(plan).engine
        engine.restore_key("ada", after)
        engine.submit("ada", SECOND)
        await engine.drain()
        [control] = engine.take_results()
        await engine.close()
        assert LATER in control.output_values[0]["remembered"]

    asyncio.run(scenario())
    live, replayed = recorded_requests[1], recorded_requests[2]
    assert replayed.model_dump_json() == live.model_dump_json()
    assert LATER not in replayed.messages[-1].content
    assert LATER in recorded_requests[3].messages[-1].content


@action(InputEvent)
async def forget(event: InputEvent, ctx: RunnerContext) -> None:
    ctx.long_term_memory.delete_key()
    ctx.send_event(Forgotten())


class Forgotten(Event):
    """The key's memory was deleted."""


@action(Forgotten)
async def confirm(event: Forgotten, ctx: RunnerContext) -> None:
    await ctx.durable_execute_async(_confirm, call_id="confirm")
    ctx.send_event(OutputEvent(output=len(ctx.long_term_memory["facts"])))


async def _confirm() -> str:
    return "done"


@action(InputEvent)
async def remember_or_forget(event: InputEvent, ctx: RunnerContext) -> None:
    if "facts" in event.input:
        await remember(event, ctx)
    else:
        await forget(event, ctx)


def test_a_replayed_delete_key_deletes_the_keys_items_again(stores: Stores) -> None:
    plan = memory_plan(remember_or_forget, confirm)
    inputs = [
        {"customer": "ada", "facts": ["one", "two"]},
        {"customer": "bob", "facts": ["kept"]},
        {"customer": "ada", "forget": True},
    ]

    result = crash_and_replay(
        plan,
        inputs,
        key="customer",
        crash_at=lambda call: call.identity.call_id == "confirm",
        stores=stores,
    )

    assert result.crashed
    assert result.outputs()[2] == [0]
    assert result.key_states[canonical_json("ada")].long_term_memory == {}
    assert len(result.key_states[canonical_json("bob")].long_term_memory["facts"]) == 1


def test_the_example_answers_the_second_ticket_from_the_first_over_the_store(
    stores: Stores,
) -> None:
    tickets = [FIRST, {"customer": "bob", **{"text": SECOND["text"]}}, SECOND]
    results = run_local(build_agent(), tickets, key="customer", store=stores.first)
    answers = [result.output_values[0]["answer"] for result in results]
    assert answers == [
        "Thanks, noted. We are looking into it.",
        "Which router model do you have?",
        "For your XR-500: install firmware 2.4.",
    ]
