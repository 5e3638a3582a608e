"""flink-agents-py: LLM agents as keyed Apache Flink jobs, with durable calls.

The names most agents and jobs need, in one place::

    from flink_agents import Agent, action, InputEvent, OutputEvent, RunnerContext

Everything else is in the subpackages (docs/api.md lists the public API): :mod:`.api` (the
authoring contract), :mod:`.agents` (built-in agents), :mod:`.providers` (chat models),
:mod:`.flink` (jobs), :mod:`.durable` (durable calls and the action-state store).

The Flink and store names load on first use, so that an agent module does not pull in PyFlink.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flink_agents.agents import ReActAgent
from flink_agents.api import (
    Agent,
    ChatModelSetup,
    Event,
    FunctionTool,
    InputEvent,
    OutputEvent,
    Prompt,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    Subagent,
    SubagentResult,
    action,
)
from flink_agents.api.moved import install_moved_module_finder

if TYPE_CHECKING:
    from flink_agents.durable.store import StoreConfig
    from flink_agents.flink.environment import AgentsExecutionEnvironment
    from flink_agents.runtime.local import run_local
    from flink_agents.runtime.options import OperatorOptions
    from flink_agents.runtime.settings import RuntimeSettings

__all__ = [  # noqa: RUF022 (grouped by what a user does, not sorted)
    # Declaring an agent
    "Agent",
    "Event",
    "InputEvent",
    "OutputEvent",
    "RunnerContext",
    "action",
    # Its resources
    "ChatModelSetup",
    "FunctionTool",
    "Prompt",
    "ResourceDescriptor",
    "ResourceType",
    # Built-in agents and delegation
    "ReActAgent",
    "Subagent",
    "SubagentResult",
    # Running it: in this process, or as a Flink job with durable calls
    "AgentsExecutionEnvironment",
    "OperatorOptions",
    "RuntimeSettings",
    "StoreConfig",
    "run_local",
]

_LAZY = {
    "run_local": "flink_agents.runtime.local",
    "AgentsExecutionEnvironment": "flink_agents.flink.environment",
    "OperatorOptions": "flink_agents.runtime.options",
    "RuntimeSettings": "flink_agents.runtime.settings",
    "StoreConfig": "flink_agents.durable.store",
}


# An import of a module of an earlier version says where it moved (api/moved.py).
install_moved_module_finder()


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'flink_agents' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
