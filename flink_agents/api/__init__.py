"""The contract agent authors write against. Nothing here depends on the plan, runtime or Flink.

Built-in behaviour on top of it (``ReActAgent``, the chat and tool-call actions) is in
:mod:`flink_agents.agents`; the dozen names most agents need are re-exported by
:mod:`flink_agents` itself. docs/api.md lists the public API.
"""

from typing import TYPE_CHECKING

from flink_agents.api.agent import Agent, ErrorPolicy, PausedPolicy, ResourceDeclaration, action
from flink_agents.api.budgets import (
    Budget,
    BudgetExceeded,
    BudgetLedgerConfig,
    BudgetLedgerUnavailable,
    Budgets,
    CallSpend,
    ModelPrice,
    PriceTable,
)
from flink_agents.api.chat import ChatMessage, ChatRequest, TokenUsage, ToolCall, ToolSpec
from flink_agents.api.chat_models import ChatModelConnection, ChatModelSetup
from flink_agents.api.compaction import CompactionSettings
from flink_agents.api.context import (
    NOT_DONE,
    InDoubtCallError,
    InDoubtPolicy,
    InfrastructureError,
    Reconciler,
    ReconcileRequest,
    RecordedCallError,
    RunnerContext,
)
from flink_agents.api.embeddings import EmbeddingModelConnection, EmbeddingModelSetup
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
from flink_agents.api.fact_extraction import MemoryExtraction, MemoryExtractionError
from flink_agents.api.long_term_memory import (
    LongTermMemory,
    LongTermMemorySetup,
    MemoryHit,
    MemoryItem,
    MemorySet,
)
from flink_agents.api.memory import (
    DanglingMemoryRefError,
    Memory,
    MemoryChangedEvent,
    MemoryPathError,
    MemoryRef,
)
from flink_agents.api.memory_compaction import MemoryCompaction
from flink_agents.api.moved import moved_names_getattr
from flink_agents.api.prompts import Prompt
from flink_agents.api.refs import UnresolvableReference
from flink_agents.api.resources import Resource, ResourceDescriptor, ResourceType
from flink_agents.api.subagents import (
    InternalSubagent,
    Subagent,
    SubagentResult,
    SubagentSetup,
)
from flink_agents.api.tools import FunctionTool, Tool

__all__ = [
    "NOT_DONE",
    "ActionFailure",
    "Agent",
    "Budget",
    "BudgetExceeded",
    "BudgetLedgerConfig",
    "BudgetLedgerUnavailable",
    "Budgets",
    "CallSpend",
    "ChatMessage",
    "ChatModelConnection",
    "ChatModelSetup",
    "ChatRequest",
    "ChatRequestEvent",
    "ChatResponseEvent",
    "CompactionSettings",
    "DanglingMemoryRefError",
    "EmbeddingModelConnection",
    "EmbeddingModelSetup",
    "ErrorPolicy",
    "Event",
    "FunctionTool",
    "InDoubtCallError",
    "InDoubtPolicy",
    "InfrastructureError",
    "InputEvent",
    "InternalSubagent",
    "LongTermMemory",
    "LongTermMemorySetup",
    "Memory",
    "MemoryChangedEvent",
    "MemoryCompaction",
    "MemoryExtraction",
    "MemoryExtractionError",
    "MemoryHit",
    "MemoryItem",
    "MemoryPathError",
    "MemoryRef",
    "MemorySet",
    "ModelPrice",
    "OutputEvent",
    "PausedPolicy",
    "PriceTable",
    "Prompt",
    "ReconcileRequest",
    "Reconciler",
    "RecordedCallError",
    "Resource",
    "ResourceDeclaration",
    "ResourceDescriptor",
    "ResourceType",
    "RunnerContext",
    "Subagent",
    "SubagentResult",
    "SubagentSetup",
    "TokenUsage",
    "Tool",
    "ToolCall",
    "ToolRequestEvent",
    "ToolResponseEvent",
    "ToolResult",
    "ToolSpec",
    "UnresolvableReference",
    "action",
]

if not TYPE_CHECKING:  # hidden from mypy, which would otherwise accept any name of this module
    __getattr__ = moved_names_getattr(__name__)  # an old name says where it went
