"""RateLimit and RateLimiter: token buckets per minute, split among subtasks, held by a
Retry-After, corrected by reported usage; the clock is a seam, so nothing here sleeps for real
except where the wait is the contract (and then for a few milliseconds)."""

from __future__ import annotations

import asyncio

import pytest

from flink_agents.api.rate_limits import RateLimit, RateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_rate_limit_limits_something_and_splits_by_at_least_one() -> None:
    with pytest.raises(ValueError, match="requests_per_minute or tokens_per_minute"):
        RateLimit()
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        RateLimit(requests_per_minute=10, split=0)


def test_a_full_minute_goes_at_once_then_the_bucket_refills_evenly() -> None:
    clock = Clock()
    limiter = RateLimiter(RateLimit(requests_per_minute=60), clock)
    for _ in range(60):
        assert limiter.delay(0) == (0.0, "")
        limiter.take(0)
    assert limiter.delay(0) == (pytest.approx(1.0), "requests per minute")
    clock.now += 0.5
    assert limiter.delay(0)[0] == pytest.approx(0.5)
    clock.now += 0.5
    assert limiter.delay(0)[0] == pytest.approx(0.0)


def test_the_limit_is_split_among_the_subtasks() -> None:
    clock = Clock()
    limiter = RateLimiter(RateLimit(requests_per_minute=60, tokens_per_minute=600, split=3), clock)
    for _ in range(20):
        limiter.take(10)
    assert limiter.delay(0) == (pytest.approx(3.0), "requests per minute")  # 20 a minute each
    assert limiter.delay(10)[0] == pytest.approx(3.0)  # 200 tokens a minute: 10 in 3 s


def test_tokens_are_corrected_by_the_reported_usage_and_a_debt_is_waited_off() -> None:
    clock = Clock()
    limiter = RateLimiter(RateLimit(tokens_per_minute=600), clock)
    limiter.take(100)
    limiter.correct(taken=100, used=40)  # 60 given back
    assert limiter.delay(560) == (0.0, "")
    limiter.take(560)
    limiter.correct(taken=560, used=620)  # the reply used 60 more than taken: a debt of 60
    assert limiter.delay(0)[0] == pytest.approx(6.0)  # 10 tokens a second pay it off


def test_an_attempt_larger_than_the_bucket_waits_for_a_full_bucket_not_forever() -> None:
    clock = Clock()
    limiter = RateLimiter(RateLimit(tokens_per_minute=60), clock)
    limiter.take(30)
    assert limiter.delay(1000)[0] == pytest.approx(30.0)


def test_a_retry_after_holds_every_attempt_until_it_has_passed() -> None:
    clock = Clock()
    limiter = RateLimiter(RateLimit(requests_per_minute=1000), clock)
    limiter.hold(2.0)
    limiter.hold(1.0)  # a shorter hold does not shorten the longer one
    assert limiter.delay(0) == (pytest.approx(2.0), "Retry-After")
    clock.now += 2.0
    assert limiter.delay(0)[0] == pytest.approx(0.0)


def test_acquire_waits_in_arrival_order_and_says_which_limit_held_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock()
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:  # the clock moves by exactly what was asked
        slept.append(seconds)
        clock.now += seconds
        await real_sleep(0)

    monkeypatch.setattr("flink_agents.api.rate_limits.asyncio.sleep", sleep)

    async def scenario() -> list[tuple[str, float, str]]:
        limiter = RateLimiter(RateLimit(requests_per_minute=60), clock)  # one a second
        for _ in range(60):
            limiter.take(0)
        waited: list[tuple[str, float, str]] = []

        async def one(name: str) -> None:
            seconds, why = await limiter.acquire(0)
            waited.append((name, seconds, why))

        await asyncio.gather(one("first"), one("second"))
        return waited

    waited = asyncio.run(scenario())
    assert [(name, why) for name, _, why in waited] == [
        ("first", "requests per minute"),
        ("second", "requests per minute"),  # queued behind the first, then a second more
    ]
    assert waited[0][1] == pytest.approx(1.0)
    assert slept == [pytest.approx(1.0), pytest.approx(1.0)]
