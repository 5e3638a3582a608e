"""Retries with exponential backoff and jitter, counted against the durable call's budget.

The budget is ``max_attempts`` per durable call, not per process: when the durable layer provides
an :class:`~flink_agents.api.attempts.AttemptTracker`, attempts made before a restart count, and
each attempt is recorded before it is sent (so a crash mid-attempt still spends it).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field

from flink_agents.api.attempts import AttemptTracker, current_attempt_tracker
from flink_agents.providers._http_errors import AttemptFailure, CallLabel, ModelCallError

T = TypeVar("T")


class RetryPolicy(BaseModel):
    """How often and how patiently to retry a model call."""

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


class _LocalTracker:
    """Counts attempts in memory when no durable call is tracking them."""

    def __init__(self) -> None:
        self.attempts = 0

    def record_attempt(self) -> None:
        self.attempts += 1


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]], policy: RetryPolicy, label: CallLabel
) -> T:
    """Run ``attempt`` until it succeeds, fails for good, or the attempt budget is spent.

    ``attempt`` raises :class:`AttemptFailure` on failure; anything else propagates unchanged.
    Raises :class:`ModelCallError` when the call fails.
    """
    tracker: AttemptTracker = current_attempt_tracker.get() or _LocalTracker()
    if tracker.attempts >= policy.max_attempts:
        raise ModelCallError(
            label,
            f"the attempt budget of {policy.max_attempts} was spent before a restart",
            attempts=tracker.attempts,
        )
    retry = 0
    while True:
        tracker.record_attempt()
        try:
            return await attempt()
        except AttemptFailure as failure:
            if not failure.retryable or tracker.attempts >= policy.max_attempts:
                reason = failure.reason
                if failure.retryable:
                    reason += f" (attempt budget of {policy.max_attempts} spent)"
                raise ModelCallError(
                    label,
                    reason,
                    attempts=tracker.attempts,
                    status=failure.status,
                    request_id=failure.request_id,
                ) from None
            retry += 1
            await asyncio.sleep(policy.delay(retry, failure.retry_after))
