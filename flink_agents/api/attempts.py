"""How often and how patiently a call is attempted: :class:`RetryPolicy`, declared on a
connection or a sub-agent, and the seam through which attempts are counted per durable call.

A call to a model or to an external sub-agent may take several attempts. If attempts were only
counted in memory, a failover in the middle of a retry storm would restart the count and a call
could be tried forever. The durable layer therefore sets :data:`current_attempt_tracker` while it
runs a durable call; the tracker knows how many attempts the call's record already holds and
persists each new one. The loop that reads it is
:func:`flink_agents.providers.retry_loop.retry_within_budget`.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
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

    def record_attempt(self) -> None:
        """Persist ``attempts + 1``; called before an attempt is sent."""
        ...


current_attempt_tracker: ContextVar[AttemptTracker | None] = ContextVar(
    "current_attempt_tracker", default=None
)
"""The tracker of the durable call running in this context, if any."""


@contextmanager
def tracking_attempts(tracker: AttemptTracker) -> Iterator[AttemptTracker]:
    """Make ``tracker`` the current one for the duration of the block."""
    token = current_attempt_tracker.set(tracker)
    try:
        yield tracker
    finally:
        current_attempt_tracker.reset(token)


class RetryPolicy(BaseModel):
    """How often and how patiently to retry a call."""

    model_config = ConfigDict(extra="forbid")

    max_attempts: int = Field(default=3, ge=1, description="Attempts per durable call, in all.")
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
