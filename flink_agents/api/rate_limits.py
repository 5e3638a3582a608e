"""Rate limits of a chat model connection: requests and tokens per minute.

A connection with a :class:`RateLimit` holds each attempt of a call back until its
:class:`RateLimiter` has a request and the attempt's estimated tokens to spare. The limiter is a
token bucket per connection resource, i.e. per operator subtask: the limit is split evenly among
the ``split`` subtasks that share it (the runtime sets ``split`` to the job's parallelism), so the
provider sees at most the declared limit from the whole job. A provider's ``Retry-After`` on a
429 holds every attempt of the connection until it has passed. Time-based and in memory: a
restart starts with full buckets.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field, model_validator

WINDOW_SECONDS = 60.0
"""The limits are per minute; a bucket refills its whole capacity over this window."""


class RateLimit(BaseModel):
    """Requests and tokens per minute a connection may send, for the whole job."""

    model_config = ConfigDict(extra="forbid")

    requests_per_minute: float | None = Field(
        default=None, gt=0, description="Requests (attempts) per minute; none: no limit."
    )
    tokens_per_minute: float | None = Field(
        default=None,
        gt=0,
        description="Tokens per minute: each attempt takes its prompt's estimated tokens plus "
        "its max_tokens, corrected by the reply's reported usage; none: no limit.",
    )
    split: int = Field(
        default=1,
        ge=1,
        description="Subtasks the limits are split among; the runtime sets it to the job's "
        "parallelism.",
    )

    @model_validator(mode="after")
    def _limits_something(self) -> RateLimit:
        if self.requests_per_minute is None and self.tokens_per_minute is None:
            raise ValueError("a rate limit needs requests_per_minute or tokens_per_minute")
        return self


class _Bucket:
    """A token bucket: ``capacity`` refilled evenly over a minute; it may go below zero when a
    reply reports more than was taken (the next attempts then wait the debt off)."""

    __slots__ = ("capacity", "level", "per_second")

    def __init__(self, per_minute: float) -> None:
        self.capacity = per_minute
        self.level = per_minute
        self.per_second = per_minute / WINDOW_SECONDS

    def refill(self, elapsed: float) -> None:
        self.level = min(self.capacity, self.level + elapsed * self.per_second)

    def wait_for(self, amount: float) -> float:
        """Seconds until ``amount`` is available (an amount above the capacity waits for a full
        bucket: it could never fit otherwise)."""
        needed = min(amount, self.capacity) - self.level
        return 0.0 if needed <= 0 else needed / self.per_second


class RateLimiter:
    """The buckets of one connection resource (one subtask's share of its :class:`RateLimit`).

    Waiters are served one at a time in arrival order, so a large request is not starved by
    small ones. ``clock`` is a seam for tests.
    """

    def __init__(
        self,
        limit: RateLimit,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self._clock = clock
        split = limit.split
        rpm, tpm = limit.requests_per_minute, limit.tokens_per_minute
        self._requests = None if rpm is None else _Bucket(rpm / split)
        self._tokens = None if tpm is None else _Bucket(tpm / split)
        self._at = clock()
        self._held_until = 0.0
        self._turn: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None

    def _refill(self) -> float:
        now = self._clock()
        elapsed, self._at = now - self._at, now
        for bucket in (self._requests, self._tokens):
            if bucket is not None:
                bucket.refill(elapsed)
        return now

    def delay(self, tokens: int) -> tuple[float, str]:
        """Seconds before an attempt of ``tokens`` may go, and which limit holds it (0 and
        ``""`` when none does)."""
        now = self._refill()
        waits = [(self._held_until - now, "Retry-After")]
        if self._requests is not None:
            waits.append((self._requests.wait_for(1), "requests per minute"))
        if self._tokens is not None:
            waits.append((self._tokens.wait_for(tokens), "tokens per minute"))
        seconds, why = max(waits)
        return (seconds, why) if seconds > 0 else (0.0, "")

    def take(self, tokens: int) -> None:
        """Spend one request and ``tokens``."""
        self._refill()
        if self._requests is not None:
            self._requests.level -= 1
        if self._tokens is not None:
            self._tokens.level -= tokens

    def correct(self, taken: int, used: int) -> None:
        """An attempt took ``taken`` tokens and the reply reports ``used``: settle the
        difference."""
        if self._tokens is not None:
            self._tokens.level = min(self._tokens.capacity, self._tokens.level + taken - used)

    def hold(self, seconds: float) -> None:
        """Hold every attempt for ``seconds`` (a provider's ``Retry-After``)."""
        self._held_until = max(self._held_until, self._clock() + seconds)

    async def acquire(self, tokens: int) -> tuple[float, str]:
        """Wait until an attempt of ``tokens`` may go and spend it; returns the seconds waited
        (0: none) and the limit that held it longest."""
        loop = asyncio.get_running_loop()
        if self._turn is None or self._turn[0] is not loop:
            self._turn = (loop, asyncio.Lock())
        started = self._clock()
        reason = ""
        async with self._turn[1]:
            while True:
                seconds, why = self.delay(tokens)
                if seconds <= 0:
                    break
                reason = why
                await asyncio.sleep(seconds)
            self.take(tokens)
        return self._clock() - started if reason else 0.0, reason
