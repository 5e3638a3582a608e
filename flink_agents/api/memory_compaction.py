"""Compaction of a key's long-term memory set: many items merged into fewer facts (docs/memory.md).

A memory set with :class:`MemoryCompaction` settings is compacted in the background once a run
of a key leaves it holding more than ``max_items`` items: the run schedules a follow-up of the
key (a keyed processing-time timer, ``delay_seconds`` later, checkpointed with the key's state),
and that follow-up's run asks the set's chat model to merge the items written before the
``keep_recent`` most recent ones into facts, deletes them and writes the facts. The request is
scheduled with the run that crossed the threshold, in the same key state, and the model call is
a durable call of the follow-up's run: a failover neither loses a compaction nor makes a second
one for the same crossing, nor asks the model twice.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from flink_agents.api.chat import ChatMessage, ChatRequest
from flink_agents.api.fact_extraction import ExtractionModel

DEFAULT_COMPACTION_INSTRUCTIONS = (
    "You are given numbered memory items about one subject (a customer, a device, a project). "
    "Merge them into as few short, self-contained facts as keep everything they say that is "
    "still true: one fact for items that say the same thing in other words, the later item "
    "winning where two contradict. Answer with a JSON list of strings and nothing else."
)


class MemoryCompaction(BaseModel):
    """When and how a memory set's items of one key are compacted."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    chat_model: str = Field(
        min_length=1, description="Name of the chat_model resource that merges the items."
    )
    max_items: int = Field(
        ge=2,
        description="A run that leaves the key's set holding more items than this (having "
        "started at or below it) schedules a compaction of the set.",
    )
    keep_recent: int = Field(
        default=0,
        ge=0,
        description="The most recently written items kept as they are (not compacted).",
    )
    delay_seconds: float = Field(
        default=0.0,
        ge=0,
        description="Processing time between the run that crossed max_items and the compaction.",
    )
    instructions: str = Field(
        default=DEFAULT_COMPACTION_INSTRUCTIONS,
        min_length=1,
        description="The system message of the compaction call; the reply must be a JSON list "
        "of strings.",
    )

    @model_validator(mode="after")
    def _leaves_something_to_compact(self) -> MemoryCompaction:
        if self.keep_recent >= self.max_items - 1:
            raise ValueError(
                f"keep_recent ({self.keep_recent}) must be less than max_items - 1 "
                f"({self.max_items - 1}): a compaction merges at least two items"
            )
        return self


def compaction_request(
    model: ExtractionModel, settings: MemoryCompaction, texts: list[str]
) -> ChatRequest:
    """The request of a compaction call: the instructions as the system message and the items'
    texts, numbered in the order they were written, as the user's; without the setup's prompt
    and tools."""
    listed = "\n".join(f"{number}. {text}" for number, text in enumerate(texts, start=1))
    return model.request_without_tools(
        [
            ChatMessage(role="system", content=settings.instructions),
            ChatMessage(role="user", content=listed),
        ]
    )
