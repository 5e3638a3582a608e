"""A research desk that delegates: to an internal ReAct child and to an external HTTP service.

The desk's model calls two sub-agents as tools: ``subagent_researcher`` (a ReActAgent compiled
into this plan as a child scope, with its own model and tool) and ``subagent_billing`` (an HTTP
service, see :mod:`flink_agents.providers.http_subagent`). Both are scripted or local, so::

    flink-agents run --local examples.research:build_agent \
        --input questions.jsonl --key customer

runs anywhere; without a billing service at ``BILLING_URL`` the model is told that delegation
failed, and still answers.
"""

from __future__ import annotations

from flink_agents.agents import ReActAgent
from flink_agents.api import ChatModelSetup, Prompt, ResourceDescriptor, ResourceType
from flink_agents.api.subagents import TEXT_INPUT_SCHEMA
from flink_agents.providers import HttpSubagent, ScriptedChatModelConnection

BILLING_URL = "http://127.0.0.1:8765/billing"

BILLING_INPUT_SCHEMA = {
    "type": "object",
    "properties": {"customer": {"type": "string", "description": "The customer id."}},
    "required": ["customer"],
}


def lookup_fact(topic: str) -> str:
    """Look a fact up in the desk's notes.

    Args:
        topic: What to look up.
    """
    return f"{topic}: covered by the premium plan"


# The child looks the question up, then answers with what it found.
RESEARCHER_SCRIPT = [
    {"tool_calls": [{"name": "lookup_fact", "arguments": {"topic": "$input"}}]},
    {"content": "$last"},
]

# The desk delegates to both sub-agents at once, then answers with the last observation.
DESK_SCRIPT = [
    {
        "tool_calls": [
            {"name": "subagent_researcher", "arguments": {"input": "$input"}},
            {"name": "subagent_billing", "arguments": {"customer": "$input"}},
        ]
    },
    {"content": "desk answer; billing says: $last"},
]


def build_researcher() -> ReActAgent:
    """The internal child: a prompt-less ReActAgent with one tool and its own model."""
    researcher = ReActAgent(
        name="researcher",
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection="researcher_model"),
        tools=[lookup_fact],
    )
    researcher.add_resource(
        "researcher_model",
        ResourceType.CHAT_MODEL_CONNECTION,
        ScriptedChatModelConnection,
        name="researcher",
        turns=RESEARCHER_SCRIPT,
    )
    return researcher


def build_agent() -> ReActAgent:
    """The research desk."""
    desk = ReActAgent(
        name="research_desk",
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection="desk_model"),
        prompt=Prompt(text="{question}"),
        subagents=["researcher", "billing"],
        error_policy="emit",
    )
    desk.add_resource(
        "desk_model",
        ResourceType.CHAT_MODEL_CONNECTION,
        ScriptedChatModelConnection,
        name="research_desk",
        turns=DESK_SCRIPT,
    )
    desk.add_subagent(
        "researcher",
        build_researcher(),
        description="Researches a question with the desk's notes.",
        input_schema=TEXT_INPUT_SCHEMA,
    )
    desk.add_resource(
        "billing",
        ResourceType.AGENT,
        HttpSubagent,
        url=BILLING_URL,
        description="Tells a customer's billing status.",
        input_schema=BILLING_INPUT_SCHEMA,
    )
    return desk
