"""A ReAct agent that answers weather questions with two tools and a structured answer.

It uses the scripted model, so it runs anywhere without network or keys::

    flink-agents run --local examples.weather:build_agent \
        --input cities.jsonl --key city
"""

from __future__ import annotations

from pydantic import BaseModel

from flink_agents.agents import ReActAgent
from flink_agents.api import ChatModelSetup, Prompt, ResourceDescriptor, ResourceType
from flink_agents.providers import ScriptedChatModelConnection

_TEMPERATURES = {"Berlin": 18, "Lisbon": 24, "Oslo": 9}


def get_temperature(city: str) -> int:
    """Current temperature in degrees Celsius.

    Args:
        city: Name of the city.
    """
    return _TEMPERATURES.get(city, 15)


def get_advice(temperature: int) -> str:
    """Clothing advice for a temperature.

    Args:
        temperature: Degrees Celsius.
    """
    return "coat" if temperature < 12 else "jacket" if temperature < 20 else "t-shirt"


class WeatherReport(BaseModel):
    """The agent's answer."""

    city: str
    advice: str


# The script asks for the temperature, feeds it to the advice tool, and answers with the advice
# ($input is the user message, $last the latest message: here the previous tool's result).
SCRIPT = [
    {"tool_calls": [{"name": "get_temperature", "arguments": {"city": "$input"}}]},
    {"tool_calls": [{"name": "get_advice", "arguments": {"temperature": "$last"}}]},
    {"content": '{"city": "$input", "advice": "$last"}'},
]


def build_agent() -> ReActAgent:
    """The weather agent."""
    agent = ReActAgent(
        name="weather_react",
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection="scripted", model="scripted-1"),
        prompt=Prompt(text="{city}"),
        output_schema=WeatherReport,
        tools=[get_temperature, get_advice],
        max_tool_rounds=4,
    )
    agent.add_resource(
        "scripted",
        ResourceType.CHAT_MODEL_CONNECTION,
        ScriptedChatModelConnection,
        name="weather",
        turns=SCRIPT,
        latency_seconds=0.01,
    )
    return agent
