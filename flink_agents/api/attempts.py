"""How often and how patiently a call is attempted: :class:`RetryPolicy`, declared on a
connection or a sub-agent, and the seam through which attempts are counted per durable call.

A call to a model or to an external sub-agent may take several attempts. If attempts were only
counted in memory, a failover in the middle of a retry storm would restart the count and a call
could be tried forever. The durable layer therefore sets :data:`current_attempt_tracker` while it
runs a durable call; the tracker knows how many attempts the call's record already holds, and how
many of them failed, and persists each new one. The loop that reads it is
:func:`flink_agents.providers.retry_loop.retry_within_budget`.

Two budgets, because an attempt ends in one of two ways. One that *failed* (an error reply, a
timeout, a dropped connection) spends ``RetryPolicy.max_attempts``. One that a *restart* ended (it
was in flight when the job failed over, for whatever reason) spends
``RetryPolicy.max_interrupted_attempts`` instead: a storm of restarts caused elsewhere (a failing
checkpoint, a lost TaskManager) must not fail calls that never failed, but a call that brings its
process down every time must not be sent forever either.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from flink_agents.api.moved import moved_names_getattr


@runtime_checkable
class AttemptTracker(Protocol):
    """Attempts of the durable call in progress."""

    @property
    def attempts(self) -> int:
        """Attempts already made for this call (restored from its record after a restart)."""
        ...

    @property
    def failed_attempts(self) -> int:
        """Of ``attempts``, those seen to fail; the others (when none is in flight) were ended
        by restarts."""
        ...

    def record_attempt(self) -> None:
        """Persist ``attempts + 1``; called before an attempt is sent."""
        ...

    def record_failed_attempt(self) -> None:
        """Persist ``failed_attempts + 1``; called when the attempt in flight failed."""
        ...


class CountedAttempts:
    """An :class:`AttemptTracker` that counts in memory: for a call with no record to keep its
    attempts in (made without a store, or a fallback connection's own attempts). A restart
    forgets its counts."""

    __slots__ = ("attempts", "failed_attempts")

    def __init__(self, attempts: int = 0, failed_attempts: int = 0) -> None:
        self.attempts = attempts
        self.failed_attempts = failed_attempts

    def record_attempt(self) -> None:
        self.attempts += 1

    def record_failed_attempt(self) -> None:
        self.failed_attempts += 1


current_attempt_tracker: ContextVar[AttemptTracker | None] = ContextVar(
    "current_attempt_tracker", default=None
)
"""The tracker of the durable call running in this context, if any."""

current_send_check: ContextVar[Callable[[], None] | None] = ContextVar(
    "current_send_check", default=None
)
"""What the durable call running in this context checks right before its request leaves the
process (its engine's freeze fence), if anything: see :func:`check_before_sending`."""


def check_before_sending() -> None:
    """Raise if the engine running this context's durable call must send nothing more.

    The durable layer checks its freeze fence before it hands a call over, but the process may
    freeze after that check: while the call waits for a worker thread, a connection slot or a
    retry's backoff. Resumed past Flink's heartbeat timeout, its task runs elsewhere already,
    and the request must not leave. So whatever sends a call's request calls this right before
    it: the retry loop before every attempt, a tool before its function.
    """
    check = current_send_check.get()
    if check is not None:
        check()


@contextmanager
def tracking_attempts(
    tracker: AttemptTracker, send_check: Callable[[], None] | None = None
) -> Iterator[AttemptTracker]:
    """Make ``tracker`` (and ``send_check``, for :func:`check_before_sending`) the current one
    for the duration of the block."""
    token = current_attempt_tracker.set(tracker)
    check_token = current_send_check.set(send_check)
    try:
        yield tracker
    finally:
        current_send_check.reset(check_token)
        current_attempt_tracker.reset(token)


class RetryPolicy(BaseModel):
    """How often and how patiently to retry a call."""

    model_config = ConfigDict(extra="forbid")

    max_attempts: int = Field(
        default=3,
        ge=1,
        description="Attempts per durable call that may fail (counted across restarts); the"
        " last one's failure is the call's.",
    )
    max_interrupted_attempts: int = Field(
        default=10,
        ge=0,
        description=(
            "Attempts per durable call that a restart may end (each is sent again) before the"
            " call fails: a bound for a call that brings its process down every time."
        ),
    )
    initial_backoff_seconds: float = Field(default=0.5, ge=0)
    max_backoff_seconds: float = Field(default=20.0, ge=0)
    multiplier: float = Field(default=2.0, ge=1)
    jitter: float = Field(
        default=0.25, ge=0, le=1, description="Fraction of each backoff drawn at random."
    )
    max_retry_after_seconds: float = Field(
        default=60.0, ge=0, description="Cap on a server's Retry-After."
    )

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first retry)."""
        if retry_after is not None:
            return min(retry_after, self.max_retry_after_seconds)
        base = min(
            self.initial_backoff_seconds * self.multiplier ** (retry - 1), self.max_backoff_seconds
        )
        # Jitter spreads retries of many keys that failed together (a rate limit, say).
        return base * (1 - self.jitter * random.random())


if not TYPE_CHECKING:  # hidden from mypy, which would otherwise accept any name of this module
    __getattr__ = moved_names_getattr(__name__)  # the loop's names moved to providers
