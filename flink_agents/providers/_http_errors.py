"""What went wrong with a model call: one failed attempt, or the whole call.

Providers turn whatever their client raises into an :class:`AttemptFailure` (status, reason,
whether it is worth retrying, how long the server asked us to wait). The retry loop turns the
last one into a :class:`ModelCallError`, which is what the agent sees as the call's failure.
Neither ever carries credentials: reasons come from response bodies and transport errors.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

_MAX_REASON_CHARS = 500


def is_retryable_status(status: int) -> bool:
    """Rate limits, request timeouts and server errors are worth another attempt."""
    return status in (408, 429) or status >= 500


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP date), if any."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_REASON_CHARS else text[:_MAX_REASON_CHARS] + "..."


class AttemptFailure(Exception):
    """One attempt of a model call failed."""

    def __init__(
        self,
        reason: str,
        *,
        retryable: bool,
        status: int | None = None,
        retry_after: float | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(_short(reason))
        self.reason = _short(reason)
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after
        self.request_id = request_id

    @classmethod
    def from_status(
        cls,
        status: int,
        headers: Mapping[str, str],
        message: str,
        request_id: str | None = None,
    ) -> AttemptFailure:
        """A failure from an HTTP error response."""
        request_id = request_id or headers.get("x-request-id") or headers.get("request-id") or None
        return cls(
            f"HTTP {status}: {message}" if message else f"HTTP {status}",
            retryable=is_retryable_status(status),
            status=status,
            retry_after=parse_retry_after(headers.get("retry-after")),
            request_id=request_id,
        )

    @classmethod
    def transport(cls, what: str, error: BaseException) -> AttemptFailure:
        """The connection failed, timed out or the body was cut short: worth another attempt."""
        cause = error.__cause__ or error.__context__
        detail = f"{type(error).__name__}: {error}"
        if cause is not None:
            detail += f" ({type(cause).__name__}: {cause})"
        return cls(f"{what}: {detail}", retryable=True)

    @classmethod
    def malformed(cls, detail: str) -> AttemptFailure:
        """The server answered 2xx with a body that does not follow the protocol."""
        return cls(f"malformed response body: {detail}", retryable=False)


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
        super().__init__(f"{label} failed after {attempts} attempt(s){where}: {reason}")

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
    """The human message of an error body like ``{"error": {"message": ...}}``, if it has one."""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            return str(error.get("message") or error)
        return str(error)
    return "" if body is None else str(body)


def _sdk_failure(
    error: Exception,
    *,
    status_error: type[Exception],
    connection_error: type[Exception],
) -> AttemptFailure | None:
    """Map an exception of a Stainless-generated SDK (openai, anthropic) to an attempt failure.

    Both SDKs raise ``APIStatusError`` (with the response) for HTTP errors, ``APIConnectionError``
    for transport problems (refused, timed out, body cut short) and let a body that is not JSON
    escape as ``ValueError``. Returns None for anything else, which the caller re-raises.
    """
    if isinstance(error, status_error):
        response = error.response  # type: ignore[attr-defined]
        message = _body_message(getattr(error, "body", None)) or str(error)
        return AttemptFailure.from_status(
            response.status_code, response.headers, message, getattr(error, "request_id", None)
        )
    if isinstance(error, connection_error):
        return AttemptFailure.transport("request failed", error)
    if isinstance(error, ValueError):
        return AttemptFailure.malformed(f"{type(error).__name__}: {error}")
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
