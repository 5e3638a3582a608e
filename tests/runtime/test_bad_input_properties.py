"""The engine keeps running for other keys whatever one input or one call's result is: a line
that is not JSON, or JSON beyond what a run takes (nested deeper than 128 levels, ``NaN``, an
integer of thousands of digits), is a ``BadRecord`` output naming the line; a record or a
durable call's value the run cannot carry (lone surrogates, huge, deep, non-finite, not JSON at
all) gives that run an output or an error output naming what failed; the runs of the good lines
around it answer as if it were not there. The event log (a JSON-lines file) takes every record.

Property tests over seeded examples (tests/adversarial.py), then the defects they found.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flink_agents.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents.api.json_values import MAX_JSON_DEPTH
from flink_agents.durable.store import InMemoryActionStateStore
from flink_agents.observability.log_config import EventLogConfig
from flink_agents.plan.compile import compile_agent
from flink_agents.runtime import run_local
from flink_agents.runtime.local import run_local_lines
from tests.adversarial import DEPTHS, JSON_VALUES, corrupted_text, nested_text, nested_value

GOOD = ['{"id": "first", "n": 1}', '{"id": "last", "n": 2}']


@action(InputEvent)
def echo(event: InputEvent, ctx: RunnerContext) -> None:
    """Keeps the input in the key's memory and answers it back."""
    ctx.short_term_memory.set("last", event.input)
    ctx.send_event(OutputEvent(output=event.input))


ECHO = compile_agent(Agent(name="echo", error_policy="emit").add_action(echo))


def run_lines(lines: list[str | bytes], tmp_path: Path) -> tuple[list[dict[str, Any]], Any]:
    """The outputs of running ``lines`` (between the two good ones) and the report; the event
    log's every line must be JSON."""
    written: list[str] = []
    log = tmp_path / "events.jsonl"
    log.unlink(missing_ok=True)
    texts = [
        line.decode("utf-8", "surrogateescape") if isinstance(line, bytes) else line
        for line in lines
    ]
    report = run_local_lines(
        ECHO,
        [GOOD[0], *texts, GOOD[1]],
        key="id",
        write=written.append,
        source="in",
        event_log=EventLogConfig(path=str(log)),
    )
    for line in log.read_text(errors="surrogateescape").split("\n")[:-1]:  # not splitlines: U+0085
        json.loads(line)
    return [json.loads(text) for text in written], report


def assert_good_lines_answered(outputs: list[dict[str, Any]]) -> None:
    answered = [(record["key"], record["output"]) for record in outputs if "output" in record]
    assert ("first", {"id": "first", "n": 1}) in answered
    assert ("last", {"id": "last", "n": 2}) in answered


def a_record(value: Any) -> str:
    return json.dumps({"id": "bad", "value": value})


BAD_LINES = (
    JSON_VALUES.map(a_record)
    | JSON_VALUES.map(lambda key: json.dumps({"id": key}))
    | st.sampled_from(GOOD).flatmap(corrupted_text)
    | DEPTHS.map(lambda depth: '{"id": "deep", "v": ' + nested_text(depth) + "}")
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=BAD_LINES)
def test_one_bad_line_among_good_ones_leaves_the_good_ones_answered(
    line: str | bytes, tmp_path: Path
) -> None:
    outputs, report = run_lines([line], tmp_path)
    assert_good_lines_answered(outputs)
    assert report.stopped_by is None
    for record in outputs:
        if record.get("seq") == -1:  # a bad record: says which line and why
            assert record["error"]["message"].startswith("in:2: input record ")


def value_from(value: Any) -> Any:
    return value


@action(InputEvent)
def call_with(event: InputEvent, ctx: RunnerContext) -> None:
    """Answers with what a durable call returned: the value the input names."""
    result = ctx.durable_execute(value_from, RESULTS[event.input["id"]])
    ctx.send_event(OutputEvent(output=result))


RESULTS: dict[str, Any] = {}
"""The value each key's durable call returns (set by the test)."""

CALLER = compile_agent(Agent(name="caller", error_policy="emit").add_action(call_with))

CALL_RESULTS = (
    JSON_VALUES
    | DEPTHS.map(lambda depth: nested_value(min(depth, 600)))
    | st.sampled_from([{1, 2}, object(), b"\xff", {"when": math.inf}, {(1, 2): "tuple key"}])
)


@given(result=CALL_RESULTS)
def test_a_call_result_of_any_shape_ends_its_run_and_the_other_keys_answer(result: Any) -> None:
    RESULTS.update(first=1, bad=result, last=2)
    results = run_local(
        CALLER,
        [{"id": "first"}, {"id": "bad"}, {"id": "last"}],
        key="id",
        store=InMemoryActionStateStore(),
    )
    assert [r.outputs[0].output for r in (results[0], results[2])] == [1, 2]
    bad = results[1]
    if bad.error is not None:  # refused as a result: the failure names the call's action
        assert bad.error.action == "call_with"


# --- the defects the properties found ----------------------------------------------------------


@pytest.mark.parametrize(
    "line, why",
    [
        pytest.param(
            '{"id": "deep", "v": ' + nested_text(MAX_JSON_DEPTH) + "}",
            f"nested deeper than {MAX_JSON_DEPTH} levels",
            id="deeper-than-the-bound",
        ),
        pytest.param(
            '{"id": "deep", "v": ' + nested_text(5_000) + "}",
            f"nested deeper than {MAX_JSON_DEPTH} levels",
            id="deeper-than-python-parses",
        ),
        pytest.param('{"id": NaN}', "NaN is not a JSON number", id="nan-key"),
        pytest.param('{"id": 1e400}', "1e400 is out of a float's range", id="infinite-key"),
        pytest.param(
            '{"id": 1, "v": ' + "9" * 5000 + "}",
            "Exceeds the limit (4300 digits) for integer string conversion",
            id="huge-integer",
        ),
    ],
)
def test_json_beyond_what_a_run_takes_is_a_bad_record_naming_why(
    line: str, why: str, tmp_path: Path
) -> None:
    outputs, report = run_lines([line], tmp_path)
    assert_good_lines_answered(outputs)
    (bad,) = [record for record in outputs if record.get("seq") == -1]
    assert bad["error"]["message"].startswith(f"in:2: input record cannot be run ({why}")
    assert (report.bad_records, report.stopped_by) == (1, None)


def test_a_record_nested_as_deep_as_the_bound_runs(tmp_path: Path) -> None:
    inner = nested_text(MAX_JSON_DEPTH - 1)  # inside the record's object: the bound exactly
    outputs, report = run_lines(['{"id": "deep", "v": ' + inner + "}"], tmp_path)
    assert ("deep", {"id": "deep", "v": json.loads(inner)}) in [
        (record["key"], record["output"]) for record in outputs
    ]
    assert report.ok
