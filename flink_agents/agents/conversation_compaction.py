"""Context compaction for the chat action: older turns summarized by a durable model call.

:func:`compacted` returns a conversation past its :class:`CompactionSettings` ``max_tokens``
with its older turns replaced by one system message, the summary, placed after the leading
system messages. The summary names the turns it replaced by their positions in the whole
conversation (``Summary of turns 2-9 of this conversation, ...``; a later compaction that
replaces an earlier summary names the turns that summary covered as well).

The summarizing call is a durable call of the action (call id ``<call id>:compact``), so a
replay after a failover is handed the recorded summary back: the model is shown the same
context as in the live run, and a threshold crossing is compacted once. The compacted
conversation is what the chat action keeps between tool rounds, so later calls start from it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from flink_agents.api.chat import ChatMessage
from flink_agents.api.chat_models import ChatModelSetup
from flink_agents.api.compaction import CompactionSettings, history_tokens
from flink_agents.api.context import RunnerContext

_SUMMARY = re.compile(r"Summary of turns (\d+)-(\d+) of this conversation, which it replaces:\n")
_TRANSCRIPT_HEADER = "Turns to summarize:"


def _summary_span(message: ChatMessage) -> tuple[int, int] | None:
    """The turns an earlier summary replaced, or None for any other message."""
    found = _SUMMARY.match(message.content) if message.role == "system" else None
    return (int(found[1]), int(found[2])) if found else None


def _turn_spans(messages: Sequence[ChatMessage]) -> list[tuple[int, int]]:
    """Each message's turns in the whole conversation (1-based; a summary's are a range)."""
    spans: list[tuple[int, int]] = []
    following = 1
    for message in messages:
        span = _summary_span(message) or (following, following)
        spans.append(span)
        following = span[1] + 1
    return spans


def _replaced_range(messages: Sequence[ChatMessage], keep_recent: int) -> tuple[int, int] | None:
    """The messages ``[start, end)`` a summary replaces: after the leading system messages
    (not an earlier summary), before the ``keep_recent`` last ones, never splitting a tool
    result from the reply that asked for it; None when fewer than two would be replaced."""
    start = 0
    while (
        start < len(messages)
        and messages[start].role == "system"
        and _summary_span(messages[start]) is None
    ):
        start += 1
    end = max(start, len(messages) - keep_recent)
    while end > start and messages[end].role == "tool":
        end -= 1
    return (start, end) if end - start >= 2 else None


def _transcript(messages: Sequence[ChatMessage], spans: Sequence[tuple[int, int]]) -> str:
    lines = [_TRANSCRIPT_HEADER]
    for message, (first, last) in zip(messages, spans, strict=True):
        turns = f"turn {first}" if first == last else f"turns {first}-{last}"
        role = "earlier summary" if first != last else message.role
        lines.append(f"[{turns}] {role}: {message.content}")
        lines += [
            f"[{turns}] assistant asked for tool {call.name} with "
            f"{json.dumps(call.arguments, sort_keys=True)}"
            for call in message.tool_calls
        ]
    return "\n".join(lines)


async def compacted(
    ctx: RunnerContext,
    model: ChatModelSetup,
    messages: list[ChatMessage],
    settings: CompactionSettings,
    call_id: str,
) -> list[ChatMessage]:
    """``messages`` as they are when within ``settings.max_tokens`` (or with fewer than two
    older turns to replace); else with the older turns replaced by the summary ``model`` writes
    in the durable call ``<call_id>:compact``."""
    if history_tokens(messages) <= settings.max_tokens:
        return messages
    replaced = _replaced_range(messages, settings.keep_recent)
    if replaced is None:
        return messages
    start, end = replaced
    spans = _turn_spans(messages)[start:end]
    request = [
        ChatMessage(role="system", content=settings.instructions),
        ChatMessage(role="user", content=_transcript(messages[start:end], spans)),
    ]
    # A call of the connection's ``chat``: budgets meter it like any model call.
    reply = await ctx.durable_execute_async(
        model.chat_connection().chat,
        model.request_without_tools(request),
        call_id=f"{call_id}:compact",
        result_type=ChatMessage,
    )
    header = (
        f"Summary of turns {spans[0][0]}-{spans[-1][1]} of this conversation, which it replaces:"
    )
    summary = ChatMessage(role="system", content=f"{header}\n{reply.content}")
    # Usage reported before the compaction counted the replaced turns: the kept messages drop
    # it, so the size is estimated until the model next reports one.
    kept = [message.model_copy(update={"usage": None}) for message in messages[end:]]
    return [*messages[:start], summary, *kept]
