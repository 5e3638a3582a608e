"""Backoff arithmetic and Retry-After parsing."""

from __future__ import annotations

import asyncio
import email.utils

import pytest

from flink_agents.api.attempts import CountedAttempts, tracking_attempts
from flink_agents.providers._http_errors import CallLabel, ModelCallError
from flink_agents.providers._retry import RetryPolicy, call_with_retries
from flink_agents.providers.retry_loop import (
    AttemptFailure,
    parse_retry_after,
    retry_within_budget,
)

LABEL = CallLabel("test", "m", 1)


def test_retry_after_in_seconds_and_as_a_date() -> None:
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after(" 0.5 ") == 0.5
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert parse_retry_after(date, now=now) == pytest.approx(30.0)
    assert parse_retry_after(email.utils.formatdate(now - 30, usegmt=True), now=now) == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


def test_backoff_grows_is_capped_and_jittered() -> None:
    policy = RetryPolicy(initial_backoff_seconds=1, multiplier=2, max_backoff_seconds=5, jitter=0.5)
    for _ in range(50):
        assert 0.5 <= policy.delay(1) <= 1.0
        assert 1.0 <= policy.delay(2) <= 2.0
        assert 2.5 <= policy.delay(10) <= 5.0
    assert len({policy.delay(3) for _ in range(20)}) > 1  # jitter spreads retries


def test_retry_after_wins_over_backoff_but_is_capped() -> None:
    policy = RetryPolicy(initial_backoff_seconds=1, max_retry_after_seconds=10)
    assert policy.delay(1, retry_after=3) == 3
    assert policy.delay(1, retry_after=3600) == 10


def test_final_failures_are_not_retried_and_other_errors_propagate() -> None:
    calls = 0

    async def refuse() -> None:
        nonlocal calls
        calls += 1
        raise AttemptFailure("HTTP 403: forbidden", retryable=False, status=403)

    with pytest.raises(ModelCallError, match="forbidden"):
        asyncio.run(call_with_retries(refuse, RetryPolicy(), LABEL))
    assert calls == 1

    async def bug() -> None:
        raise KeyError("a bug, not a model failure")

    with pytest.raises(KeyError):
        asyncio.run(call_with_retries(bug, RetryPolicy(), LABEL))


class Frozen(BaseException):
    """What a tripped freeze fence raises: no retry loop may take it for a failure."""


def test_the_send_check_runs_before_every_attempt_and_stops_the_next_one_from_leaving() -> None:
    sent: list[int] = []
    checks: list[int] = []

    def send_check() -> None:
        checks.append(len(sent))
        if len(checks) == 2:  # the process froze in the first retry's backoff
            raise Frozen

    async def attempt() -> str:
        sent.append(1)
        raise AttemptFailure("503", retryable=True)

    async def scenario() -> None:
        with tracking_attempts(CountedAttempts(), send_check) as tracker:
            with pytest.raises(Frozen):
                await retry_within_budget(attempt, RetryPolicy(initial_backoff_seconds=0))
            assert tracker.attempts == 1  # the stopped attempt was neither sent nor counted

    asyncio.run(scenario())
    assert sent == [1]
    assert checks == [0, 1]
