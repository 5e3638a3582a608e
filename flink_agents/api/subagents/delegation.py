"""Sub-agents: AGENT resources an action (or a chat model) delegates work to.

* :class:`SubagentSetup` is the base of every sub-agent resource: a description, an input
  schema (explicit, or derived from a pydantic ``input_type``), an optional ``result_type`` and
  :meth:`SubagentSetup.invoke`, which does the actual work. :class:`InternalSubagent` runs an
  :class:`~flink_agents.api.agent.Agent` compiled into the parent plan as a child scope;
  ``flink_agents.providers.http_subagent.HttpSubagent`` calls an HTTP service.
* :class:`Subagent` is what action code uses: ``submit`` a call, await a
  :class:`SubagentResult`.
* :class:`BaseSubagentCallable` is one call as a durable call: its body (invoke and narrow)
  and its reconciler; the delegated work's failure is raised as :class:`SubagentError`.

The engine carries a delegation out (:mod:`flink_agents.runtime.delegated_calls`: the call's
ids, its durable run, the failed result): the action context implements :class:`Delegating`, which
:class:`Subagent` and :class:`InternalSubagent` reach through :func:`delegating`. Every call has
``(session_id, call_id)``, assigned by the engine or a session continued by the caller (who then
guarantees it is not reused for an unrelated conversation); docs/subagents.md, "Identities".

Signature. The durable call's arguments are the :class:`SubagentRequest`, so its recorded
signature covers the target and the input: a replay that delegates other input at the same
position is a replay mismatch, not the old result.

Failures. The delegated work's failure raises :class:`SubagentError` *inside* the durable call, so
the durable layer records the call as FAILED; the engine turns it into
``SubagentResult(success=False, error_message=...)`` outside it. The message is capped at
:data:`MAX_ERROR_BYTES` (summary first, then the end of the trace); the full trace goes to the log.
A replayed failure carries the recorded message, so it is byte-identical to the live one.
Infrastructure errors (:class:`~flink_agents.api.context.InfrastructureError`: replay mismatch,
store, codec) and cancellation are not the work's failure: they propagate to the action, and a
cancelled delegation stays PENDING, to be sent again on replay. A timeout is the work's failure
(``InternalSubagent.timeout_seconds``; ``HttpSubagent`` retries a timed-out attempt first).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, Field, PrivateAttr, TypeAdapter, field_validator
from pydantic.errors import PydanticUserError

from flink_agents.api.context import (
    InDoubtPolicy,
    InfrastructureError,
    Reconciler,
    ReconcileRequest,
    RunnerContext,
)
from flink_agents.api.json_values import NotJsonError, json_form, json_generic
from flink_agents.api.refs import import_reference
from flink_agents.api.resources import Resource, ResourceType

logger = logging.getLogger(__name__)

R = TypeVar("R")

SUBAGENT_TOOL_PREFIX = "subagent_"
"""Callables named ``subagent_<name>`` delegate to the AGENT resource ``<name>``; tools may not
use the prefix."""

DELEGATION_MARKER = "(Delegates the task to a sub-agent.)"
"""Ends every sub-agent callable's description, so a model can tell a delegation from a tool."""

MAX_ERROR_BYTES = 4096
"""Cap, in UTF-8 bytes, of a failed result's ``error_message`` (what is recorded durably).

Not above the store's cap of a recorded message, so a recorded message is never cut again and a
replayed failure reads exactly like the live one."""

_ELLIPSIS = "…"

DEFAULT_CHILD_TIMEOUT_SECONDS = 600.0
"""Default limit of an internal sub-agent's whole run (``InternalSubagent.timeout_seconds``)."""

TEXT_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "The task for the sub-agent."}},
    "required": ["input"],
}
"""An input schema for sub-agents that take one text, such as a ReActAgent without a prompt."""


