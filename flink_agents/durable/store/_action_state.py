"""Durable records: call results and per-action state, with structured identities.

Pure data (pydantic); no Flink, no engine imports. Identities are structured and rendered with
`canonical_json`, never joined with a separator that user data might contain.
"""

from __future__ import annotations

import enum
import time
import traceback
from collections.abc import Mapping
from typing import Any, TypeVar, get_args

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from flink_agents.api.budgets import CallSpend
from flink_agents.api.secret_values import scrub_error_text
from flink_agents.durable.store._canonical import canonical_json
from flink_agents.durable.store._canonical import json_string as _json_string
from flink_agents.durable.store._payload import PICKLE_TAG, decode_payload, encode_payload
from flink_agents.observability import CallKind

CALL_KINDS: frozenset[str] = frozenset(get_args(CallKind))

#: Upper bound (UTF-8 bytes) for an error's message and trace in a record.
MAX_TRACE_BYTES = 4096
_TRUNCATION_MARKER = "[... truncated: {n} bytes in total, the last part kept ...]\n"


_M = TypeVar("_M", bound=BaseModel)
_set = object.__setattr__


def _unvalidated(model: type[_M], values: dict[str, Any], given: set[str]) -> _M:
    """An instance of ``model`` holding ``values`` (every field, in declaration order), as
    validating them would leave it, with ``given`` the fields passed: for values the runtime
    made and whose types were checked: 2,000-10,000 instructions less a model than validating
    (bench/results/analysis.md, "The store's records, cheaper to build and write"); pydantic's
    `model_construct` loops over every field in Python and costs more than validating. None of
    these models has private attributes or extra fields."""
    instance = model.__new__(model)
    _set(instance, "__dict__", values)
    _set(instance, "__pydantic_fields_set__", given)
    _set(instance, "__pydantic_extra__", None)
    _set(instance, "__pydantic_private__", None)
    return instance


def now_ms() -> float:
    """Wall-clock epoch milliseconds, the unit of `started_at` / `finished_at`."""
    return time.time() * 1000.0


def cap_text(text: str) -> str:
    """Cap `text` at `MAX_TRACE_BYTES` UTF-8 bytes, keeping the tail (where a traceback's cause
    is).

    A truncated result starts with a marker that gives the original size.
    """
    # "surrogatepass": a lone surrogate (undecodable bytes of a subprocess's output, say) is
    # kept, as 3 bytes, and written to the record as its JSON escape (codec.py).
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= MAX_TRACE_BYTES:
        return text
    marker = _TRUNCATION_MARKER.format(n=len(data))
    tail = data[len(data) - (MAX_TRACE_BYTES - len(marker.encode("utf-8"))) :]
    start = 0
    while start < len(tail) and tail[start] & 0xC0 == 0x80:  # inside a character: skip it
        start += 1
    return marker + tail[start:].decode("utf-8", "surrogatepass")


class CallStatus(str, enum.Enum):
    """Outcome of a durable call."""

    PENDING = "pending"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class CallError(BaseModel):
    """Why a call failed: exception type, message and (capped) traceback."""

    model_config = ConfigDict(frozen=True)

    type: str
    message: str
    trace: str | None = None

    @pydantic.field_validator("message", "trace")
    @classmethod
    def _cap(cls, value: str | None) -> str | None:
        # Scrubbed before capped: a key in a 401 body or a URL never reaches a record.
        return None if value is None else cap_text(scrub_error_text(value))

    @classmethod
    def from_exception(cls, exc: BaseException) -> CallError:
        """Describe `exc` with its full traceback (capped to `MAX_TRACE_BYTES`)."""
        kind = type(exc)
        return cls(
            type=f"{kind.__module__}.{kind.__qualname__}",
            message=str(exc),
            trace="".join(traceback.format_exception(kind, exc, exc.__traceback__)),
        )


class TrustedPickle(str):
    """A pickled payload (base64 text) made in this process or read from an authenticated
    record: the only kind `CallResult.value` unpickles. The payload carries its trust, so a
    result needs no private attribute (pydantic initialises those in Python, for every result
    made); a payload parsed from JSON is a plain `str`, never trusted. Serialized as the text
    it is, and equal to it."""

    __slots__ = ()


class TrustedTag(str):
    """A payload type tag read from an authenticated record: the only kind `CallResult.value`
    may import a module for (a tag from an unsigned record resolves only among the modules
    this process loaded). Like `TrustedPickle`, the value carries its trust."""

    __slots__ = ()


