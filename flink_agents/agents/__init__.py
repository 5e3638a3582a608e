"""Built-in behaviour on top of the API: the chat and tool-call actions, and ReActAgent."""

from flink_agents.agents.chat_actions import chat_action, tool_call_action
from flink_agents.agents.react import ReActAgent

__all__ = ["ReActAgent", "chat_action", "tool_call_action"]