class SubagentResult(BaseModel, Generic[R]):
    """Outcome of a sub-agent call: ``result`` on success, ``error_message`` on failure.

    Parametrised by the sub-agent's declared result type, so a replayed result is rebuilt as
    that type (``SubagentResult[Review]``); without one, ``result`` is JSON-generic data.
    """

    success: bool
    result: R | None = None
    error_message: str | None = None

    @classmethod
    def failure(cls, error: BaseException) -> SubagentResult[Any]:
        """A failed result for ``error`` (the message is capped)."""
        message = str(error) if isinstance(error, SubagentError) else failure_message(error)
        return SubagentResult[Any](success=False, error_message=message)

    @property
    def reason(self) -> str:
        """The first line of ``error_message``: what went wrong, without the trace."""
        return (self.error_message or "").split("\n", 1)[0]


class SubagentError(RuntimeError):
    """The delegated work failed; the message (capped at :data:`MAX_ERROR_BYTES`) is recorded
    as it is and becomes the failed result's ``error_message``, live and on replay alike."""

    def __init__(self, message: str) -> None:
        super().__init__(_utf8_head(message, MAX_ERROR_BYTES))


def failure_message(error: BaseException) -> str:
    """``Type: message`` then the innermost frames of the trace, within ``MAX_ERROR_BYTES``
    UTF-8 bytes."""
    summary = _utf8_head(f"{type(error).__name__}: {error}", MAX_ERROR_BYTES)
    frames = "".join(traceback.format_tb(error.__traceback__)).rstrip()
    room = MAX_ERROR_BYTES - len(summary.encode()) - 1
    if not frames or room <= 0:
        return summary
    tail = frames.encode()[-room:].decode(errors="ignore")
    return f"{summary}\n{tail}"


