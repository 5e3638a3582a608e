"""Built-in behaviour on top of the API: the chat and tool-call actions, ReActAgent, and the
retrieval and ingestion agents (docs/retrieval.md)."""

from flink_agents.agents.chat_actions import chat_action, tool_call_action
from flink_agents.agents.ingestion import IngestionAgent, IngestionSettings, SourceDocument
from flink_agents.agents.react import ReActAgent
from flink_agents.agents.retrieval import RetrievalSettings, RetrievedInputEvent

__all__ = [
    "IngestionAgent",
    "IngestionSettings",
    "ReActAgent",
    "RetrievalSettings",
    "RetrievedInputEvent",
    "SourceDocument",
    "chat_action",
    "tool_call_action",
]
