"""The three benchmark agents, each on a scripted model that answers after ``latency`` seconds.

Every model call of a workload sleeps the same latency, so a run's critical path is
``depth * latency`` (see :data:`DEPTH`). Each final answer repeats the input text, which
carries the source timestamp back out (see ``bench/flink_job.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from examples.research import lookup_fact
from examples.weather import SCRIPT as WEATHER_SCRIPT
from examples.weather import WeatherReport, get_advice, get_temperature
from flink_agents.agents import ReActAgent
from flink_agents.api import ChatModelSetup, Prompt, ResourceDescriptor, ResourceType
from flink_agents.api.subagents.delegation import TEXT_INPUT_SCHEMA
from flink_agents.providers.scripted import ScriptedChatModelConnection

DEPTH = {"one_call": 1, "react_tools": 3, "subagents": 4}
"""Model calls on a run's critical path: one call; ReAct with two tool rounds (3 calls);
desk call, then both sub-agents at once (the longer one makes 2 calls), then the desk's answer."""

MODEL_CALLS = {"one_call": 1, "react_tools": 3, "subagents": 5}
"""Model calls per run in total (the counter a recovery compares with)."""


def _scripted(agent: ReActAgent, connection: str, turns: list[dict[str, Any]], latency: float):
    agent.add_resource(
        connection,
        ResourceType.CHAT_MODEL_CONNECTION,
        ScriptedChatModelConnection,
        name=connection,
        turns=turns,
        latency_seconds=latency,
    )


def _model(connection: str) -> ResourceDescriptor:
    return ResourceDescriptor.of(ChatModelSetup, connection=connection, model="bench")


def one_call(latency: float) -> ReActAgent:
    """(1) One chat call per input, no tools."""
    agent = ReActAgent(
        name="one_call", chat_model=_model("one_call_model"), prompt=Prompt(text="{text}")
    )
    _scripted(agent, "one_call_model", [{"content": "ok: $input"}], latency)
    return agent


def react_tools(latency: float) -> ReActAgent:
    """(2) The weather example's ReAct script: two tool calls, then a structured answer."""
    agent = ReActAgent(
        name="react_tools",
        chat_model=_model("react_model"),
        prompt=Prompt(text="{text}"),
        output_schema=WeatherReport,
        tools=[get_temperature, get_advice],
        max_tool_rounds=4,
    )
    _scripted(agent, "react_model", WEATHER_SCRIPT, latency)
    return agent


def subagents(latency: float) -> ReActAgent:
    """(3) A desk delegating to two internal sub-agents at once: a researcher with a tool
    (two calls) and a one-call billing agent; then the desk answers (four calls deep)."""
    researcher = ReActAgent(
        name="researcher", chat_model=_model("researcher_model"), tools=[lookup_fact]
    )
    _scripted(
        researcher,
        "researcher_model",
        [
            {"tool_calls": [{"name": "lookup_fact", "arguments": {"topic": "$input"}}]},
            {"content": "$last"},
        ],
        latency,
    )
    billing = ReActAgent(name="billing", chat_model=_model("billing_model"))
    _scripted(billing, "billing_model", [{"content": "billing ok for $input"}], latency)

    desk = ReActAgent(
        name="subagents",
        chat_model=_model("desk_model"),
        prompt=Prompt(text="{text}"),
        subagents=["researcher", "billing"],
    )
    _scripted(
        desk,
        "desk_model",
        [
            {
                "tool_calls": [
                    {"name": "subagent_researcher", "arguments": {"input": "$input"}},
                    {"name": "subagent_billing", "arguments": {"input": "$input"}},
                ]
            },
            {"content": "desk answer for $input; billing says: $last"},
        ],
        latency,
    )
    for name, child, what in (
        ("researcher", researcher, "Researches a question."),
        ("billing", billing, "Tells a customer's billing status."),
    ):
        desk.add_subagent(name, child, description=what, input_schema=TEXT_INPUT_SCHEMA)
    return desk


WORKLOADS: dict[str, Callable[[float], ReActAgent]] = {
    "one_call": one_call,
    "react_tools": react_tools,
    "subagents": subagents,
}


_MODEL_NAMES = ("one_call_model", "react_model", "researcher_model", "billing_model", "desk_model")


def model_calls_made() -> int:
    """Scripted model calls made in this process so far (all workloads' connections)."""
    return sum(ScriptedChatModelConnection.stats(name).total for name in _MODEL_NAMES)


def model_calls_in_flight() -> int:
    """Scripted model calls running in this process now."""
    return sum(ScriptedChatModelConnection.stats(name).in_flight for name in _MODEL_NAMES)