_PENDING_GIVEN = frozenset(
    (
        "call_id",
        "status",
        "function",
        "args_digest",
        "arguments",
        "attempts",
        "failed_attempts",
        "started_at",
        "kind",
    )
)


class CallResult(BaseModel):
    """The durable outcome of one model, tool or sub-agent call.

    `call_id` is the identity (deterministic, chosen by the engine). `function` is a label for
    humans and `args_digest` (see `digest_arguments`) lets replay detect a changed call; neither
    is part of the identity. `arguments` is the arguments' JSON as text (`arguments_text`,
    capped): it only shows what changed when a replay finds another call. The payload is
    stored as JSON plus `payload_type` (see `encode_payload`); read it back with `value()`.
    """

    call_id: str
    status: CallStatus
    payload: Any = None
    payload_type: str | None = None
    error: CallError | None = None
    attempts: int = Field(default=0, ge=0)
    """Attempts sent (each recorded before it is sent)."""
    # Not written while 0, as `kind` while None: such a record is what earlier versions wrote.
    failed_attempts: int = Field(default=0, ge=0, exclude_if=lambda failed: failed == 0)
    """Of `attempts`, those seen to fail; the others were ended by restarts (or one is in
    flight). 0 in records written before it was recorded."""
    function: str = ""
    args_digest: str = ""
    arguments: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    # Not written when None: a record without a kind is byte for byte what earlier versions
    # wrote, and theirs decode with None.
    kind: CallKind | None = Field(default=None, exclude_if=lambda kind: kind is None)
    """What the call called (a model, a tool, a sub-agent, another function); None in records
    written before it was recorded."""
    spend: CallSpend | None = Field(default=None, exclude_if=lambda spend: spend is None)
    """What a metered model call spent (tokens, and cost as priced when it was recorded);
    None for other calls and in records written before budgets (docs/budgets.md)."""

    @pydantic.model_validator(mode="after")
    def _check_status(self) -> CallResult:
        if self.status is CallStatus.FAILED and self.error is None:
            raise ValueError("a FAILED call result needs an error")
        if self.status is not CallStatus.FAILED and self.error is not None:
            raise ValueError(f"a {self.status.name} call result cannot carry an error")
        return self

    @classmethod
    def pending(
        cls,
        call_id: str,
        *,
        function: str = "",
        args_digest: str = "",
        arguments: str | None = None,
        attempts: int = 1,
        failed_attempts: int = 0,
        started_at: float | None = None,
        kind: CallKind | None = None,
    ) -> CallResult:
        """A call that has started (attempt number `attempts`, `failed_attempts` of them seen
        to fail) but has no outcome yet."""
        if started_at is None:
            started_at = now_ms()
        if (
            cls is CallResult
            and type(call_id) is str
            and type(function) is str
            and type(args_digest) is str
            and (arguments is None or type(arguments) is str)
            and type(attempts) is int
            and attempts >= 0
            and type(failed_attempts) is int
            and failed_attempts >= 0
            and type(started_at) is float
            and (kind is None or kind in CALL_KINDS)
        ):  # what the runtime passes: nothing to validate
            values = {
                "call_id": call_id,
                "status": CallStatus.PENDING,
                "payload": None,
                "payload_type": None,
                "error": None,
                "attempts": attempts,
                "failed_attempts": failed_attempts,
                "function": function,
                "args_digest": args_digest,
                "arguments": arguments,
                "started_at": started_at,
                "finished_at": None,
                "kind": kind,
                "spend": None,
            }
            return _unvalidated(cls, values, set(_PENDING_GIVEN))
        return cls(
            call_id=call_id,
            status=CallStatus.PENDING,
            function=function,
            args_digest=args_digest,
            arguments=arguments,
            attempts=attempts,
            failed_attempts=failed_attempts,
            started_at=started_at,
            kind=kind,
        )

    def succeed(
        self, value: Any, result_type: Any = None, *, finished_at: float | None = None
    ) -> CallResult:
        """A copy of this result marked SUCCEEDED with `value` (of the declared `result_type`,
        if given: see `encode_payload`) as payload."""
        payload, tag = encode_payload(value, result_type)
        if tag == PICKLE_TAG:  # made in this process: it may be unpickled here
            payload = TrustedPickle(payload)
        return self._copy(
            {
                "status": CallStatus.SUCCEEDED,
                "payload": payload,
                "payload_type": tag,
                "error": None,
                "finished_at": now_ms() if finished_at is None else finished_at,
            }
        )

    def fail(
        self,
        error: CallError | BaseException,
        *,
        finished_at: float | None = None,
        spend: CallSpend | None = None,
    ) -> CallResult:
        """A copy of this result marked FAILED with `error` (an exception is described) and
        what the call spent all the same (`spend`: a delegation's calls made before it failed)."""
        if isinstance(error, BaseException):
            error = CallError.from_exception(error)
        return self._copy(
            {
                "status": CallStatus.FAILED,
                "payload": None,
                "payload_type": None,
                "error": error,
                "finished_at": now_ms() if finished_at is None else finished_at,
                "spend": spend,
            }
        )

    def _copy(self, update: dict[str, Any]) -> CallResult:
        """``model_copy(update=update)``: the same copy, without its Python layers."""
        if type(self) is not CallResult:  # a subclass may hold private attributes
            return self.model_copy(update=update)
        values = {**self.__dict__, **update}
        return _unvalidated(CallResult, values, self.__pydantic_fields_set__ | update.keys())

    @property
    def is_open_wait(self) -> bool:
        """A wait the run is paused at: a wait call recorded PENDING."""
        return self.kind == "wait" and self.status is CallStatus.PENDING

    def value(self, result_type: Any = None) -> Any:
        """The payload as a Python value; `result_type` (if given) wins over the recorded type."""
        trusted = isinstance(self.payload, TrustedPickle) or isinstance(
            self.payload_type, TrustedTag
        )
        return decode_payload(self.payload, self.payload_type, result_type, trusted=trusted)


