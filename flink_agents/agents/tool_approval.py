"""Tools that need a person's approval, for the built-in tool-call action (docs/waits.md).

A tool whose ``needs_approval`` says so is not run when a model asks for it: the action waits
for a decision first (``ctx.wait_for_approval``: the run pauses, emitting the request: the tool,
its arguments, the deadline). Approved, the tool runs; edited, it runs with the approver's
arguments once they fit its schema; rejected or timed out, it does not run and the model is
told so, with the approver's message. The waits come before any tool of the reply runs, one at a
time in the order of the calls: a run paused at one has run no tool of that reply, and a replay
asks for the same waits in the same order.
"""

from __future__ import annotations

from typing import Any

from flink_agents.api.chat import ToolCall
from flink_agents.api.chat_models import ChatModelSetup
from flink_agents.api.context import RunnerContext
from flink_agents.api.events import ToolResult
from flink_agents.api.tools import Tool
from flink_agents.api.waits import Decision


def gated_tool(model: ChatModelSetup, call: ToolCall) -> Tool | None:
    """The tool ``call`` asks for, if that call needs approval (a call whose tool or arguments
    are wrong needs none: it fails as it would without approval)."""
    try:
        tool = model.tool(call.name)
        arguments = call.checked_arguments()
    except Exception:  # reported by the tool's own call, to the model
        return None
    return tool if tool.needs_approval(arguments) else None


async def ask_approval(ctx: RunnerContext, tool: Tool, call: ToolCall) -> Decision:
    """Wait for a person's decision on ``call`` (the run pauses until it comes)."""
    request = {"tool": call.name, "arguments": call.checked_arguments(), "tool_call_id": call.id}
    return await ctx.wait_for_approval(
        request,
        timeout_s=tool.approval_timeout(),
        call_id=f"approval:{call.id}",
        deciders=tool.approvers(),
        # What an edit is checked against, and what an approval lets run: a plan whose tool
        # changed these since the wait began asks again.
        contract={
            "tool": call.name,
            "implementation": tool.implementation,
            "schema": tool.spec().parameters,
        },
    )


def refusal(call: ToolCall, decision: Decision) -> ToolResult | None:
    """What the model is told of a call that was not approved; None when it was."""
    if decision.approved:
        return None
    if decision.verdict == "timed_out":
        why = "its approval timed out"
    else:
        why = f"it was rejected{'' if decision.by is None else f' by {decision.by}'}"
    if decision.message:
        why += f": {decision.message}"
    content = f"the call was not run: {why}"
    return ToolResult(tool_call_id=call.id, name=call.name, content=content, is_error=True)


def approved_arguments(tool: Tool, arguments: dict[str, Any], decision: Decision) -> dict[str, Any]:
    """The arguments to run an approved call with: an edit's, checked against the tool's schema
    (raises when they do not fit: the tool does not run, the model is told why)."""
    if decision.arguments is None:
        return arguments
    tool.check_arguments(decision.arguments)
    return decision.arguments
