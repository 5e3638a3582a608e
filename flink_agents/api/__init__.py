"""What agent authors import. Nothing here depends on the plan, the runtime or Flink."""

from flink_agents.api.agent import (
    ActionDeclaration,
    ActionSpec,
    Agent,
    ErrorPolicy,
    ResourceDeclaration,
    action,
    action_spec,
)
from flink_agents.api.chat import ChatMessage, ChatRequest, ToolCall, ToolSpec
from flink_agents.api.chat_actions import chat_action, tool_call_action
from flink_agents.api.chat_models import ChatModelConnection, ChatModelSetup
from flink_agents.api.context import NOT_DONE, Reconciler, RunnerContext
from flink_agents.api.events import (
    ActionFailure,
    ChatRequestEvent,
    ChatResponseEvent,
    Event,
    InputEvent,
    OutputEvent,
    ToolRequestEvent,
    ToolResponseEvent,
    ToolResult,
)
from flink_agents.api.memory import Memory
from flink_agents.api.prompts import Prompt
from flink_agents.api.react import ReActAgent
from flink_agents.api.refs import UnresolvableReference, class_path, import_reference
from flink_agents.api.resources import Resource, ResourceDescriptor, ResourceType
from flink_agents.api.subagents import (
    BaseSubagentCallable,
    InternalSubagent,
    Subagent,
    SubagentResult,
    SubagentSetup,
)
from flink_agents.api.tools import FunctionTool, Tool

__all__ = [
    "NOT_DONE",
    "ActionDeclaration",
    "ActionFailure",
    "ActionSpec",
    "Agent",
    "BaseSubagentCallable",
    "ChatMessage",
    "ChatModelConnection",
    "ChatModelSetup",
    "ChatRequest",
    "ChatRequestEvent",
    "ChatResponseEvent",
    "ErrorPolicy",
    "Event",
    "FunctionTool",
    "InputEvent",
    "InternalSubagent",
    "Memory",
    "OutputEvent",
    "Prompt",
    "ReActAgent",
    "Reconciler",
    "Resource",
    "ResourceDeclaration",
    "ResourceDescriptor",
    "ResourceType",
    "RunnerContext",
    "Subagent",
    "SubagentResult",
    "SubagentSetup",
    "Tool",
    "ToolCall",
    "ToolRequestEvent",
    "ToolResponseEvent",
    "ToolResult",
    "ToolSpec",
    "UnresolvableReference",
    "action",
    "action_spec",
    "chat_action",
    "class_path",
    "import_reference",
    "tool_call_action",
]
