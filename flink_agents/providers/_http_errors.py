"""What went wrong with a model call: one failed attempt, or the whole call.

Providers turn whatever their client raises into an
:class:`~flink_agents.providers.retry_loop.AttemptFailure` (status, reason, whether it is worth
retrying, how long the server asked us to wait; shared with external sub-agents). The retry loop
turns the last one into a :class:`ModelCallError`, which is what the agent sees as the call's
failure.
Neither ever carries credentials: reasons come from response bodies and transport errors.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import ValidationError

from flink_agents.providers.retry_loop import AttemptFailure, request_target

T = TypeVar("T")

_BODY_CHARS = 200
"""How much of an unexpected response body an error quotes."""


def what_was_sent(body: Any) -> str:
    """A short account of a reply body that is not what the protocol says, for an error: the
    start of the text a gateway's error page or a wrong endpoint gave, or the JSON an SDK parsed
    (only the fields the server sent)."""
    if isinstance(body, str | bytes):
        text = body.decode(errors="replace") if isinstance(body, bytes) else body
        return f"text, not JSON: {text[:_BODY_CHARS]!r}"
    try:
        dump = getattr(body, "model_dump", None)
        data = dump(exclude_unset=True, warnings=False) if callable(dump) else body
        return f"{json.dumps(data, default=str)[:_BODY_CHARS]}"
    except (ValueError, TypeError, RecursionError):  # too deep, or fields no JSON can hold
        return f"a {type(body).__name__} that cannot be shown as JSON"


UNREADABLE_REPLY = (LookupError, TypeError, AttributeError, ValueError, RecursionError)
"""What reading a 2xx reply raises when a field is missing or of the wrong type: the SDKs build
their objects from the JSON without checking it, and our own models (``ToolCall``, ``TokenUsage``,
``ChatMessage``) refuse the wrong types as pydantic ``ValidationError`` (a ``ValueError``)."""


def unreadable_reply(protocol: str, error: BaseException, sent: Any = None) -> AttemptFailure:
    """The failure of an attempt whose 2xx reply does not follow ``protocol`` (a chat
    completion, a Messages reply, ...): what was wrong, and the start of what the server sent
    (``sent``, when the SDK got as far as an object). Not retryable: the server would likely
    answer the same."""
    shown = "" if sent is None else f"; the server sent {what_was_sent(sent)}"
    return AttemptFailure.malformed(f"not {protocol} ({_what_was_wrong(error)}){shown}")


def _what_was_wrong(error: BaseException) -> str:
    if isinstance(error, ValidationError):
        problems = [
            f"{error.title}.{_dotted(item['loc'])}: {item['msg']}" for item in error.errors()[:3]
        ]
        return "; ".join(problems)
    if isinstance(error, RecursionError):
        return "nested too deeply"
    return f"{type(error).__name__}: {str(error)[:_BODY_CHARS]}"


@dataclass(frozen=True)
class CallLabel:
    """Names a model call in errors and logs: provider, model and the call's ordinal."""

    provider: str
    model: str
    ordinal: int

    def __str__(self) -> str:
        return f"{self.provider} call #{self.ordinal} to model {self.model!r}"


class ModelCallError(RuntimeError):
    """A model call failed for good: the error is final, or the attempt budget is spent."""

    def __init__(
        self,
        label: CallLabel,
        reason: str,
        *,
        attempts: int,
        status: int | None = None,
        request_id: str | None = None,
    ) -> None:
        self.provider = label.provider
        self.model = label.model
        self.ordinal = label.ordinal
        self.reason = reason
        self.attempts = attempts
        self.status = status
        self.request_id = request_id
        where = f" (request id {request_id})" if request_id else ""
        # The count stays an attribute, out of the text: after a crash it counts the attempt the
        # crash cut off too, and a replayed conversation must read as the no-fault one.
        super().__init__(f"{label} failed{where}: {reason}")

    def __reduce__(self) -> tuple[object, ...]:
        # Failures are recorded by the durable layer; keep them picklable despite keyword args.
        label = CallLabel(self.provider, self.model, self.ordinal)
        state = (label, self.reason, self.attempts, self.status, self.request_id)
        return (_rebuild_call_error, state)


def _rebuild_call_error(
    label: CallLabel, reason: str, attempts: int, status: int | None, request_id: str | None
) -> ModelCallError:
    return ModelCallError(label, reason, attempts=attempts, status=status, request_id=request_id)


def _body_message(body: object) -> str:
    """The human message of an error body like ``{"error": {"message": ...}}`` (or FastAPI's
    ``{"detail": "Not Found"}``), if it has one."""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            detail = error.get("detail")
            return str(error.get("message") or (detail if isinstance(detail, str) else error))
        return str(error)
    return "" if body is None else str(body)


