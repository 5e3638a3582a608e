"""A connection's rate_limit: each attempt waits at the gate for its request and tokens (the
tokens corrected by the reply's reported usage), a 429's Retry-After holds every attempt of the
connection, and each wait is a ``rate_limited`` note. The limiter's clock is faked and its sleep
moves it, so nothing waits for real."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from flink_agents.api.chat import ChatMessage, ChatRequest
from flink_agents.api.connection_notes import ConnectionNote, noting_connections
from flink_agents.api.rate_limits import RateLimiter
from flink_agents.providers import ModelCallError
from flink_agents.providers.openai_compatible import OpenAICompatibleChatModelConnection
from flink_agents.providers.scripted import ScriptedChatModelConnection
from tests.budget_samples import CALL_TOKENS, UsageServer
from tests.providers.fake_servers import ScriptedResponse


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The limiters' clock; their sleeps move it by what they ask."""
    fake = Clock()
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        fake.now += seconds
        await real_sleep(0)

    monkeypatch.setattr("flink_agents.api.rate_limits.asyncio.sleep", sleep)
    return fake


def limited(connection: Any, clock: Clock) -> Any:
    connection._limiter = RateLimiter(connection.rate_limit, clock)
    return connection


def ask(connection: Any, notes: list[ConnectionNote], text: str) -> ChatMessage:
    async def call() -> ChatMessage:
        with noting_connections(notes.append):
            request = ChatRequest(messages=[ChatMessage(role="user", content=text)], max_tokens=16)
            reply: ChatMessage = await connection.chat(request)
            return reply

    return asyncio.run(call())


def test_tokens_per_minute_hold_the_call_that_does_not_fit_its_reported_usage_counts(
    clock: Clock,
) -> None:
    notes: list[ConnectionNote] = []
    with UsageServer() as server:
        connection = limited(
            OpenAICompatibleChatModelConnection(
                base_url=server.base_url,
                model="big",
                rate_limit={"tokens_per_minute": 3 * CALL_TOKENS},
            ),
            clock,
        )
        for i in range(4):
            ask(connection, notes, f"k/{i}")
        assert server.request_count == 4
    # Three calls' reported usage (100 each) empty the bucket: the fourth waits for its
    # worst case (prompt estimate + max_tokens) at 5 tokens a second.
    [note] = notes
    assert (note.decision, note.reason) == ("rate_limited", "waited for tokens per minute")
    assert note.connection == "OpenAICompatibleChatModelConnection big"
    fourth = ChatRequest(messages=[ChatMessage(role="user", content="k/3")], max_tokens=16)
    worst_case = OpenAICompatibleChatModelConnection.rate_limit_tokens(fourth)
    assert note.waited_ms == pytest.approx(worst_case / 5 * 1000)


def test_a_429s_retry_after_holds_every_attempt_of_the_connection(clock: Clock) -> None:
    notes: list[ConnectionNote] = []
    with UsageServer() as server:
        server.enqueue(
            ScriptedResponse(
                status=429,
                headers={"Retry-After": "7"},
                body={"error": {"message": "slow down", "type": "rate_limit"}},
            )
        )
        connection = limited(
            OpenAICompatibleChatModelConnection(
                base_url=server.base_url,
                model="big",
                retry={"max_attempts": 1},
                rate_limit={"requests_per_minute": 1000},
            ),
            clock,
        )
        with pytest.raises(ModelCallError, match="HTTP 429"):
            ask(connection, notes, "k/0")
        assert notes == []
        assert ask(connection, notes, "k/1").content == "big: k/1"  # another call: held
    [note] = notes
    assert note.reason == "waited for Retry-After"
    assert note.waited_ms == pytest.approx(7000)


def test_the_scripted_connection_takes_the_rate_limit_too(clock: Clock) -> None:
    notes: list[ConnectionNote] = []
    connection = limited(
        ScriptedChatModelConnection(
            name="rate-limited", turns=[{"content": "hi"}], rate_limit={"requests_per_minute": 2}
        ),
        clock,
    )
    for _ in range(3):
        ask(connection, notes, "hello")
    assert [(n.reason, n.waited_ms) for n in notes] == [
        ("waited for requests per minute", pytest.approx(30_000))
    ]
