"""Context compaction settings, and how the size of a conversation is counted.

A conversation past ``max_tokens`` has its older turns summarized by a model call into one
message (:mod:`flink_agents.agents.conversation_compaction` does it for the built-in chat
action). Its size is the token usage the model last reported for it, where the model reports
usage, plus an estimate (:data:`CHARS_PER_TOKEN` characters a token) of the messages added
since; without reported usage, the estimate of every message.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from flink_agents.api.chat import ChatMessage

#: The estimate where no usage is reported: a token per this many characters.
CHARS_PER_TOKEN = 4

DEFAULT_KEEP_RECENT = 4

DEFAULT_SUMMARY_INSTRUCTIONS = (
    "You compact a conversation for the assistant that continues it. Summarize the turns you "
    "are given: keep every fact, decision, name, number, tool result and open question the "
    "assistant will need, and leave out the rest. Answer with the summary only."
)


class CompactionSettings(BaseModel):
    """When a conversation's older turns are summarized into one message, and how.

    Before each model call of the chat action, a conversation larger than ``max_tokens`` keeps
    its leading system messages and its ``keep_recent`` most recent messages (a tool result is
    kept with the reply that asked for it); the messages between, when there are at least two,
    are replaced by a summary the chat model writes (without its prompt and tools).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_tokens: int = Field(
        ge=1,
        description="Size of the conversation (tokens: reported usage, else characters / 4) "
        "past which its older turns are summarized before the next model call.",
    )
    keep_recent: int = Field(
        default=DEFAULT_KEEP_RECENT,
        ge=1,
        description="Most recent messages kept as they are (more, to keep a tool result with "
        "the reply that asked for it).",
    )
    instructions: str = Field(
        default=DEFAULT_SUMMARY_INSTRUCTIONS,
        min_length=1,
        description="The system message of the summarizing call.",
    )


def estimated_tokens(message: ChatMessage) -> int:
    """Tokens ``message`` is estimated to take: its characters (content, tool names and
    arguments as JSON) divided by :data:`CHARS_PER_TOKEN`, rounded up."""
    chars = len(message.content) + sum(
        len(call.name) + len(json.dumps(call.arguments, sort_keys=True))
        for call in message.tool_calls
    )
    return math.ceil(chars / CHARS_PER_TOKEN)


def history_tokens(messages: Sequence[ChatMessage]) -> int:
    """The size of a conversation: the usage reported with its last reply that has one (the
    tokens the model was sent and answered then, the setup's prompt and tools included), plus
    the estimate of each message after that reply; without reported usage, every message's
    estimate."""
    counted = 0
    for index in range(len(messages) - 1, -1, -1):
        usage = messages[index].usage
        if usage is not None:
            return usage.total_tokens + counted
        counted += estimated_tokens(messages[index])
    return counted