# One error of a pydantic ValidationError's text: its location line, then the message and type.
_PYDANTIC_ERROR = re.compile(
    r"^(?P<loc>\S[^\n]*)\n  (?P<msg>[^\n]*?) \[type=(?P<type>\w+)", re.MULTILINE
)
_PYDANTIC_COUNT = re.compile(r"(\d+) validation errors? for ")
# One error as FastAPI's RequestValidationError prints it: the repr of pydantic's error dict.
_ERROR_DICT = re.compile(
    r"'type': '(?P<type>\w+)', 'loc': \((?P<loc>[^)]*)\), 'msg': (?P<q>['\"])(?P<msg>.*?)(?P=q)"
)
_DICT_COUNT = re.compile(r"(\d+) validation errors?:")


def _dotted(loc: Any) -> str:
    parts = loc if isinstance(loc, list | tuple) else str(loc).split(", ")
    return ".".join(str(part).strip("'\"") for part in parts)


def _validation_errors(body: Any) -> tuple[int, list[tuple[str, str, str]]] | None:
    """(count, [(type, location, message), ...]) of a request validation error in an error
    body: FastAPI's 422 (``{"detail": [...]}``), or pydantic's errors as text in the message
    (a server that reports its own validation failure as a 500, as llama-cpp-python does)."""
    detail = body.get("detail") if isinstance(body, Mapping) else None
    if isinstance(detail, list) and detail and all(isinstance(e, Mapping) for e in detail):
        errors = [
            (str(e.get("type")), _dotted(e.get("loc", ())), str(e.get("msg"))) for e in detail
        ]
        return len(errors), errors
    text = _body_message(body)
    found = [(m["type"], m["loc"].strip(), m["msg"]) for m in _PYDANTIC_ERROR.finditer(text)]
    count = _PYDANTIC_COUNT.search(text)
    if not found:
        found = [(m["type"], _dotted(m["loc"]), m["msg"]) for m in _ERROR_DICT.finditer(text)]
        count = _DICT_COUNT.search(text)
        if any(loc.startswith("response.") for _, loc, _ in found):
            return None  # the server's own reply failed its check: not the request's fault
    if not found:
        return None
    return (int(count[1]) if count else len(found)), found


def validation_summary(body: Any) -> str | None:
    """One line for a request the server refused as invalid (a validation error), or None
    when ``body`` is not one. Such a refusal is deterministic: the same body fails the same
    way. A wall of union-branch errors comes down to its count and the first error that is not
    a branch whose tag did not match (pydantic's ``literal_error``)."""
    parsed = _validation_errors(body)
    if parsed is None:
        return None
    count, errors = parsed
    _, loc, msg = next((e for e in errors if e[0] != "literal_error"), errors[0])
    plural = "s" if count != 1 else ""
    return (
        f"the server refused the request as invalid ({count} validation error{plural}; "
        f"{loc}: {msg})"
    )


def status_failure(
    status: int,
    headers: Mapping[str, str],
    body: Any,
    request_id: str | None = None,
    target: str | None = None,
) -> AttemptFailure:
    """A failure from an HTTP error response with ``body`` (parsed JSON, or text). A validation
    error is summarized and never retried, whatever the status; a 404 names ``target``, the
    URL tried."""
    summary = validation_summary(body)
    return AttemptFailure.from_status(
        status,
        headers,
        summary or _body_message(body),
        request_id,
        retryable=False if summary else None,
        target=target if status == 404 else None,
    )


def _sdk_failure(
    error: Exception,
    *,
    status_error: type[Exception],
    connection_error: type[Exception],
) -> AttemptFailure | None:
    """Map an exception of a Stainless-generated SDK (openai, anthropic) to an attempt failure.

    Both SDKs raise ``APIStatusError`` (with the response) for HTTP errors, ``APIConnectionError``
    for transport problems (refused, timed out, body cut short) and let a body that is not JSON
    escape as ``ValueError`` (``RecursionError`` when nested too deeply). Returns None for
    anything else, which the caller re-raises.
    """
    if isinstance(error.__cause__, AttemptFailure):  # ours, raised inside the SDK's client
        return error.__cause__  # (the response cap): the SDK wrapped it as a connection error
    if isinstance(error, status_error):
        response = error.response  # type: ignore[attr-defined]
        body = getattr(error, "body", None)
        return status_failure(
            response.status_code,
            response.headers,
            body if body is not None else str(error),
            getattr(error, "request_id", None),
            request_target(error),
        )
    if isinstance(error, connection_error):
        return AttemptFailure.transport("request failed", error)
    if isinstance(error, ValueError):
        return AttemptFailure.malformed(f"{type(error).__name__}: {error}")
    if isinstance(error, RecursionError):  # the SDK's JSON parse of a deeply nested body
        return AttemptFailure.malformed("the body is JSON nested too deeply to read")
    return None


async def sdk_call(
    call: Awaitable[T], *, status_error: type[Exception], connection_error: type[Exception]
) -> T:
    """Await an SDK call, turning its errors into :class:`AttemptFailure`."""
    try:
        return await call
    except Exception as exc:
        failure = _sdk_failure(exc, status_error=status_error, connection_error=connection_error)
        if failure is None:
            raise
        raise failure from None
