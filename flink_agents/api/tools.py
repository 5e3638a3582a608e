"""Tools: callables a model may ask to run. Function tools derive their schema from a signature.

A TOOL resource is either one :class:`Tool` or a :class:`Toolset`, which offers several tools
it builds itself (an MCP server's, say); a chat model listing either offers every tool in it.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
from collections.abc import Callable
from typing import Any, ClassVar, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, create_model
from pydantic.fields import FieldInfo

from flink_agents.api.attempts import check_before_sending
from flink_agents.api.chat import ToolSpec
from flink_agents.api.context import InDoubtPolicy
from flink_agents.api.json_values import json_text
from flink_agents.api.refs import import_reference
from flink_agents.api.resources import Resource, ResourceType
from flink_agents.api.secret_values import scrub_secrets_json

TOOL_NAMESPACE_PATTERN = r"^[A-Za-z0-9_-]{1,32}$"
"""A toolset's namespace, the prefix of the names its tools are offered under: 1 to 32 of the
characters OpenAI and Anthropic accept in a tool name."""


class Tool(Resource):
    """Base of tools: a name, a description, an argument schema and ``call``."""

    resource_type: ClassVar[ResourceType] = ResourceType.TOOL

    def spec(self) -> ToolSpec:
        raise NotImplementedError

    @property
    def implementation(self) -> str:
        """What runs when the tool is called, as ``module:qualname``: the label its durable
        calls are recorded and logged under, so a replay notices another tool behind the same
        offered name. Subclasses backed by something else (a function, a server) name it."""
        return f"{type(self).__module__}:{type(self).__qualname__}"

    @property
    def in_doubt(self) -> InDoubtPolicy:
        """What a replay does with a call of this tool that was started before a failover and
        whose outcome is unknown: ``resend`` it (the default: the call is safe to make twice,
        or its service drops a repeat by the idempotency key) or ``fail`` it (a tool with side
        effects; the model is told the outcome is unknown)."""
        return "resend"

    def needs_approval(self, arguments: dict[str, Any]) -> bool:
        """Whether a call with ``arguments`` waits for a person's approval before it runs
        (docs/waits.md); the default: no."""
        return False

    def approval_timeout(self) -> float | None:
        """Seconds an approval of this tool may take before it is refused (None: no limit)."""
        return None

    def approvers(self) -> list[str] | None:
        """Who may decide an approval of this tool (a decision's ``by``); None: anyone."""
        return None

    def check_arguments(self, arguments: dict[str, Any]) -> None:
        """Raise if ``arguments`` do not fit the tool's schema (an approver's edit is checked
        before the tool runs); the default checks nothing (the tool's own call does)."""

    async def call(self, arguments: dict[str, Any]) -> Any:
        raise NotImplementedError

    async def call_with_key(self, arguments: dict[str, Any], idempotency_key: str) -> Any:
        """Call with the durable call's idempotency key (``ctx.durable_call_key``).

        What the tool-call action runs as the durable call. A tool whose service can drop a
        repeated request (one sent again after a failover) passes the key on; the default
        ignores it and calls :meth:`call`.
        """
        return await self.call(arguments)

    async def call_for_model(self, arguments: dict[str, Any], idempotency_key: str) -> str:
        """:meth:`call_with_key`, its result rendered as the model is shown it
        (:func:`~flink_agents.api.json_values.json_text`; a value with no rendering raises
        :class:`~flink_agents.api.json_values.NotJsonError`, the call's failure).

        What the tool-call action runs as the durable call: the text is what is recorded, so
        the model reads the same bytes live and when the outcome is handed back after a
        failover. Recorded under the tool's :attr:`implementation`, like ``call_with_key``.
        """
        # Scrubbed before it is recorded or shown: a tool may echo a key it was given.
        text = json_text(await self.call_with_key(arguments, idempotency_key))
        return scrub_secrets_json(text)


class Toolset(Resource):
    """A TOOL resource offering several tools, built when it is opened (or, for a toolset that
    :attr:`lists_on_demand`, when they are first needed)."""

    resource_type: ClassVar[ResourceType] = ResourceType.TOOL

    lists_on_demand: ClassVar[bool] = False
    """Listing the tools contacts something (an MCP server): a chat model offering them lists
    them when it first builds a request, and finds a tool by name with :meth:`tool_named`, so a
    replay, which builds no request and makes no call, never lists them."""

    def tools(self) -> list[Tool]:
        """The tools offered, in order; their ``spec().name`` is what a model calls."""
        raise NotImplementedError

    def tool_named(self, name: str) -> Tool | None:
        """The tool offered as ``name``, if any. A toolset that lists on demand answers
        without listing; the default looks ``name`` up in :meth:`tools`."""
        return next((tool for tool in self.tools() if tool.spec().name == name), None)


def tool_named(resource: Resource, name: str) -> Tool | None:
    """The tool a TOOL resource offers as ``name``, if any (see :meth:`Toolset.tool_named`)."""
    if isinstance(resource, Toolset):
        return resource.tool_named(name)
    return next((tool for tool in tools_of(resource) if tool.spec().name == name), None)


def tools_of(resource: Resource) -> list[Tool]:
    """The tools a TOOL resource offers: itself, or a toolset's tools."""
    if isinstance(resource, Toolset):
        return resource.tools()
    if isinstance(resource, Tool):
        return [resource]
    raise TypeError(f"a {type(resource).__name__} is neither a Tool nor a Toolset")


_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters):\s*$")
_ARG_LINE = re.compile(r"^\s*(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into a summary and per-argument descriptions."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    in_args = False
    current: str | None = None
    for line in lines:
        if _ARGS_HEADER.match(line):
            in_args = True
            continue
        if in_args:
            if line and not line.startswith(" ") and line.rstrip().endswith(":"):
                in_args = False  # the next section (Returns:, Raises:) begins
                continue
            match = _ARG_LINE.match(line)
            if match and line.startswith("    ") and not line.startswith("        "):
                current = match.group(1).lstrip("*")
                params[current] = match.group(3).strip()
            elif current and line.strip():
                params[current] = f"{params[current]} {line.strip()}"
        elif not params:
            summary.append(line)
    return " ".join(part.strip() for part in summary if part.strip()), params


def arguments_model(function: Callable[..., Any], name: str) -> type[BaseModel]:
    """A pydantic model of ``function``'s parameters, described from its docstring."""
    _, descriptions = parse_docstring(function.__doc__)
    # With their extras: `Annotated[str, Field(description=..., ge=...)]` keeps its metadata.
    hints = get_type_hints(function, include_extras=True)
    fields: dict[str, Any] = {}
    for param in inspect.signature(function).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolSignatureError(
                f"tool {name!r} ({defined_at(function)}): *args/**kwargs cannot be described "
                "to a model"
            )
        annotation = hints.get(param.name, Any)
        if isinstance(param.default, FieldInfo):  # `city: str = Field(description=...)`
            fields[param.name] = (annotation, param.default)
            continue
        default = ... if param.default is param.empty else param.default
        described = descriptions.get(param.name)
        # A description only when the docstring has one: an explicit None would replace the
        # one an Annotated Field gives.
        fields[param.name] = (
            annotation,
            Field(default, description=described) if described else Field(default),
        )
    return create_model(f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)


def defined_at(function: Callable[..., Any]) -> str:
    """``file:line`` where ``function`` is defined (its name when it has no source file)."""
    code = getattr(function, "__code__", None)
    if code is None:
        return getattr(function, "__qualname__", repr(function))
    return f"{code.co_filename}:{code.co_firstlineno}"


class ToolSignatureError(TypeError):
    """A function that cannot be offered to a model as a tool."""


def tool_signature_warnings(function: Callable[..., Any], name: str) -> list[str]:
    """What is doubtful in ``function``'s signature as a tool ``name`` (untyped parameters:
    the model is offered them with no type, so it guesses); raises
    :class:`ToolSignatureError` for one that cannot be offered: a method (its ``self`` would
    be a required argument the model cannot give) or ``*args``/``**kwargs`` (no schema
    describes them). Each message names the tool, where it is defined and the fix."""
    where = f"tool {name!r} ({defined_at(function)})"
    parameters = list(inspect.signature(function).parameters.values())
    qualname = getattr(function, "__qualname__", "")
    if parameters and parameters[0].name in ("self", "cls") and "." in qualname:
        raise ToolSignatureError(
            f"{where} is a method: the model would be offered its {parameters[0].name!r} as a "
            "required argument it cannot give; make it a module-level function (or a "
            "@staticmethod) taking only what the model passes"
        )
    for param in parameters:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            stars = "*" if param.kind is param.VAR_POSITIONAL else "**"
            raise ToolSignatureError(
                f"{where} takes {stars}{param.name}, which no schema describes to a model; "
                "name each argument the model may pass, with its type"
            )
    annotated = getattr(function, "__annotations__", {})  # unresolved names count as typed
    untyped = [param.name for param in parameters if param.name not in annotated]
    if not untyped:
        return []
    example = ", ".join(f"{param}: str" for param in untyped)
    return [
        f"{where}: parameters without a type: {untyped}; the model is offered them as any "
        f"JSON value and must guess; annotate them, e.g. ({example})"
    ]


def function_tool_name(function: str, name: str | None = None) -> str:
    """The name a :class:`FunctionTool` for ``function`` (``module:qualname``) is offered as:
    ``name`` if given, else the function's own name. Plan validation checks it too."""
    return name or function.rpartition(":")[2].rpartition(".")[2]


class FunctionTool(Tool):
    """A tool backed by a module-level Python function (sync or async)."""

    function: str = Field(description="The function as module:qualname.")
    name: str | None = None
    description: str | None = None
    requires_approval: bool = Field(
        default=False, description="Every call waits for a person's approval (docs/waits.md)."
    )
    approval_timeout_s: float | None = Field(
        default=None, gt=0, description="Seconds an approval may take before it is refused."
    )
    approval_deciders: list[str] | None = Field(
        default=None,
        min_length=1,
        description="Who may decide an approval (a decision's 'by'); others' are refused.",
    )

    _callable: Callable[..., Any] = PrivateAttr()
    _arguments: type[BaseModel] = PrivateAttr()

    def model_post_init(self, context: Any) -> None:
        self._callable = import_reference(self.function)
        self._arguments = arguments_model(self._callable, self.tool_name)

    @property
    def tool_name(self) -> str:
        """The name the model is offered (and calls) this tool by."""
        return function_tool_name(self.function, self.name)

    @property
    def implementation(self) -> str:
        return self.function

    def needs_approval(self, arguments: dict[str, Any]) -> bool:
        return self.requires_approval

    def approval_timeout(self) -> float | None:
        return self.approval_timeout_s

    def approvers(self) -> list[str] | None:
        return self.approval_deciders

    def check_arguments(self, arguments: dict[str, Any]) -> None:
        self._arguments.model_validate(arguments)

    def spec(self) -> ToolSpec:
        summary, _ = parse_docstring(self._callable.__doc__)
        schema = self._arguments.model_json_schema()
        schema.pop("title", None)
        return ToolSpec(
            name=self.tool_name,
            description=self.description or summary or self.tool_name,
            parameters=schema,
        )

    async def call(self, arguments: dict[str, Any]) -> Any:
        """Validate ``arguments`` and call the function.

        A sync function runs in a worker thread: it may block on I/O without holding up the
        other keys' runs, which share one event loop.
        """
        validated = self._arguments.model_validate(arguments)
        fields = type(validated).model_fields
        kwargs = {name: getattr(validated, name) for name in fields}
        if inspect.iscoroutinefunction(self._callable):
            check_before_sending()
            return await self._callable(**kwargs)
        result = await asyncio.to_thread(_checked_call, self._callable, kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result


def _checked_call(function: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """``function(**kwargs)`` in the worker thread, checked right before: a freeze while the
    call waited for a worker must not let it leave (``check_before_sending``)."""
    check_before_sending()
    return function(**kwargs)


def function_label(function: Callable[..., Any], separator: str = ".") -> str:
    """A label for what ``function`` runs: ``module<separator>qualname`` (of the wrapped function
    for a partial; of the type for a callable object); for a tool's bound method, the tool's
    :attr:`Tool.implementation`, so a tool is named by what backs it, not by the shared method.
    The store records labels with ``.``; the event log names functions with ``:``."""
    while isinstance(function, functools.partial):
        function = function.func
    owner = getattr(function, "__self__", None)
    if isinstance(owner, Tool):
        return owner.implementation
    module = getattr(function, "__module__", None) or type(function).__module__
    name = getattr(function, "__qualname__", None) or type(function).__qualname__
    return f"{module}{separator}{name}"
