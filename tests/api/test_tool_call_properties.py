"""A model's tool-call arguments of any text become a call: a JSON object is its arguments,
anything else is kept as sent and refused with ``ToolArgumentsError`` when the tool would run
(the error goes back to the model). Never a ``RecursionError`` or a bare ``ValueError``.

A property test over seeded examples (tests/adversarial.py), then the defect it found.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flink_agents.api.chat import ToolArgumentsError, ToolCall
from flink_agents.api.json_values import MAX_JSON_DEPTH
from tests.adversarial import DEPTHS, JSON_VALUES, corrupted_text, json_text, nested_text

ARGUMENTS = (
    JSON_VALUES.map(json_text)
    | st.text(max_size=40)
    | corrupted_text('{"city": "Oslo", "days": [1, 2]}').map(
        lambda text: text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    )
    | DEPTHS.map(lambda depth: '{"a": ' + nested_text(depth) + "}")
)


@given(text=ARGUMENTS)
def test_arguments_of_any_text_are_an_object_or_refused_when_checked(text: str) -> None:
    call = ToolCall.from_json_text("call_1", "lookup", text)
    if call.unparsed_arguments is None:
        assert call.checked_arguments() == call.arguments
    else:
        with pytest.raises(ToolArgumentsError, match="the arguments of this call of 'lookup'"):
            call.checked_arguments()


def test_arguments_nested_too_deeply_are_refused_naming_why() -> None:
    call = ToolCall.from_json_text("call_1", "lookup", '{"a": ' + nested_text(5_000) + "}")
    assert call.arguments == {}
    with pytest.raises(ToolArgumentsError) as info:
        call.checked_arguments()
    assert f"JSON beyond what a call takes (nested deeper than {MAX_JSON_DEPTH} levels)" in str(
        info.value
    )
