"""The agent the replay tests record and then change: a model call, a tool call, an output.

Its behaviour follows :data:`NOW` (the code "as it is now"); a test changes a field to stand
for an edit to the agent between recording and replay. :data:`CALLS` counts real invocations.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from flink_agents.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents.plan.compile import compile_agent
from flink_agents.plan.models import AgentPlan

CALLS: Counter[str] = Counter()


@dataclass
class Behaviour:
    prompt: str = "You answer in one sentence."
    ask_time_too: bool = False
    output_format: str = "{reply} ({weather})"
    count_visits: bool = False
    fail_after_calls: bool = False
    """The action raises once its calls are made (a bug introduced since the recording)."""
    chat_error: str | None = None
    """The model raises this (a live call that fails)."""


NOW = Behaviour()


async def chat(messages: list[dict[str, str]]) -> str:
    """A model that follows its system prompt: in French when asked to."""
    CALLS["chat"] += 1
    if NOW.chat_error is not None:
        raise RuntimeError(NOW.chat_error)
    if "French" in messages[0]["content"]:
        return f"Il fait beau à {messages[-1]['content']}."
    return f"It is nice in {messages[-1]['content']}."


async def weather(city: str) -> str:
    CALLS["weather"] += 1
    return f"{len(city) * 3} degrees"


async def local_time(city: str) -> str:
    CALLS["local_time"] += 1
    return "12:00"


@action(InputEvent)
async def answer(event: InputEvent, ctx: RunnerContext) -> None:
    city = event.input["city"]
    messages = [{"role": "system", "content": NOW.prompt}, {"role": "user", "content": city}]
    reply = await ctx.durable_execute_async(chat, messages, call_id="chat")
    degrees = await ctx.durable_execute_async(weather, city, call_id="tool:weather")
    if NOW.ask_time_too:
        await ctx.durable_execute_async(local_time, city, call_id="tool:time")
    if NOW.fail_after_calls:
        raise ValueError(f"no forecast format for {city}")
    output = NOW.output_format.format(reply=reply, weather=degrees)
    if NOW.count_visits:  # short-term memory carries over to the key's next run
        visits = (ctx.short_term_memory.get("visits") or 0) + 1
        ctx.short_term_memory.set("visits", visits)
        output += f" visit {visits}"
    ctx.send_event(OutputEvent(output=output))


def agent(name: str = "concierge") -> Agent:
    """The agent (a factory, so the command line can load ``tests.replay.agents:agent``)."""
    concierge = Agent(name=name)
    concierge.add_action(answer)
    return concierge


def renamed() -> Agent:
    """The same agent under another name than the recorded one."""
    return agent("front_desk")


def plan() -> AgentPlan:
    return compile_agent(agent())


INPUTS = [
    {"user": "ann", "city": "Oslo"},
    {"user": "bob", "city": "Rome"},
    {"user": "ann", "city": "Lima"},
]


def sync_chat(prompt: str, city: str) -> str:
    """The model of :func:`sync_agent`, called from a synchronous action."""
    CALLS["sync_chat"] += 1
    if NOW.chat_error is not None:
        raise RuntimeError(NOW.chat_error)
    return f"{prompt} {city}"


@action(InputEvent)
def answer_sync(event: InputEvent, ctx: RunnerContext) -> None:
    city = event.input["city"]
    ctx.send_event(OutputEvent(output=ctx.durable_execute(sync_chat, NOW.prompt, city)))


def sync_agent() -> Agent:
    """An agent whose one call is made from a synchronous action."""
    concierge = Agent(name="sync_concierge")
    concierge.add_action(answer_sync)
    return concierge
