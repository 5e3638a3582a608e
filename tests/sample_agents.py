"""Agents, actions, tools and resources the tests reference by ``module:qualname``."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from pydantic import BaseModel

from flink_agents.agents import ReActAgent
from flink_agents.agents.react import DEFAULT_OUTPUT_RETRIES
from flink_agents.api import (
    Agent,
    ChatModelSetup,
    Event,
    InputEvent,
    OutputEvent,
    Prompt,
    Resource,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents.api.chat import ChatMessage, ChatRequest
from flink_agents.api.memory import SHORT_TERM_MEMORY_TTL_KEY
from flink_agents.providers.scripted import ScriptedChatModelConnection


class Doubled(Event):
    value: int


class EchoAgent(Agent):
    """InputEvent -> Doubled -> OutputEvent; remembers a per-key count."""

    @action(InputEvent)
    def double(event: InputEvent, ctx: RunnerContext) -> None:
        ctx.send_event(Doubled(value=event.input["n"] * 2))

    @action(Doubled)
    async def emit(event: Doubled, ctx: RunnerContext) -> None:
        await asyncio.sleep(0)
        count = ctx.short_term_memory.get("count", 0) + 1
        ctx.short_term_memory.set("count", count)
        ctx.send_event(OutputEvent(output={"doubled": event.value, "count": count}))


class Unheard(Event):
    note: str


@action(InputEvent)
def answer_and_send_unheard(event: InputEvent, ctx: RunnerContext) -> None:
    """Answers, and sends an event nobody listens to (undeclared in ``sends``: it compiles)."""
    ctx.send_event(Unheard(note="nobody listens"))
    ctx.send_event(OutputEvent(output=event.input["n"]))


def unheard_agent() -> Agent:
    """An agent whose one action answers and sends an event nobody listens to."""
    agent = Agent(name="leaky")
    agent.add_action(answer_and_send_unheard)
    return agent


@action(InputEvent)
def fail_on_negative(event: InputEvent, ctx: RunnerContext) -> None:
    """Remembers the input, then raises for negative ones (memory write must not commit)."""
    ctx.short_term_memory.set("last", event.input["n"])
    if event.input["n"] < 0:
        raise ValueError(f"negative input {event.input['n']}")
    ctx.send_event(OutputEvent(output=event.input["n"]))


def add(a: int, b: int = 1) -> int:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number,
            defaulting to one.

    Returns:
        The sum.
    """
    return a + b


async def lookup(city: str) -> dict[str, Any]:
    """Look a city up.

    Args:
        city: City name.
    """
    await asyncio.sleep(0)
    return {"city": city, "population": len(city) * 1000}


class Answer(BaseModel):
    city: str
    total: int


class ExternalReviewer(Resource):
    """Stands in for a sub-agent resource (declared now, executed by later work)."""

    resource_type = ResourceType.AGENT
    endpoint: str = ""


GATE: asyncio.Event | None = None
"""Set by a test to hold ``gated`` until it opens the gate."""


@action(InputEvent)
async def gated(event: InputEvent, ctx: RunnerContext) -> None:
    ctx.short_term_memory.set("seen", event.input)
    assert GATE is not None
    await GATE.wait()
    ctx.send_event(OutputEvent(output=event.input))


class RecordingChatConnection(ScriptedChatModelConnection):
    """A scripted model that also keeps the requests it was sent (clear ``requests`` first)."""

    requests: ClassVar[list[ChatRequest]] = []

    async def chat(self, request: ChatRequest) -> ChatMessage:
        self.requests.append(request)
        return await super().chat(request)


def add_scripted_connection(
    agent: Agent,
    name: str,
    turns: list[dict[str, Any]],
    *,
    resource: str = "conn",
    connection: type[ScriptedChatModelConnection] = ScriptedChatModelConnection,
    **options: Any,
) -> None:
    """Add the chat model connection ``resource``: the scripted model ``name`` (its counters'
    name) playing ``turns``; ``options`` are its other arguments, e.g. ``latency_seconds``."""
    agent.add_resource(
        resource,
        ResourceType.CHAT_MODEL_CONNECTION,
        connection,
        name=name,
        turns=turns,
        **options,
    )


def react_agent(
    turns: list[dict[str, Any]],
    *,
    latency: float = 0.0,
    name: str = "react",
    structured: bool = True,
    output_retries: int = DEFAULT_OUTPUT_RETRIES,
    connection: type[ScriptedChatModelConnection] = ScriptedChatModelConnection,
) -> ReActAgent:
    """A ReAct agent over the scripted model named ``name`` (of class ``connection``), with the
    ``add`` and ``lookup`` tools; the user message is the input's ``city``; ``structured``
    answers are ``Answer``s."""
    agent = ReActAgent(
        name="react_test",
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection="conn", model="m"),
        prompt=Prompt(text="{city}"),
        output_schema=Answer if structured else None,
        tools=[add, lookup],
        output_retries=output_retries,
    )
    add_scripted_connection(agent, name, turns, connection=connection, latency_seconds=latency)
    return agent


@action(InputEvent)
async def wait_then_answer(event: InputEvent, ctx: RunnerContext) -> None:
    """Waits ``wait`` seconds, then outputs ``n``; raises for a negative ``n``."""
    await asyncio.sleep(event.input["wait"])
    if event.input["n"] < 0:
        raise ValueError(f"negative input {event.input['n']}")
    ctx.send_event(OutputEvent(output=event.input["n"]))


@action(InputEvent)
def remember(event: InputEvent, ctx: RunnerContext) -> None:
    """Sets what the input says (``set``: path -> value, ``ttl``: seconds for them), then
    answers with what the memory holds at the paths ``read``."""
    memory = ctx.short_term_memory
    for path, value in event.input.get("set", {}).items():
        memory.set(path, value, ttl=event.input.get("ttl"))
    ctx.send_event(OutputEvent(output={p: memory.get(p) for p in event.input.get("read", [])}))


def remembering_agent(ttl_s: float | None = None) -> Agent:
    """An agent of the one action :func:`remember`, its short-term memory expiring after
    ``ttl_s`` if given."""
    agent = Agent(name="ttl", config={} if ttl_s is None else {SHORT_TERM_MEMORY_TTL_KEY: ttl_s})
    agent.add_action(remember)
    return agent
