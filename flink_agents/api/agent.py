"""Declaring agents in Python: :class:`Agent` and the :func:`action` decorator."""

from __future__ import annotations

import builtins
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from flink_agents.api.budgets import Budgets
from flink_agents.api.chat import ChatMessage
from flink_agents.api.events import Event, event_type_name
from flink_agents.api.prompts import Prompt
from flink_agents.api.refs import class_path
from flink_agents.api.resources import Resource, ResourceDescriptor, ResourceType
from flink_agents.api.subagents.delegation import SUBAGENT_TOOL_PREFIX, InternalSubagent
from flink_agents.api.tools import FunctionTool

ErrorPolicy = Literal["fail", "emit"]
"""What an action error does: ``fail`` raises out of the engine; ``emit`` ends the run with an
error ``OutputEvent`` and goes on with other runs."""

PausedPolicy = Literal["queue", "alongside"]
"""What a key's later inputs do while one of its runs is paused at a wait (docs/waits.md):
``queue`` (per-key order, the default) waits behind the paused run; ``alongside`` runs them
while it waits, and the paused run goes on when its decision, event or time comes."""

ActionFunction = Callable[..., Any]
_MARK = "__flink_agents_action__"


@dataclass(frozen=True)
class ActionSpec:
    """What ``@action`` records on a function: the event types it handles and sends, its
    config, and which config keys name resources."""

    listen_to: tuple[str, ...]
    config: Mapping[str, Any] = field(default_factory=dict)
    sends: tuple[str, ...] = ()
    resource_keys: Mapping[str, ResourceType] = field(default_factory=dict)


def action(
    *event_types: type[Event] | str,
    config: Mapping[str, Any] | None = None,
    sends: Sequence[type[Event] | str] = (),
    resource_keys: Mapping[str, ResourceType] | None = None,
) -> Callable[[ActionFunction], ActionFunction]:
    """Mark ``fn(event, ctx)`` (sync or ``async``) as an action handling ``event_types``.

    Actions must be module-level functions or functions in a class body (no ``self``), so the
    plan can reference them as ``module:qualname`` and a worker can import them.

    ``sends`` declares the event types the action may send; the compiler then checks that each
    has a listener (``OutputEvent`` excepted). ``resource_keys`` declares the config keys whose
    values name resources (``{"chat_model": ResourceType.CHAT_MODEL}``); the compiler checks
    that each names a resource of that type.
    """
    if not event_types:
        raise TypeError("@action needs at least one event type")
    spec = ActionSpec(
        tuple(event_type_name(t) for t in event_types),
        dict(config or {}),
        tuple(event_type_name(t) for t in sends),
        {key: ResourceType(kind) for key, kind in (resource_keys or {}).items()},
    )

    def mark(fn: ActionFunction) -> ActionFunction:
        target = fn.__func__ if isinstance(fn, staticmethod) else fn
        _check_action_signature(target)
        setattr(target, _MARK, spec)
        return fn

    return mark


def action_spec(fn: Any) -> ActionSpec | None:
    """The ``@action`` spec of ``fn``, if it has one."""
    target = fn.__func__ if isinstance(fn, staticmethod) else fn
    return getattr(target, _MARK, None)


def _check_action_signature(fn: ActionFunction) -> None:
    if not callable(fn):
        raise TypeError(f"@action applies to functions, not {fn!r}")
    params = list(inspect.signature(fn).parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) != 2:
        names = [p.name for p in params]
        # Written as a method: plans name actions as module:qualname and call them unbound.
        hint = "; actions take no self (they are plain functions)" if names[:1] == ["self"] else ""
        raise TypeError(
            f"action {fn.__qualname__} must take exactly (event, ctx); got {names}{hint}"
        )


@dataclass(frozen=True)
class ActionDeclaration:
    """An action of an agent: its name, function, event types, config, the event types it
    declares it sends and the config keys that name resources."""

    name: str
    function: ActionFunction
    listen_to: tuple[str, ...]
    config: Mapping[str, Any]
    sends: tuple[str, ...] = ()
    resource_keys: Mapping[str, ResourceType] = field(default_factory=dict)