class RunKey(BaseModel):
    """Identity of one agent run: `(agent, key, seq)`."""

    model_config = ConfigDict(frozen=True)

    agent: str
    key: str
    seq: int = Field(ge=0)

    def canonical(self) -> str:
        """Canonical JSON of this identity."""
        return canonical_json(self.model_dump())

    def action(self, action: str, event_id: str | None = None) -> ActionStateKey:
        """The state key of `action` within this run (of its invocation on `event_id`, if given)."""
        if type(action) is str and (event_id is None or type(event_id) is str):
            # This run's fields are validated already: nothing to validate.
            values = {
                "agent": self.agent,
                "key": self.key,
                "seq": self.seq,
                "action": action,
                "event_id": event_id,
            }
            key = _unvalidated(ActionStateKey, values, set(_KEY_FIELDS))
            # Its record key rendered around this run's part, rendered once per run (a run
            # has several action keys): the text `ActionStateKey._render` gives.
            agent, run_key, seq = self._rendered_parts()
            if event_id is None:
                values[_RENDERED] = (
                    f'{{"action":{_json_string(action)},"agent":{agent},"key":{run_key},'
                    f'"seq":{seq}}}'
                )
            else:
                values[_RENDERED] = (
                    f'{{"action":{_json_string(action)},"agent":{agent},'
                    f'"event_id":{_json_string(event_id)},"key":{run_key},"seq":{seq}}}'
                )
            return key
        return ActionStateKey(
            agent=self.agent, key=self.key, seq=self.seq, action=action, event_id=event_id
        )

    def _rendered_parts(self) -> tuple[str, str, str]:
        """``agent``, ``key`` and ``seq`` as a record key writes them (see
        `ActionStateKey._render`), kept in the instance's __dict__ like a rendered key."""
        parts: tuple[str, str, str] | None = self.__dict__.get(_PARTS)
        if parts is None:
            parts = _json_string(self.agent), _json_string(self.key), f"{self.seq:d}"
            self.__dict__[_PARTS] = parts
        return parts


_PARTS = "_key_parts"  # where a `RunKey` keeps the rendered parts of its action keys
_KEY_FIELDS = frozenset(("agent", "key", "seq", "action", "event_id"))
_RENDERED = "_rendered"  # where an `ActionStateKey` keeps its canonical JSON


