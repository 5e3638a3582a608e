"""The event log's records: one typed record per thing that happened, told apart by ``kind``.

Lineage runs through the ids: a run is ``(agent, key, seq)``; an action invocation is the run,
the ``event_id`` it handled and its ``action``; an event names the ``upstream_id`` it was sent in
response to and the ``action`` that sent it; a durable call is the invocation plus its
``call_id``. Ids are the engine's deterministic ids, so a replay's records line up with the
first attempt's. Payloads are JSON values cut at the configured size (see
:class:`~flink_agents.observability.payloads.PayloadWriter`): never secrets. A record's payload
fields are its last fields, so that a JSON line can end with payloads rendered on their own
(:mod:`~flink_agents.observability.lines`).
"""

from __future__ import annotations

import functools
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from flink_agents.api.chat import TokenUsage
from flink_agents.api.connection_notes import ConnectionDecision
from flink_agents.api.json_values import json_bytes
from flink_agents.api.waits import Verdict, WaitKind

CallKind = Literal["model", "tool", "subagent", "wait", "function"]
"""What a durable call called: a chat model, a tool, a sub-agent, or any other function."""

CallOutcome = Literal["live", "replayed", "reconciled", "failed", "in-doubt"]
"""How a durable call got its result: made now (``live``), handed back from the action-state
store (``replayed``, a recorded failure included), found by its reconciler (``reconciled``),
made now or reconciled and raised (``failed``), or started before a failover with its outcome
unknown and recorded as failed under ``in_doubt="fail"`` (``in-doubt``)."""

