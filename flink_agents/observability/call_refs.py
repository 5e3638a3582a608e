"""What the event log is told about: runs and durable calls, as the engine and the call runners
hold them (the protocols let this layer sit below ``durable``), and how a call is named."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from flink_agents.api.chat_models import ChatModelConnection, ChatModelSetup
from flink_agents.api.paused import WaitCall
from flink_agents.api.resources import ResourceType
from flink_agents.api.subagents.delegation import BaseSubagentCallable
from flink_agents.api.tools import Tool, function_label
from flink_agents.observability.log_records import CallKind


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


@dataclass(frozen=True)
class CallTarget:
    """What a durable call called: its kind, and by name what it asked (see
    :class:`~flink_agents.observability.log_records.CallFinished`)."""

    kind: CallKind
    name: str | None = None
    provider: str | None = None


def call_kind(function: Callable[..., Any]) -> CallKind:
    """Whether ``function`` asks a chat model, runs a tool, delegates to a sub-agent, or other
    (what a counter needs: no name is looked up). Decided once per type of function and of its
    owner: an ``isinstance`` against a model class goes through ``ABCMeta`` (~1,000
    instructions), two or three a call."""
    owner = getattr(function, "__self__", None)
    types = (type(owner), type(function))
    kind = _KINDS.get(types)
    if kind is None:
        kind = _KINDS[types] = _kind_of(owner, function)
    return kind


_KINDS: dict[tuple[type, type], CallKind] = {}


def _kind_of(owner: object, function: Callable[..., Any]) -> CallKind:
    if isinstance(owner, ChatModelSetup | ChatModelConnection):
        return "model"
    if isinstance(owner, Tool):
        return "tool"
    if isinstance(function, BaseSubagentCallable):
        return "subagent"
    if isinstance(function, WaitCall):
        return "wait"
    return "function"


def call_target(function: Callable[..., Any]) -> CallTarget:
    """:func:`call_kind`, and the model, tool or sub-agent ``function`` names; a model's
    provider."""
    kind = call_kind(function)
    owner = getattr(function, "__self__", None)
    if isinstance(owner, ChatModelSetup):
        return CallTarget(kind, owner.model, _provider(owner))
    if isinstance(owner, ChatModelConnection):
        return CallTarget(kind, None, _connection_provider(owner))
    if isinstance(owner, Tool):
        return CallTarget(kind, _tool_name(owner))
    if isinstance(function, BaseSubagentCallable):
        return CallTarget(kind, function.request.name)
    return CallTarget(kind)


def _provider(setup: ChatModelSetup) -> str | None:
    try:
        connection = setup.get_resource(setup.connection, ResourceType.CHAT_MODEL_CONNECTION)
    except Exception:  # an unbound setup, or a connection that no longer opens: no provider
        return None
    return _connection_provider(connection)


def _connection_provider(connection: object) -> str:
    """A provider connection's ``provider`` (``openai-compatible``...), else its class name."""
    provider = getattr(connection, "provider", None)
    return provider if isinstance(provider, str) else type(connection).__name__


def _tool_name(tool: Tool) -> str | None:
    name = getattr(tool, "tool_name", None)  # a FunctionTool's, without building its schema
    if isinstance(name, str):
        return name
    try:
        return tool.spec().name
    except NotImplementedError:
        return None


def function_name(function: Callable[..., Any]) -> str:
    """``module:qualname`` of a function, bound method or callable object; for a tool's
    method, the tool's implementation (the same label the store records)."""
    return function_label(function, separator=":")


_NAMED_BY_OWNER = frozenset({"model", "tool"})  # a model setup or connection, or a tool


class CallNamer:
    """:func:`call_target` and :func:`function_name` of the functions a log sees, looked up once
    per model setup, connection or tool (its provider takes a resource lookup) and then reused.

    A call's function is a new bound method each time, so it is remembered by its owner's id
    and its method (the owner is held here, so that its id is not reused); up to ``size`` of
    them, then it starts over. A sub-agent's or a plain function's names are looked up every
    time (cheap).
    """

    def __init__(self, size: int = 1024) -> None:
        self._size = size
        self._known: dict[tuple[int, Any], tuple[object, CallTarget, str]] = {}

    def names(self, function: Callable[..., Any], kind: CallKind) -> tuple[CallTarget, str]:
        """``function``'s :func:`call_target` and :func:`function_name`; ``kind`` is its
        :func:`call_kind`, which the log has asked already (for the counters)."""
        if kind not in _NAMED_BY_OWNER:
            return call_target(function), function_name(function)
        owner = getattr(function, "__self__", None)
        slot = (id(owner), getattr(function, "__func__", None))
        known = self._known.get(slot)
        if known is None:
            if len(self._known) >= self._size:
                self._known.clear()
            known = self._known[slot] = (owner, call_target(function), function_name(function))
        return known[1], known[2]
