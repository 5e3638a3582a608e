"""Built-in behaviour on top of the API: the chat and tool-call actions, ReActAgent, and the
retrieval and ingestion agents (docs/retrieval.md), and the "remember" step (docs/memory.md)."""

from flink_agents.agents.chat_actions import chat_action, tool_call_action
from flink_agents.agents.ingestion import IngestionAgent, IngestionSettings, SourceDocument
from flink_agents.agents.react import ReActAgent
from flink_agents.agents.remember_step import remember_run
from flink_agents.agents.retrieval import (
    RetrievalRequestEvent,
    RetrievalResponseEvent,
    RetrievalSettings,
    RetrievedInputEvent,
    retrieval_action,
)

__all__ = [
    "IngestionAgent",
    "IngestionSettings",
    "ReActAgent",
    "RetrievalRequestEvent",
    "RetrievalResponseEvent",
    "RetrievalSettings",
    "RetrievedInputEvent",
    "SourceDocument",
    "chat_action",
    "remember_run",
    "retrieval_action",
    "tool_call_action",
]