class ActionStateKey(BaseModel):
    """Identity of one action's state within a run: `(agent, key, seq, action[, event_id])`.

    An action may handle several events in one run; the engine keys the state of each
    invocation by the id of the event it handled. `event_id` None names the action as a whole.
    """

    model_config = ConfigDict(frozen=True)

    agent: str
    key: str
    seq: int = Field(ge=0)
    action: str
    event_id: str | None = None

    def canonical(self) -> str:
        """Canonical JSON of this identity; also the Kafka record key.

        `event_id` is left out when None, so keys without it render as they always did.
        Rendered once per key (the key is frozen): a store renders it for every lookup and
        every write, and an action's state is looked up and put with the same key.
        """
        # Kept in the instance's __dict__, which pydantic neither serializes nor compares
        # (what `functools.cached_property` does, without the lock it takes in Python 3.11).
        rendered = self.__dict__.get(_RENDERED)
        if rendered is None:
            rendered = self.__dict__[_RENDERED] = self._render()
        return rendered

    def model_copy(
        self, *, update: Mapping[str, Any] | None = None, deep: bool = False
    ) -> ActionStateKey:
        """A copy (see pydantic), rendered again if asked for: ``update`` may change fields."""
        copied = super().model_copy(update=update, deep=deep)
        copied.__dict__.pop(_RENDERED, None)
        return copied

    def _render(self) -> str:
        # Filled in field by field, in sorted order, with the JSON encoder's own string form:
        # the text `canonical_json` gives for these fields, at a quarter of its cost.
        text = _json_string
        action, agent, key, seq = text(self.action), text(self.agent), text(self.key), self.seq
        if self.event_id is None:
            return f'{{"action":{action},"agent":{agent},"key":{key},"seq":{seq:d}}}'
        event = text(self.event_id)
        return f'{{"action":{action},"agent":{agent},"event_id":{event},"key":{key},"seq":{seq:d}}}'

    @property
    def run(self) -> RunKey:
        """The run this action belongs to."""
        return RunKey(agent=self.agent, key=self.key, seq=self.seq)


_INPUT_FIELDS = frozenset(("value", "admitted_at"))
_OPENED_GIVEN = frozenset(("key", "run_input"))


class RunInput(BaseModel):
    """The input record a run started from, and when it was admitted (epoch ms).

    Kept in the state of the run's first action invocation (no record of its own), so a
    recorded run can be re-executed outside its job (`flink-agents replay`).
    """

    model_config = ConfigDict(frozen=True)

    value: Any = None
    admitted_at: float = Field(default_factory=now_ms)

    @classmethod
    def of(cls, value: Any, admitted_at: float) -> RunInput:
        """``RunInput(value=value, admitted_at=admitted_at)``, unvalidated for a float time."""
        if cls is not RunInput or type(admitted_at) is not float:
            return cls(value=value, admitted_at=admitted_at)
        return _unvalidated(cls, {"value": value, "admitted_at": admitted_at}, set(_INPUT_FIELDS))


class ActionState(BaseModel):
    """What one action of one run has done so far: its events, memory writes and calls.

    `calls` keeps the order in which calls were recorded; call ids are unique within it.
    `run_input` is set on the state of the first action invoked on the run's input event.
    """

    key: ActionStateKey
    completed: bool = False
    events: list[dict[str, Any]] = Field(default_factory=list)
    memory_updates: list[dict[str, Any]] = Field(default_factory=list)
    calls: list[CallResult] = Field(default_factory=list)
    run_input: RunInput | None = None

    @classmethod
    def opened(cls, key: ActionStateKey, run_input: RunInput | None = None) -> ActionState:
        """``ActionState(key=key, run_input=run_input)``: a new state, unvalidated for a key
        and an input of their own types (validation would keep both as they are)."""
        if cls is not ActionState or type(key) is not ActionStateKey:
            return cls(key=key, run_input=run_input)
        if run_input is not None and type(run_input) is not RunInput:
            return cls(key=key, run_input=run_input)
        values = {
            "key": key,
            "completed": False,
            "events": [],
            "memory_updates": [],
            "calls": [],
            "run_input": run_input,
        }
        return _unvalidated(cls, values, set(_OPENED_GIVEN))

    def complete(self) -> None:
        """Mark the action completed: what ``self.completed = True`` does (the field and the
        fields set), without pydantic's `__setattr__`, which runs in Python."""
        self.__dict__["completed"] = True
        self.__pydantic_fields_set__.add("completed")

    @pydantic.model_validator(mode="after")
    def _unique_call_ids(self) -> ActionState:
        if len(self.calls) < 2:  # most states: every new one, and those of call-less actions
            return self
        ids = [c.call_id for c in self.calls]
        if len(ids) != len(set(ids)):
            raise ValueError(f"duplicate call ids in action state {self.key.canonical()}")
        return self

    def call(self, call_id: str) -> CallResult | None:
        """The recorded result for `call_id`, if any."""
        return next((c for c in self.calls if c.call_id == call_id), None)

    def record_call(self, result: CallResult) -> None:
        """Replace the result with the same call id, or append it (keeps first-seen order)."""
        for i, existing in enumerate(self.calls):
            if existing.call_id == result.call_id:
                self.calls[i] = result
                return
        self.calls.append(result)
