"""A ReAct agent that refunds orders; the refund tool needs a person's approval (docs/waits.md).

It uses the scripted model, so it runs anywhere without network or keys. Each run pauses when
the model asks for ``issue_refund``; a scripted "person" then approves, edits or rejects it::

    python -m examples.refunds
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from flink_agents.agents import ReActAgent
from flink_agents.api import ChatModelSetup, Prompt, ResourceDescriptor, ResourceType
from flink_agents.durable.store import StoreConfig
from flink_agents.providers import ScriptedChatModelConnection
from flink_agents.runtime import RunResult, RuntimeSettings, run_local


def issue_refund(order: str, amount: int) -> str:
    """Refund an amount of an order.

    Args:
        order: The order's id.
        amount: The amount to refund, in cents.
    """
    return f"refunded {amount} on {order}"


# The model asks for the refund the input names, then tells what the tool (or the approver) said:
# a refund, a refusal, or the tool's failure.
SCRIPT = [
    {
        "match": "^o-",
        "tool_calls": [{"name": "issue_refund", "arguments": {"order": "$input", "amount": 2500}}],
    },
    {"match": ".", "content": "$last"},
]


def build_agent() -> ReActAgent:
    """The refunds agent: every refund waits for approval, at most a day."""
    agent = refunds_agent()
    agent.add_tool(issue_refund, requires_approval=True, approval_timeout_s=24 * 3600)
    return agent


def refunds_agent() -> ReActAgent:
    """The agent and its scripted model, without its ``issue_refund`` tool (``build_agent``
    adds the function above; examples/refunds_job.py a refund service)."""
    agent = ReActAgent(
        name="refunds",
        chat_model=ResourceDescriptor.of(
            ChatModelSetup, connection="scripted", model="scripted-1", tools=["issue_refund"]
        ),
        prompt=Prompt(text="{order}"),
        max_tool_rounds=2,
    )
    agent.add_resource(
        "scripted",
        ResourceType.CHAT_MODEL_CONNECTION,
        ScriptedChatModelConnection,
        name="refunds",
        turns=SCRIPT,
    )
    return agent


def decide(paused: Iterable[RunResult]) -> list[dict[str, Any]]:
    """A scripted person: approves the first order, halves the second, rejects the rest."""
    verdicts: list[dict[str, Any]] = [
        {"verdict": "approve", "by": "ann"},
        {"verdict": "edit", "by": "ann", "arguments": {"order": "o-2", "amount": 1250}},
    ]
    records = []
    for n, result in enumerate(paused):
        assert result.paused is not None
        verdict = verdicts[n] if n < len(verdicts) else {"verdict": "reject", "message": "no"}
        records.append({"order": result.key, "wait": result.paused.wait_id, **verdict})
    return records


def main() -> None:
    """Run three orders until they pause, then again with the person's decisions."""
    agent, settings = build_agent(), RuntimeSettings(store=StoreConfig(kind="memory"))
    orders = [{"order": f"o-{n}"} for n in (1, 2, 3)]
    paused = run_local(agent, orders, key="order", settings=settings)
    for result in paused:
        print("waiting:", result.key, result.paused and result.paused.request)
    decisions = decide(paused)
    for result in run_local(agent, orders, key="order", settings=settings, decisions=decisions):
        print("answer: ", result.key, result.output_values)


if __name__ == "__main__":
    main()
