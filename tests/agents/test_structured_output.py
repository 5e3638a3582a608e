"""Checking a final answer against an output schema, and the correction asked for."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, ValidationError

from flink_agents.agents.structured_output import (
    correction_request,
    describe_errors,
    parse_answer,
)
from tests.sample_agents import Answer


class Wide(BaseModel):
    fields: dict[str, int]


def _error(schema: type[BaseModel], content: str) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        parse_answer(schema, content)
    return info.value


def test_an_answer_in_a_json_code_fence_is_parsed():
    assert parse_answer(Answer, '  ```json\n{"city": "Oslo", "total": 1}\n```\n') == Answer(
        city="Oslo", total=1
    )


def test_errors_are_one_line_each_with_their_path_and_no_pydantic_url():
    error = _error(Answer, '{"total": "many"}')
    assert "For further information visit" in str(error)  # what is left out
    assert describe_errors(error) == (
        "- city: Field required\n"
        "- total: Input should be a valid integer, unable to parse string as an integer"
    )
    assert describe_errors(_error(Answer, "sunny")) == (
        "- the answer: Invalid JSON: expected value at line 1 column 1"
    )


def test_only_the_first_ten_errors_are_listed():
    content = json.dumps({"fields": {f"f{n}": "x" for n in range(12)}})
    lines = describe_errors(_error(Wide, content)).splitlines()
    assert len(lines) == 11
    assert lines[0].startswith("- fields.f0: Input should be a valid integer")
    assert lines[-1] == "- and 2 more"


def test_a_matching_answer_needs_no_correction():
    assert correction_request(Answer, '{"city": "Oslo", "total": 1}') is None
    message = correction_request(Answer, '{"city": "Oslo"}')
    assert message is not None
    assert message.role == "user"
    assert "- total: Field required" in message.content
