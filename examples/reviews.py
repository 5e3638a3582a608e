"""Scoring product reviews, twice: as a workflow agent and as a ReAct agent (YAML twin of the
latter: ``examples/reviews.yaml``). A bad review makes the model call ``notify_team`` first.

Both use the scripted model, so they run anywhere without network or keys::

    flink-agents run --local examples.reviews:build_workflow_agent \
        --input reviews.jsonl --key id --output scores.jsonl

The workflow agent shows what the compiler takes care of: it declares what its actions send
(checked at compile time), never adds the built-in chat and tool actions (the compiler adds them
because it handles ``ChatResponseEvent``), and fills its system prompt with ``prompt_args``.
"""

from __future__ import annotations

import json

from pydantic import BaseModel

from flink_agents.agents import ReActAgent
from flink_agents.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    OutputEvent,
    ResourceDeclaration,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents.providers import ScriptedChatModelConnection


def notify_team(product: str, reason: str) -> str:
    """Tell the product's team about an unhappy customer.

    Args:
        product: The product reviewed.
        reason: What the customer wrote.
    """
    print(f"notifying the {product} team")  # a chatty tool: `run --output` keeps it apart
    return f"notified the {product} team"


class ReviewScore(BaseModel):
    """The score of one review."""

    stars: int
    summary: str


# Literal braces need no escaping: only {name} is a placeholder.
INSTRUCTIONS = (
    "Score the product review you are given from 1 to 5 stars. Answer with JSON only, like "
    '{"stars": 4, "summary": "one line"}. For 2 stars or less, call notify_team first.'
)

# The scripted model reads the review (a JSON message): a bad one makes it call the tool, whose
# result it then sums up; any other review gets five stars.
SCRIPT = [
    {
        "match": r'"text": "[^"]*\b(terrible|broken|awful)\b',
        "tool_calls": [
            {
                "name": "notify_team",
                "arguments": {"product": "$input.product", "reason": "$input.text"},
            }
        ],
    },
    {"match": "^notified", "content": '{"stars": 1, "summary": "unhappy: $last"}'},
    {"content": '{"stars": 5, "summary": "happy customer"}'},
]

CONNECTIONS = [
    ResourceDeclaration.connection("llm", ScriptedChatModelConnection, name="reviews", turns=SCRIPT)
]
"""Shared by both agents of this module, like a YAML file's ``connections:``."""


class ReviewScoringAgent(Agent):
    """InputEvent -> chat request (the review as JSON) -> ChatResponseEvent -> score."""

    @action(InputEvent, sends=[ChatRequestEvent])
    def ask_for_score(event: InputEvent, ctx: RunnerContext) -> None:
        review = ChatMessage(role="user", content=json.dumps(event.input, sort_keys=True))
        shop = {"shop": ctx.config.get("shop", "our shop")}
        ctx.send_event(ChatRequestEvent(model="scorer", messages=[review], prompt_args=shop))

    @action(ChatResponseEvent, sends=[OutputEvent])
    def emit_score(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        score = ReviewScore.model_validate_json(event.response.content)
        ctx.send_event(OutputEvent(output=score.model_dump(mode="json")))


def build_workflow_agent() -> ReviewScoringAgent:
    """The review scorer as a workflow: two actions and a chat model."""
    agent = ReviewScoringAgent(
        name="review_workflow",
        config={"shop": "Acme"},
        description="Scores product reviews; alerts the team about bad ones.",
    )
    agent.add_shared(CONNECTIONS).add_tool(notify_team)
    agent.add_prompt("instructions", "You work for {shop}. " + INSTRUCTIONS)
    _add_scorer(agent)
    return agent


def _add_scorer(agent: Agent) -> None:
    """Declare the model both forms share: the ``llm`` connection, the ``instructions`` prompt
    and the ``notify_team`` tool."""
    agent.add_resource(
        "scorer",
        ResourceType.CHAT_MODEL,
        ChatModelSetup,
        connection="llm",
        prompt="instructions",
        tools=["notify_team"],
    )


def build_react_agent() -> ReActAgent:
    """The review scorer as a ReAct agent (``examples/reviews.yaml`` is its YAML twin)."""
    agent = ReActAgent(
        name="review_react",
        description="Scores product reviews; alerts the team about bad ones.",
        chat_model="scorer",
        prompt="review",
        output_schema=ReviewScore,
        tools=[notify_team],
        max_tool_rounds=3,
    )
    agent.add_shared(CONNECTIONS)
    agent.add_prompt("review", "{input}")  # the review, as JSON
    agent.add_prompt("instructions", INSTRUCTIONS)
    _add_scorer(agent)
    return agent
