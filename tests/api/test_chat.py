"""Tool calls whose arguments came as JSON text: parsed when they are a JSON object, kept as
they came otherwise (and refused to the tool, with the reason); a call's dump without them is
what it was before the field existed, so recorded requests keep their digests (and so is a
request's without tool settings)."""

from __future__ import annotations

import pytest

from flink_agents.api.chat import ChatMessage, ChatRequest, ToolArgumentsError, ToolCall
from flink_agents.durable.store import digest_arguments


def test_json_object_text_is_parsed_and_no_text_is_no_arguments() -> None:
    call = ToolCall.from_json_text("c1", "lookup", '{"word": "flink"}')
    assert (call.arguments, call.unparsed_arguments) == ({"word": "flink"}, None)
    assert call.checked_arguments() == {"word": "flink"}
    assert ToolCall.from_json_text("c2", "lookup", "").checked_arguments() == {}
    assert ToolCall.from_json_text("c3", "lookup", None).checked_arguments() == {}


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"word": "flink"', "not JSON (Expecting ',' delimiter: line 1 column 17 (char 16))"),
        ("{&#34;word&#34;: &#34;flink&#34;}", "not JSON (Expecting property name enclosed"),
        ('["flink"]', "JSON but not an object"),
    ],
)
def test_text_that_is_not_a_json_object_is_kept_and_refused_with_the_reason(
    text: str, why: str
) -> None:
    call = ToolCall.from_json_text("c1", "lookup", text)
    assert (call.arguments, call.unparsed_arguments) == ({}, text)
    with pytest.raises(ToolArgumentsError) as caught:
        call.checked_arguments()
    message = str(caught.value)
    assert message.startswith(f"the arguments of this call of 'lookup' are {why}")
    assert message.endswith(f"{text!r}; call it again with the arguments as one JSON object")


def test_long_unparsable_arguments_are_quoted_cut() -> None:
    text = "{" + "x" * 500
    with pytest.raises(ToolArgumentsError) as caught:
        ToolCall.from_json_text("c1", "lookup", text).checked_arguments()
    assert f"{text[:200]!r} (first 200 characters)" in str(caught.value)


def test_a_calls_dump_without_unparsed_arguments_is_unchanged_and_both_round_trip() -> None:
    call = ToolCall(id="c1", name="lookup", arguments={"word": "flink"})
    dumped = {"id": "c1", "name": "lookup", "arguments": {"word": "flink"}}
    assert call.model_dump(mode="json") == call.model_dump() == dumped
    assert call.model_dump_json() == '{"id":"c1","name":"lookup","arguments":{"word":"flink"}}'
    # The digest of a recorded request holding the call, as computed before the field existed.
    message = ChatMessage(role="assistant", tool_calls=[call])
    assert digest_arguments([[message]], {}) == digest_arguments(
        [
            [
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"id": "c1", "name": "lookup", "arguments": {"word": "flink"}}],
                    "tool_call_id": None,
                    "usage": None,
                }
            ]
        ],
        {},
    )
    broken = ToolCall.from_json_text("c2", "lookup", "{oops")
    for kept in (call, broken):
        assert ToolCall.model_validate(kept.model_dump(mode="json")) == kept
        assert ToolCall.model_validate_json(kept.model_dump_json()) == kept


def test_a_requests_dump_without_tool_settings_is_unchanged_and_with_them_round_trips() -> None:
    plain = ChatRequest(messages=[ChatMessage(role="user", content="hi")])
    assert {"tool_choice", "parallel_tool_calls"}.isdisjoint(plain.model_dump(mode="json"))
    assert "tool_choice" not in plain.model_dump_json()
    chosen = ChatRequest(messages=[], tool_choice="lookup", parallel_tool_calls=False)
    dumped = chosen.model_dump(mode="json")
    assert (dumped["tool_choice"], dumped["parallel_tool_calls"]) == ("lookup", False)
    assert ChatRequest.model_validate(dumped) == chosen