@dataclass(frozen=True)
class ResourceDeclaration:
    """A named resource of an agent; declared once, it may be shared by several agents
    (see :meth:`Agent.add_shared`)."""

    name: str
    type: ResourceType
    descriptor: ResourceDescriptor

    @classmethod
    def connection(
        cls, name: str, resource: builtins.type[Resource] | str, /, **arguments: Any
    ) -> ResourceDeclaration:
        """A chat model connection ``name``: its class (or class path) and arguments."""
        return cls(
            name,
            ResourceType.CHAT_MODEL_CONNECTION,
            ResourceDescriptor.of(resource, **arguments),
        )


class Agent:
    """An agent: actions that react to events, and resources they use.

    Subclass it and decorate functions in the class body with ``@action``; add resources in
    ``__init__`` (or on an instance) with :meth:`add_resource`, :meth:`add_tool` and
    :meth:`add_prompt`. Compile with ``flink_agents.plan.compile_agent``.
    """

    def __init__(
        self,
        *,
        name: str | None = None,
        config: Mapping[str, Any] | None = None,
        error_policy: ErrorPolicy = "fail",
        description: str | None = None,
        output_type: Any = None,
        while_paused: PausedPolicy = "queue",
    ) -> None:
        self.name = name or type(self).__name__
        # What its outputs are (a pydantic model, a dataclass...): a pipeline's typed answers
        # (docs/pipelines.md). Not part of the plan: a job spec declares an output_schema.
        self.output_type: Any = output_type
        self.description = description
        self.config: dict[str, Any] = dict(config or {})
        self.error_policy: ErrorPolicy = error_policy
        # Part of the agent, like its error policy: whether its runs of a key may overlap a
        # paused one is a property of its actions (what they read of the key's memory).
        self.while_paused: PausedPolicy = while_paused
        # What its model calls may spend (docs/budgets.md): set it on the agent.
        self.budgets: Budgets | None = None
        self._resources: dict[str, ResourceDeclaration] = {}
        self._extra_actions: list[ActionDeclaration] = []
        self._children: dict[str, Agent] = {}

    def add_resource(
        self,
        name: str,
        resource_type: ResourceType,
        resource: type[Resource] | ResourceDescriptor | str,
        /,
        **arguments: Any,
    ) -> Agent:
        """Declare resource ``name``: a class (or class path) and arguments, or a descriptor."""
        if name in self._resources:
            raise ValueError(f"agent {self.name!r} already has a resource named {name!r}")
        if isinstance(resource, ResourceDescriptor):
            if arguments:
                raise TypeError("pass arguments inside the descriptor, not next to it")
            descriptor = resource
        else:
            descriptor = ResourceDescriptor.of(resource, **arguments)
        self._resources[name] = ResourceDeclaration(name, ResourceType(resource_type), descriptor)
        return self

    def add_shared(self, resources: Iterable[ResourceDeclaration]) -> Agent:
        """Declare resources shared with other agents, such as the connections of a module
        (or of a YAML file): each agent's plan holds them, built on its worker."""
        for declared in resources:
            self.add_resource(declared.name, declared.type, declared.descriptor)
        return self

    def add_tool(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        requires_approval: bool = False,
        approval_timeout_s: float | None = None,
        approval_deciders: list[str] | None = None,
    ) -> Agent:
        """Offer a module-level function as a tool resource (named after it by default).

        ``requires_approval``: the built-in tool-call action asks a person before each call
        (``approval_timeout_s``: how long it may wait; ``approval_deciders``: who may decide,
        others' decisions are refused) and runs it approved, with an edit's arguments, or not
        at all (docs/waits.md)."""
        if (name or function.__name__).startswith(SUBAGENT_TOOL_PREFIX):
            raise ValueError(
                f"tool name {name or function.__name__!r} uses the prefix "
                f"{SUBAGENT_TOOL_PREFIX!r}, which is reserved for sub-agent callables"
            )
        arguments: dict[str, Any] = {"function": class_path(function)}
        if name and name != function.__name__:
            arguments["name"] = name
        if description:
            arguments["description"] = description
        if requires_approval:  # only when set: plans of other tools keep their bytes
            arguments["requires_approval"] = True
        if approval_timeout_s is not None:
            arguments["approval_timeout_s"] = float(approval_timeout_s)  # as YAML reads it
        if approval_deciders is not None:
            arguments["approval_deciders"] = list(approval_deciders)
        return self.add_resource(
            name or function.__name__, ResourceType.TOOL, FunctionTool, **arguments
        )

    def add_prompt(
        self, name: str, text: str | None = None, *, messages: list[ChatMessage] | None = None
    ) -> Agent:
        """Declare a prompt template: one user ``text`` or a list of ``messages``."""
        if messages is not None:
            dumped = [m.model_dump(exclude_defaults=True) for m in messages]
            return self.add_resource(name, ResourceType.PROMPT, Prompt, messages=dumped)
        return self.add_resource(name, ResourceType.PROMPT, Prompt, text=text)

    def add_subagent(
        self,
        name: str,
        agent: Agent,
        *,
        description: str | None = None,
        input_schema: Mapping[str, Any] | None = None,
        input_type: type | str | None = None,
        result_type: type | str | None = None,
        timeout_seconds: float | None = None,
    ) -> Agent:
        """Register ``agent`` as the internal sub-agent ``name`` (an AGENT resource).

        The metadata belongs to this registration, so one agent may be registered under several
        names with different descriptions and schemas. The child is compiled into this agent's
        plan as the scope named after ``agent.name`` and runs inside it, for at most
        ``timeout_seconds`` (default ``InternalSubagent``'s).
        """
        known = self._children.get(agent.name)
        if known is not None and known is not agent:
            raise ValueError(
                f"agent {self.name!r} already has a different sub-agent named {agent.name!r}"
            )
        arguments: dict[str, Any] = {"agent": agent.name}
        if description is not None:
            arguments["description"] = description
        if input_schema is not None:
            arguments["input_schema"] = dict(input_schema)
        if timeout_seconds is not None:
            arguments["timeout_seconds"] = float(timeout_seconds)
        for field_name, reference in (("input_type", input_type), ("result_type", result_type)):
            if reference is not None:
                arguments[field_name] = (
                    reference if isinstance(reference, str) else class_path(reference)
                )
        self.add_resource(name, ResourceType.AGENT, InternalSubagent, **arguments)
        self._children[agent.name] = agent
        return self

    @property
    def children(self) -> dict[str, Agent]:
        """Agents registered with :meth:`add_subagent`, by scope (their name)."""
        return dict(self._children)

    def add_action(
        self,
        function: ActionFunction,
        *event_types: type[Event] | str,
        name: str | None = None,
        config: Mapping[str, Any] | None = None,
        sends: Sequence[type[Event] | str] | None = None,
    ) -> Agent:
        """Add an action on this instance; without event types, ``function``'s ``@action`` spec.

        ``sends`` (default: what the ``@action`` spec declares) lists the event types the action
        may send, checked at compile time like ``@action(..., sends=...)``.
        """
        spec = action_spec(function)
        if event_types:
            _check_action_signature(function)
            listen_to = tuple(event_type_name(t) for t in event_types)
        elif spec is not None:
            listen_to = spec.listen_to
        else:
            raise TypeError(
                f"{getattr(function, '__qualname__', repr(function))} is not an @action; pass "
                "the event types it handles (in YAML: listen_to)"
            )
        merged = {**(spec.config if spec else {}), **(config or {})}
        sent = (
            tuple(event_type_name(t) for t in sends)
            if sends is not None
            else (spec.sends if spec else ())
        )
        self._extra_actions.append(
            ActionDeclaration(
                name or function.__name__,
                function,
                listen_to,
                merged,
                sent,
                dict(spec.resource_keys) if spec else {},
            )
        )
        return self

    @property
    def resources(self) -> list[ResourceDeclaration]:
        """Declared resources, in declaration order."""
        return list(self._resources.values())

    @property
    def actions(self) -> list[ActionDeclaration]:
        """Class actions (base classes first, in definition order) then instance actions."""
        found: dict[str, ActionDeclaration] = {}
        for klass in reversed(type(self).__mro__):
            for attr, value in vars(klass).items():
                spec = action_spec(value)
                if spec is None:
                    continue
                function = value.__func__ if isinstance(value, staticmethod) else value
                found.pop(attr, None)  # an override takes the subclass's place in the order
                found[attr] = ActionDeclaration(
                    attr, function, spec.listen_to, spec.config, spec.sends, spec.resource_keys
                )
        declared = list(found.values())
        names = {a.name for a in declared}
        for extra in self._extra_actions:
            if extra.name in names:
                raise ValueError(f"agent {self.name!r} has two actions named {extra.name!r}")
            names.add(extra.name)
            declared.append(extra)
        return declared
