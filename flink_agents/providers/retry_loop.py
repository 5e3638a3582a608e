"""The retry loop of a durable call: which failures earn another attempt, and the loop.

:func:`retry_within_budget` reads the durable call's attempt tracker
(:data:`~flink_agents.api.attempts.current_attempt_tracker`, set by the durable layer; without
one it counts locally), so its budgets are per durable call, not per process. Each attempt is
recorded before it is sent and each failure when it is seen: a failed attempt spends
``RetryPolicy.max_attempts``, one that a restart ended (recorded, never seen to fail) spends
``RetryPolicy.max_interrupted_attempts``.

Model providers and ``HttpSubagent`` share this one loop; a sub-agent or connection of your own
may use it too. What it follows, :class:`~flink_agents.api.attempts.RetryPolicy`, and the
tracker seam are declared in :mod:`flink_agents.api.attempts`.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any, TypeVar

from flink_agents.api.attempts import (
    AttemptTracker,
    CountedAttempts,
    RetryPolicy,
    check_before_sending,
    current_attempt_tracker,
)

T = TypeVar("T")

_MAX_REASON_CHARS = 500


# --- one failed attempt ----------------------------------------------------------------------


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
    """One attempt of a call failed: why, whether another attempt is worth it, and how long the
    server asked us to wait. Reasons come from response bodies and transport errors, never from
    credentials."""

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
        *,
        retryable: bool | None = None,
        target: str | None = None,
    ) -> AttemptFailure:
        """A failure from an HTTP error response; ``retryable`` unset: by the status;
        ``target``: the URL the request went to, named in the reason."""
        request_id = request_id or headers.get("x-request-id") or headers.get("request-id") or None
        where = f"HTTP {status} at {target}" if target else f"HTTP {status}"
        return cls(
            f"{where}: {message}" if message else where,
            retryable=is_retryable_status(status) if retryable is None else retryable,
            status=status,
            retry_after=parse_retry_after(headers.get("retry-after")),
            request_id=request_id,
        )

    def add_hint(self, hint: str) -> None:
        """Append ``hint`` (what the caller knows of the likely cause) to the reason."""
        if hint:
            self.reason = _short(self.reason + hint)
            self.args = (self.reason,)

    @classmethod
    def transport(cls, what: str, error: BaseException) -> AttemptFailure:
        """The connection failed, timed out or the body was cut short: worth another attempt."""
        cause = error.__cause__ or error.__context__
        detail = f"{type(error).__name__}: {error}"
        if cause is not None and str(cause) != str(error):  # httpx repeats its transport's
            detail += f" ({type(cause).__name__}: {cause})"
        target = request_target(error)
        return cls(f"{what}{f' at {target}' if target else ''}: {detail}", retryable=True)

    @classmethod
    def malformed(cls, detail: str) -> AttemptFailure:
        """The server answered 2xx with a body that does not follow the protocol."""
        return cls(f"malformed response body: {detail}", retryable=False)


def request_target(error: object) -> str | None:
    """Where the failed request went (scheme, host, port, path: no credentials, no query), when
    ``error`` carries its request as httpx's and the SDKs' errors (and httpx responses) do; a
    refused connection or a 404 then names the endpoint the configuration points at."""
    try:
        url = error.request.url  # type: ignore[attr-defined]
        port = f":{url.port}" if url.port else ""
        return f"{url.scheme}://{url.host}{port}{url.path}"
    except Exception:  # no request attached (httpx raises RuntimeError), or not an httpx URL
        return None


# --- the loop --------------------------------------------------------------------------------


class AttemptsFailed(Exception):
    """A call failed for good: its last failure was final, or the attempt budget is spent.

    ``last`` is the last attempt's failure; None when a budget was spent before a restart and
    no attempt was made now.
    """

    def __init__(self, reason: str, *, attempts: int, last: AttemptFailure | None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.attempts = attempts
        self.last = last


async def retry_within_budget(
    attempt: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    gate: Callable[[], AbstractAsyncContextManager[Any]] = nullcontext,
) -> T:
    """Run ``attempt`` until it succeeds, fails for good, or the attempt budget is spent.

    ``attempt`` raises :class:`AttemptFailure` on failure; anything else (cancellation too)
    propagates unchanged. Raises :class:`AttemptsFailed` when the call fails. Each attempt runs
    inside ``gate()`` (a connection's concurrency cap), entered before the attempt is recorded:
    waiting at the gate spends no attempt, and no slot is held between attempts.
    """
    tracker: AttemptTracker = current_attempt_tracker.get() or CountedAttempts()
    spent = _spent_before(tracker, policy)
    if spent is not None:
        raise AttemptsFailed(spent, attempts=tracker.attempts, last=None)
    retry = 0
    while True:
        try:
            async with gate():
                check_before_sending()  # a freeze at the gate or in the backoff: not sent
                tracker.record_attempt()
                return await attempt()
        except AttemptFailure as failure:
            tracker.record_failed_attempt()
            if not failure.retryable or tracker.failed_attempts >= policy.max_attempts:
                reason = failure.reason
                if failure.retryable:
                    reason += f" (attempt budget of {policy.max_attempts} spent)"
                raise AttemptsFailed(reason, attempts=tracker.attempts, last=failure) from None
            retry += 1
            await asyncio.sleep(policy.delay(retry, failure.retry_after))


def _spent_before(tracker: AttemptTracker, policy: RetryPolicy) -> str | None:
    """Why the call may not be sent again (a budget spent before a restart), if it may not."""
    if tracker.failed_attempts >= policy.max_attempts:  # a policy lowered since
        return f"the attempt budget of {policy.max_attempts} was spent before a restart"
    interrupted = tracker.attempts - tracker.failed_attempts
    if interrupted > policy.max_interrupted_attempts:
        return (
            f"{interrupted} attempts were ended by restarts, more than"
            f" max_interrupted_attempts ({policy.max_interrupted_attempts})"
        )
    return None