def _utf8_head(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` UTF-8 bytes, else its head and an ellipsis that do."""
    data = text.encode()
    if len(data) <= limit:
        return text
    room = limit - len(_ELLIPSIS.encode())
    return data[:room].decode(errors="ignore") + _ELLIPSIS


@dataclass(frozen=True)
class SubagentRequest:
    """One call to the sub-agent ``name``.

    ``delegation_key`` is the digest of the call's durable identity: an idempotency key for an
    external service and the root of an internal child's ids.
    """

    name: str
    input: Any
    session_id: str
    call_id: str
    durable_call_id: str
    delegation_key: str


class SubagentSetup(Resource):
    """Base of sub-agent resources (``ResourceType.AGENT``). Subclasses implement :meth:`invoke`.

    ``input_schema`` (a JSON schema of an object) is what a chat model is told to send; without
    it the schema is derived from ``input_type`` (a pydantic model as ``module:qualname``).
    ``result_type`` narrows a result to that type (extra fields are ignored).
    """

    resource_type: ClassVar[ResourceType] = ResourceType.AGENT

    description: str | None = None
    input_schema: dict[str, Any] | None = None
    input_type: str | None = Field(default=None, description="A pydantic model as module:qualname.")
    result_type: str | None = Field(default=None, description="A type as module:qualname.")
    in_doubt: InDoubtPolicy = Field(
        default="resend",
        description="A call found in flight after a failover, outcome unknown: send it again "
        "(resend) or record it as failed (fail).",
    )

    _input_model: Any = PrivateAttr(default=None)
    _result_model: Any = PrivateAttr(default=None)

    @field_validator("input_schema")
    @classmethod
    def _not_blank(cls, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        if schema is not None and not schema:
            raise ValueError("input_schema is blank; give a JSON schema or leave it out")
        return schema

    def model_post_init(self, context: Any) -> None:
        self._input_model = import_reference(self.input_type) if self.input_type else None
        self._result_model = import_reference(self.result_type) if self.result_type else None

    async def invoke(self, request: SubagentRequest, ctx: RunnerContext) -> Any:
        """Do the work of one call and return its result (raise on failure)."""
        raise NotImplementedError

    def tool_schema(self) -> dict[str, Any] | None:
        """The schema a chat model calls this sub-agent with: explicit, else derived, else None.

        Only a schema of an object can be a tool's arguments; an input type rendering as
        anything else gives None. An input type that cannot be rendered raises.
        """
        if self.input_schema is not None:
            return self.input_schema
        if self._input_model is None:
            return None
        try:
            schema = TypeAdapter(self._input_model).json_schema()
        except PydanticUserError as exc:
            raise ValueError(
                f"input type {self.input_type} cannot be rendered as a JSON schema ({exc}); "
                "give the sub-agent an explicit input_schema"
            ) from None
        if "$ref" in schema:
            raise ValueError(
                f"input type {self.input_type} is self-referential; "
                "give the sub-agent an explicit input_schema"
            )
        if schema.get("type") != "object":
            return None
        schema.pop("title", None)
        return schema

    def check_input(self, value: Any) -> None:
        """Refuse a mapping input that does not fit ``input_type`` (the input is not changed)."""
        if self._input_model is not None and isinstance(value, Mapping):
            TypeAdapter(self._input_model).validate_python(dict(value))

    def narrow(self, raw: Any) -> Any:
        """``raw`` as the declared result type, or as JSON-generic data when none is declared.

        A declared type is anything pydantic validates (a model, a dataclass, fields of
        datetime, Enum, UUID, Decimal, ...): the value is dumped in JSON mode and validated
        back, so the live result is the one a replay rebuilds from the record. Raises
        :class:`~flink_agents.api.json_values.NotJsonError` (with the path) for a result JSON
        cannot express, or one that does not survive its JSON form (a NaN, a set in an ``Any``
        field, ...).
        """
        if self._result_model is None:
            return json_generic(raw)
        adapter = TypeAdapter(self._result_model)
        value = adapter.validate_python(raw)
        rebuilt = adapter.validate_python(json_form(value, self._result_model))
        if rebuilt != value:
            raise NotJsonError("$", f"{value!r} does not survive its JSON form ({rebuilt!r})")
        return rebuilt

    def result_model(self) -> type[SubagentResult[Any]]:
        """The type a recorded result of this sub-agent is rebuilt as."""
        # Parametrised at run time with the declared type: a value, which mypy cannot check.
        result: type[SubagentResult[Any]] = SubagentResult.__class_getitem__(  # type: ignore[assignment]
            self._result_model or Any
        )
        return result

    def make_callable(self, request: SubagentRequest, ctx: RunnerContext) -> BaseSubagentCallable:
        """The callable for ``request``. Override to pass a reconciler.

        No reconciler by default: a call found started but unfinished after a failover follows
        ``in_doubt`` (by default sent again). Resending is safe for internal sub-agents (their
        own calls are durable) and for services that honour the idempotency key.
        """
        return BaseSubagentCallable(self, request, ctx, reconciler=None, in_doubt=self.in_doubt)


class BaseSubagentCallable:
    """One sub-agent call as a durable call; the work's failure raises :class:`SubagentError`.

    The durable call is ``self(request)``: the request is its argument, so the recorded
    signature covers the target and the input. A reconciler receives the call's
    :class:`~flink_agents.api.context.ReconcileRequest` (``args[0]`` is the
    :class:`SubagentRequest`, ``idempotency_key`` its ``delegation_key``) and returns what the
    call would have: a :class:`SubagentResult` (or data validating as one of the declared
    result type), raises (recorded as the delegation's failure, with the message a failed
    result carries live and replayed) or returns :data:`~flink_agents.api.context.NOT_DONE`
    (``in_doubt`` applies).
    """

    def __init__(
        self,
        setup: SubagentSetup,
        request: SubagentRequest,
        ctx: RunnerContext,
        *,
        reconciler: Reconciler | None,
        in_doubt: InDoubtPolicy = "resend",
    ) -> None:
        self.setup = setup
        self.request = request
        self.reconciler = reconciler
        self.in_doubt = in_doubt
        self._ctx = ctx

    async def __call__(self, request: SubagentRequest) -> SubagentResult[Any]:
        """The durable call's body: invoke and narrow, raising :class:`SubagentError` when the
        work fails. Infrastructure errors pass through: they are not the work's outcome."""
        try:
            self.setup.check_input(request.input)
            value = self.setup.narrow(await self.setup.invoke(request, self._ctx))
        except (SubagentError, InfrastructureError):
            raise
        except Exception as exc:
            logger.warning("sub-agent %r failed", request.name, exc_info=exc)
            raise SubagentError(failure_message(exc)) from exc
        return self.setup.result_model()(success=True, result=value)

    async def reconcile(self, call: ReconcileRequest) -> Any:
        """The reconciler's answer; its failure becomes a :class:`SubagentError`, so the
        recorded message is the one the failed result carries live and on every replay."""
        assert self.reconciler is not None
        try:
            found = self.reconciler(call)
            return await found if inspect.isawaitable(found) else found
        except (SubagentError, InfrastructureError):
            raise
        except Exception as exc:
            logger.warning("reconciling sub-agent %r failed", self.request.name, exc_info=exc)
            raise SubagentError(failure_message(exc)) from exc


class Subagent:
    """The caller's handle on the AGENT resource ``name`` within one action invocation.

    ``await Subagent(ctx, "reviewer").call(text)`` or, to run several at once,
    ``futures = [sub.submit(x) for x in items]`` then ``await asyncio.gather(*futures)``.
    Ids are assigned at submit time, in submit order, so they do not depend on scheduling.
    """

    def __init__(self, ctx: RunnerContext, name: str) -> None:
        setup = ctx.get_resource(name, ResourceType.AGENT)
        if not isinstance(setup, SubagentSetup):
            raise TypeError(f"AGENT resource {name!r} is a {type(setup).__name__}, not a sub-agent")
        self.name = name
        self.setup = setup
        self._ctx = ctx

    def submit(
        self, input: Any, *, session_id: str | None = None
    ) -> asyncio.Future[SubagentResult[Any]]:
        """Start a call; ``session_id`` continues a session (the caller keeps it unique)."""
        if session_id is not None and not (isinstance(session_id, str) and session_id):
            raise ValueError(f"session_id must be a non-empty string, got {session_id!r}")
        return delegating(self._ctx).delegate(self.name, self.setup, input, session_id)

    async def call(self, input: Any, *, session_id: str | None = None) -> SubagentResult[Any]:
        """Call and wait for the result."""
        return await self.submit(input, session_id=session_id)


class InternalSubagent(SubagentSetup):
    """An agent compiled into the parent plan as the child scope ``agent``; runs in-process.

    Registered with :meth:`flink_agents.api.agent.Agent.add_subagent`. The result is the list
    of the child run's outputs.

    The child run has ``timeout_seconds`` in all; past it the child is cancelled (its call in
    flight stays unrecorded) and the delegation fails for good. It is not attempted again: the
    child's own model and tool calls already retry their transient failures.
    """

    agent: str = Field(min_length=1, description="The child scope (the child agent's name).")
    timeout_seconds: float = Field(
        default=DEFAULT_CHILD_TIMEOUT_SECONDS, gt=0, description="Limit of the whole child run."
    )

    async def invoke(self, request: SubagentRequest, ctx: RunnerContext) -> list[Any]:
        child = delegating(ctx).run_child_scope(
            self.agent, request.input, delegation_key=request.delegation_key
        )
        try:
            return await asyncio.wait_for(child, self.timeout_seconds)
        except asyncio.TimeoutError:
            # The message is fixed text (no elapsed time): a replay hands back the same bytes.
            raise SubagentError(
                f"sub-agent {request.name!r} did not finish within {self.timeout_seconds} s"
            ) from None


@runtime_checkable
class Delegating(Protocol):
    """The engine's side of delegation, implemented by its action context (framework-internal:
    actions use :class:`Subagent`; the mechanics are
    :mod:`flink_agents.runtime.delegated_calls`)."""

    def delegate(
        self, name: str, setup: SubagentSetup, input: Any, session_id: str | None
    ) -> asyncio.Future[SubagentResult[Any]]:
        """Start one call to the sub-agent ``name``: assign its ids (a new session unless
        ``session_id`` continues one) and run it as a durable call; the work's failure is a
        failed result."""
        ...

    async def run_child_scope(self, scope: str, input: Any, *, delegation_key: str) -> list[Any]:
        """Run the internal sub-agent ``scope`` on ``input`` and return its outputs; the child's
        ids derive from ``delegation_key``. Called inside the delegation's durable call."""
        ...


def delegating(ctx: RunnerContext) -> Delegating:
    """``ctx`` as the engine's delegation seam; a context without one cannot delegate."""
    if not isinstance(ctx, Delegating):
        raise TypeError(f"{type(ctx).__name__} cannot delegate to sub-agents")
    return ctx
