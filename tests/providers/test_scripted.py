import asyncio
import re

import pytest

from flink_agents.api import ChatMessage, ChatRequest
from flink_agents.providers.scripted import ScriptedChatModelConnection, ScriptedModelError


def _request(*messages: tuple[str, str]) -> ChatRequest:
    return ChatRequest(messages=[ChatMessage(role=r, content=c) for r, c in messages])


def test_turn_follows_the_conversation_and_substitutes_variables():
    model = ScriptedChatModelConnection(
        name="turns",
        turns=[
            {"tool_calls": [{"name": "find", "arguments": {"q": "$input", "n": 2}}]},
            {"content": 'got $last for $input {"json": true}'},
        ],
    )
    first = asyncio.run(model.chat(_request(("system", "s"), ("user", "cats"))))
    assert first.tool_calls[0].model_dump() == {
        "id": "call_0_0",
        "name": "find",
        "arguments": {"q": "cats", "n": 2},
    }
    second = asyncio.run(
        model.chat(_request(("user", "cats"), ("assistant", ""), ("tool", "3 cats")))
    )
    assert second.content == 'got 3 cats for cats {"json": true}'
    assert second.tool_calls == []


def test_errors_and_exhaustion_are_raised():
    model = ScriptedChatModelConnection(name="err", turns=[{"error": "rate limited"}])
    with pytest.raises(ScriptedModelError, match="rate limited"):
        asyncio.run(model.chat(_request(("user", "x"))))
    with pytest.raises(ScriptedModelError, match="asked for turn 2"):
        asyncio.run(model.chat(_request(("user", "x"), ("assistant", "a"), ("user", "y"))))


def test_counters_track_total_and_concurrency_per_name():
    ScriptedChatModelConnection.reset_stats("count")
    model = ScriptedChatModelConnection(
        name="count", turns=[{"content": "ok"}], latency_seconds=0.01
    )

    async def three_at_once() -> None:
        await asyncio.gather(*(model.chat(_request(("user", "x"))) for _ in range(3)))

    asyncio.run(three_at_once())
    asyncio.run(model.chat(_request(("user", "x"))))
    stats = ScriptedChatModelConnection.stats("count")
    assert (stats.total, stats.in_flight, stats.max_in_flight) == (4, 0, 3)
    assert ScriptedChatModelConnection.stats("other").total == 0


def test_a_turn_with_match_is_chosen_by_content_before_numbered_turns():
    model = ScriptedChatModelConnection(
        name="match",
        turns=[
            {"match": r"(?i)\bterrible\b", "content": "1 star"},
            {"match": "^notified", "content": "done: $last"},
            {"tool_calls": [{"name": "notify", "arguments": {"stars": "5"}}]},
        ],
    )
    terrible = _request(("user", "Terrible soup"), ("system", "Answer in JSON."))
    assert asyncio.run(model.chat(terrible)).content == "1 star"  # system messages are skipped
    numbered = asyncio.run(model.chat(_request(("user", "lovely"))))
    assert numbered.tool_calls[0].name == "notify"
    after_tool = _request(("user", "lovely"), ("assistant", ""), ("tool", "notified #1"))
    assert asyncio.run(model.chat(after_tool)).content == "done: notified #1"


def test_input_paths_read_fields_of_a_json_input():
    model = ScriptedChatModelConnection(
        name="paths",
        turns=[{"content": "$input.review.text|$input.tags.1|$input.review|$input.nope|$$5"}],
    )
    message = '{"review": {"text": "ok"}, "tags": ["a", "b"]}'
    reply = asyncio.run(model.chat(_request(("user", message))))
    assert reply.content == 'ok|b|{"text": "ok"}|$input.nope|$5'


def test_a_bad_pattern_fails_when_the_connection_is_built():
    with pytest.raises(re.error, match="missing \\)"):
        ScriptedChatModelConnection(turns=[{"match": "(", "content": "x"}])
