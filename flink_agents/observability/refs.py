"""What the event log is told about: runs and durable calls, as the engine and the call runners
hold them (the protocols let this layer sit below ``durable``), and how a call is named."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from flink_agents.api.chat_models import ChatModelConnection, ChatModelSetup
from flink_agents.api.subagents.delegation import BaseSubagentCallable
from flink_agents.api.tools import Tool
from flink_agents.observability.records import CallKind


class RunRef(Protocol):
    """A run's identity (:class:`~flink_agents.durable.identity.RunId` fits)."""

    @property
    def agent(self) -> str: ...
    @property
    def key(self) -> Any: ...
    @property
    def seq(self) -> int: ...


class CallIdentityRef(Protocol):
    """Where a call belongs (:class:`~flink_agents.durable.identity.CallIdentity` fits)."""

    @property
    def run(self) -> RunRef: ...
    @property
    def event_id(self) -> str: ...
    @property
    def action(self) -> str: ...
    @property
    def call_id(self) -> str: ...


class CallRef(Protocol):
    """A durable call (:class:`~flink_agents.durable.call.DurableCall` fits)."""

    @property
    def identity(self) -> CallIdentityRef: ...
    @property
    def function(self) -> Callable[..., Any]: ...
    @property
    def args(self) -> tuple[Any, ...]: ...
    @property
    def kwargs(self) -> Mapping[str, Any]: ...


def call_kind(function: Callable[..., Any]) -> CallKind:
    """Whether ``function`` asks a chat model, runs a tool, delegates to a sub-agent, or other."""
    owner = getattr(function, "__self__", None)
    if isinstance(owner, ChatModelSetup | ChatModelConnection):
        return "model"
    if isinstance(owner, Tool):
        return "tool"
    if isinstance(function, BaseSubagentCallable):
        return "subagent"
    return "function"


def function_name(function: Callable[..., Any]) -> str:
    """``module:qualname`` of a function, bound method or callable object."""
    target = function if hasattr(function, "__qualname__") else type(function)
    return f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', '?')}"
