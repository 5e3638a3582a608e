"""Output envelopes split into typed answers and dead letters."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from pydantic import BaseModel

from flink_agents.runtime.json_records import OutputRecord, bad_input_record
from flink_agents.runtime.typed_outputs import (
    OUTPUT_TYPE_ERROR,
    JsonOutputs,
    JsonSchemaOutputType,
    PythonOutputType,
    split_envelope,
)


class Verdict(BaseModel):
    label: str
    score: float


@dataclass
class Pair:
    a: int
    b: int


def _answer(output: object) -> str:
    return OutputRecord(agent="judge", key="k1", seq=3, output=output).to_json()


def test_an_answer_becomes_an_object_of_the_declared_type() -> None:
    answer, dead = split_envelope(_answer({"label": "ok", "score": 0.5}), PythonOutputType(Verdict))
    assert (answer, dead) == (Verdict(label="ok", score=0.5), None)
    pair, _ = split_envelope(_answer({"a": 1, "b": 2}), PythonOutputType(Pair))
    assert pair == Pair(1, 2)


def test_without_a_type_the_answer_is_the_json_value() -> None:
    assert split_envelope(_answer([1, "x"]), JsonOutputs()) == ([1, "x"], None)


def test_a_failed_run_is_a_dead_letter_with_its_input_key_agent_and_reason() -> None:
    failed = OutputRecord(
        agent="judge",
        key="k1",
        seq=3,
        error={"action": "decide", "error_type": "ValueError", "message": "no verdict"},
        input={"text": "hello"},
    ).to_json()
    answer, dead = split_envelope(failed, PythonOutputType(Verdict))
    assert answer is None and dead is not None
    assert (dead.agent, dead.key, dead.seq, dead.input) == ("judge", "k1", 3, {"text": "hello"})
    assert (dead.error_type, dead.reason) == ("ValueError", "action 'decide' failed: no verdict")


def test_an_unreadable_input_is_a_dead_letter_carrying_the_record_as_it_came() -> None:
    bad = bad_input_record("judge", None, "input record is not JSON", input="{oops").to_json()
    _, dead = split_envelope(bad, JsonOutputs())
    assert dead is not None
    assert (dead.seq, dead.error_type, dead.input) == (-1, "BadRecord", "{oops")


def test_an_output_that_does_not_fit_the_type_is_a_dead_letter_not_an_answer() -> None:
    _, dead = split_envelope(_answer({"label": "ok"}), PythonOutputType(Verdict))
    assert dead is not None
    assert (dead.error_type, dead.output) == (OUTPUT_TYPE_ERROR, {"label": "ok"})
    assert "not a Verdict" in dead.reason and "score" in dead.reason


def test_a_json_schema_checks_answers_and_names_where_one_does_not_fit() -> None:
    schema = JsonSchemaOutputType(
        {"type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"]}
    )
    assert split_envelope(_answer({"score": 1}), schema) == ({"score": 1}, None)
    _, dead = split_envelope(_answer({"score": "high"}), schema)
    assert dead is not None and dead.error_type == OUTPUT_TYPE_ERROR
    assert "at score" in dead.reason


def test_a_schema_that_is_no_json_schema_is_refused_when_declared() -> None:
    with pytest.raises(Exception, match="is not valid"):
        JsonSchemaOutputType({"type": "no-such-type"})


def test_success_envelopes_carry_no_input() -> None:
    assert "input" not in _answer(1)