RunStatus = Literal["succeeded", "failed", "cancelled", "paused"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    time: float = Field(description="Wall clock (seconds since the epoch) when it happened.")
    agent: str
    key: Any = Field(description="The run's key (a JSON value).")
    seq: int = Field(description="The key's input number: with agent and key, the run.")


class RunAdmitted(_Record):
    """An input was queued to run (first time, or again after a restore)."""

    kind: Literal["run_admitted"] = "run_admitted"


class RunStarted(_Record):
    """A run began executing."""

    kind: Literal["run_started"] = "run_started"
    input: Any = None


class RunFinished(_Record):
    """A run ended: ``failed`` when an action raised (either error policy)."""

    kind: Literal["run_finished"] = "run_finished"
    status: RunStatus
    latency_ms: float
    outputs: int = Field(default=0, description="Output events the run emitted.")
    error: str | None = None


class ActionStarted(_Record):
    """An action began handling an event."""

    kind: Literal["action_started"] = "action_started"
    action: str
    event_id: str
    event_type: str


class ActionFinished(_Record):
    """An action returned or raised; ``replayed`` when its recorded completion was reapplied
    instead of running it (it then has no ``action_started``)."""

    kind: Literal["action_finished"] = "action_finished"
    action: str
    event_id: str
    event_type: str
    latency_ms: float
    replayed: bool = False
    events_sent: int = 0
    error: str | None = None


class EventSent(_Record):
    """An action sent an event (or a replayed action's recorded event was reapplied)."""

    kind: Literal["event_sent"] = "event_sent"
    event_id: str
    event_type: str
    upstream_id: str | None = Field(description="The event whose handling sent this one.")
    action: str | None = Field(description="The action that sent it.")
    payload: Any = None


class EventDropped(_Record):
    """An event no action listens to was dropped. Its sender did not declare it in ``sends``
    (compiling refuses a declared type without a listener), so only running it showed it."""

    kind: Literal["event_dropped"] = "event_dropped"
    event_id: str
    event_type: str
    upstream_id: str | None = Field(description="The event whose handling sent this one.")
    action: str | None = Field(description="The action that sent it.")


class CallFinished(_Record):
    """A durable call's outcome."""

    kind: Literal["call"] = "call"
    event_id: str
    action: str
    call_id: str
    call_kind: CallKind
    function: str = Field(description="``module:qualname`` of what was called.")
    target: str | None = Field(
        default=None,
        description="What was called, by name: the model a model call asked for, the tool's "
        "name, the sub-agent's name.",
    )
    provider: str | None = Field(
        default=None, description="A model call's provider (its connection's ``provider``)."
    )
    outcome: CallOutcome
    attempts: int | None = Field(
        default=None,
        description="Attempts a retry loop reported (model calls; 0 for a function that does "
        "not retry); none when the outcome was handed back or reconciled.",
    )
    latency_ms: float
    usage: TokenUsage | None = Field(default=None, description="Tokens of a model call.")
    error: str | None = None
    arguments: Any = None
    result: Any = None


BudgetDecision = Literal["refused", "fallback", "soft_limit", "approval_asked", "approved"]
"""What a budget did to a new model call: refused it (``BudgetExceeded``), sent it to its
fallback connection, reached its soft threshold (a warning), paused the run to ask for approval
or let it go over the limit, approved."""


class BudgetNoted(_Record):
    """A budget refused a new model call, sent it to its fallback, or reached its soft
    threshold (docs/budgets.md)."""

    kind: Literal["budget"] = "budget"
    budget: str
    decision: BudgetDecision
    unit: Literal["tokens", "cost"]
    spent: float = Field(description="What the budget's window held (with reservations).")
    limit: float


class ConnectionNoted(_Record):
    """A chat model connection routed a call, moved it to the next connection after a
    failure, or held it back for a rate limit (docs/providers.md)."""

    kind: Literal["connection"] = "connection"
    connection: str = Field(description="The connection that decided.")
    decision: ConnectionDecision
    reason: str
    target: str | None = Field(default=None, description="Where the call was routed or moved.")
    waited_ms: float | None = Field(default=None, description="A rate-limit wait's length.")


WaitChange = Literal["paused", "resumed"]
"""What happened to a wait: a run paused at it (registered), or its decision, event, timeout or
time resumed the run."""


class WaitNoted(_Record):
    """A run paused at a durable wait, or its wait was resolved and the run resumes
    (docs/waits.md). A ``resumed`` record carries the verdict and who decided, never the
    decider's message nor an edit's arguments; a ``paused`` one carries what the run's
    ``waiting`` output record shows (the request, as a payload)."""

    kind: Literal["wait"] = "wait"
    wait_id: str
    wait_kind: WaitKind
    change: WaitChange
    deadline_ms: int | None = Field(default=None, description="When the wait times out (ms).")
    verdict: Verdict | None = Field(
        default=None, description="How the wait was resolved (``resumed``)."
    )
    by: str | None = Field(default=None, description="Who decided (a decision's ``by``).")
    request: Any = Field(default=None, description="What the wait asks (``paused``).")


LogRecord = Annotated[
    RunAdmitted
    | RunStarted
    | RunFinished
    | ActionStarted
    | ActionFinished
    | EventSent
    | EventDropped
    | CallFinished
    | BudgetNoted
    | ConnectionNoted
    | WaitNoted,
    Field(discriminator="kind"),
]
"""Any record of the event log."""

_RECORD = TypeAdapter[LogRecord](LogRecord)


class NotAnEventLogRecord(ValueError):
    """A line (of a file, or a message of a topic) that is not an event-log record."""


def parse_record(line: str | bytes, where: str | None = None) -> LogRecord:
    """A record from one JSON line of an event log file.

    Raises :class:`NotAnEventLogRecord` naming ``where`` the line is (``events.jsonl:3``) and
    what is wrong in a sentence, instead of pydantic's report on the union of every record kind.
    """
    try:
        return _RECORD.validate_json(line)
    except ValidationError as exc:
        prefix = "" if where is None else f"{where}: "
        raise NotAnEventLogRecord(f"{prefix}not an event log record: {_why(exc)}") from None


def _why(error: ValidationError) -> str:
    """What makes a line no record, from the first of pydantic's errors."""
    first = error.errors(include_url=False)[0]
    kind, location = first["type"], first["loc"]
    if kind == "json_invalid":
        return "not JSON"
    if kind == "dict_type" and not location:
        return "not a JSON object"
    if kind == "union_tag_not_found":
        return 'no "kind" field (every record has one: run_started, call, ...)'
    if kind == "union_tag_invalid":
        context = first.get("ctx", {})
        return f'"kind" is {context.get("tag")!r}, not one of {context.get("expected_tags")}'
    record_kind, *field = location
    message = first["msg"][:1].lower() + first["msg"][1:]
    more = error.error_count() - 1
    also = f" (and {more} more)" if more else ""
    return f'a "{record_kind}" record, but {".".join(map(str, field))}: {message}{also}'


def record_json(record: LogRecord) -> str:
    """One JSON line (without the newline) for ``record``: ``model_dump_json()``'s line.

    Serialized from the record's field values (in declaration order), which gives the same
    JSON (no record field has a custom serializer; tests/observability/test_log_records.py pins
    it) at a third of the CPU: pydantic's model serializer costs ~3 us a record on its own.
    """
    return json_bytes(record.__dict__).decode()


R = TypeVar("R", bound=_Record)


def construct(record_type: type[R], **fields: Any) -> R:
    """A record of trusted fields (the engine's values, already typed; every required field
    given), unvalidated.

    What ``record_type.model_construct(**fields)`` builds, at a fraction of its CPU: pydantic's
    loop over every field for its default cost ~10 us a record, about as much as the rest of the
    event log's work per record. Fields not given take their class defaults (no record field
    has a default factory); tests/observability/test_log_records.py pins that the result equals
    ``model_construct``'s, field for field and as JSON.
    """
    values = _template(record_type).copy()  # every field in order: the JSON keeps that order
    values.update(fields)
    record = record_type.__new__(record_type)
    object.__setattr__(record, "__dict__", values)
    object.__setattr__(record, "__pydantic_fields_set__", set(fields))
    object.__setattr__(record, "__pydantic_extra__", None)
    object.__setattr__(record, "__pydantic_private__", None)
    return record


@functools.cache
def _template(record_type: type[_Record]) -> dict[str, Any]:
    """Every field of ``record_type`` in declaration order, with its default (None if none)."""
    return {
        name: None if field.is_required() else field.default
        for name, field in record_type.model_fields.items()
    }
