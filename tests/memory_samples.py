"""Agents with long-term memory for the tests: a ``facts`` set over the hashing embedding, and
actions that remember, recall and forget; with extraction, the chat model ``extractor`` (a
scripted model that answers with the text it is given: a JSON list of facts "extracts" them)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from examples.customer_memory import with_memory
from flink_agents.agents import remember_run
from flink_agents.api import (
    Agent,
    ChatModelSetup,
    InputEvent,
    MemoryExtraction,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents.durable.identity import canonical_json
from flink_agents.plan import compile_agent
from flink_agents.plan.models import AgentPlan
from flink_agents.providers import ScriptedChatModelConnection
from flink_agents.runtime import KeyState, RunResult, Runtime

DIMENSIONS = 64
EXTRACTOR = "extractor"
"""The scripted extraction model's name (its counters: ``ScriptedChatModelConnection.stats``)."""


def memory_plan(
    *actions: Any,
    max_items: int | None = None,
    store: ResourceDescriptor | None = None,
    extraction: bool = False,
    extractor: type[ScriptedChatModelConnection] = ScriptedChatModelConnection,
    extractor_turns: list[dict[str, Any]] | None = None,
    remember_runs: bool = False,
    **options: Any,
) -> AgentPlan:
    """The plan of an agent ``memory`` made of ``actions``, with the ``facts`` set (in the key's
    state, or on the vector store ``store``; it remembers through the chat model ``extractor``
    with ``extraction``: by default it echoes the text it is given, else it plays
    ``extractor_turns``); ``remember_runs`` adds the built-in remember step into ``facts``."""
    settings = MemoryExtraction(chat_model=EXTRACTOR) if extraction else None
    agent = with_memory(
        Agent(name="memory", **options),
        DIMENSIONS,
        max_items,
        store=store,
        extraction=settings,
    )
    if extraction:
        agent.add_resource(
            "extractor_connection",
            ResourceType.CHAT_MODEL_CONNECTION,
            ResourceDescriptor.of(
                extractor, name=EXTRACTOR, turns=extractor_turns or [{"content": "$input"}]
            ),
        )
        agent.add_resource(
            EXTRACTOR,
            ResourceType.CHAT_MODEL,
            ResourceDescriptor.of(ChatModelSetup, connection="extractor_connection", model="x"),
        )
    for fn in actions:
        agent.add_action(fn)
    if remember_runs:
        agent.add_action(remember_run, config={"memory_set": "facts"})
    return compile_agent(agent)


@action(InputEvent)
async def remember(event: InputEvent, ctx: RunnerContext) -> None:
    """Add each of the input's ``facts``; outputs their ids."""
    facts = ctx.long_term_memory["facts"]
    ids = [await facts.add(text) for text in event.input["facts"]]
    ctx.send_event(OutputEvent(output=ids))


@action(InputEvent)
async def extract(event: InputEvent, ctx: RunnerContext) -> None:
    """Remember the input's ``text`` through the set's extraction model; outputs the ids."""
    ids = await ctx.long_term_memory["facts"].remember(event.input["text"], {"source": "run"})
    ctx.send_event(OutputEvent(output=ids))


def stored_facts(states: dict[str, KeyState]) -> dict[str, str]:
    """The ``facts`` items of every key (id -> text) in ``states``."""
    return {
        item_id: item.text
        for state in states.values()
        for item_id, item in state.long_term_memory["facts"].items()
    }


def run_keyed(
    plan: AgentPlan, inputs: list[tuple[Any, Any]], states: dict[str, KeyState] | None = None
) -> tuple[list[RunResult], dict[str, KeyState]]:
    """Run ``inputs`` (key, value) on one engine, from the key ``states`` given; returns the
    results in input order and every key's state afterwards (by canonical key)."""

    async def scenario() -> tuple[list[RunResult], dict[str, KeyState]]:
        engine = Runtime.build(plan).engine
        for key_json, state in (states or {}).items():
            engine.restore_key(json.loads(key_json), state)
        order = [engine.submit(key, value) for key, value in inputs]
        await engine.drain()
        results = {result.run_id: result for result in engine.take_results()}
        ends = {canonical_json(key): engine.snapshot_key(key) for key, _ in inputs}
        await engine.close()
        return [results[run] for run in order], {**(states or {}), **ends}

    return asyncio.run(scenario())
