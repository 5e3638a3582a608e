"""run_local and run_local_lines: a plan over inputs, in this process."""

from __future__ import annotations

import json
import time
from typing import Any, get_args

import pytest

from flink_agents.api import Agent, InputEvent, OutputEvent, ResourceType, RunnerContext
from flink_agents.api.agent import ErrorPolicy
from flink_agents.observability.log_records import LogRecord, RunStarted
from flink_agents.plan import PlanValidationError
from flink_agents.plan.compile import compile_agent
from flink_agents.providers.scripted import ScriptedChatModelConnection
from flink_agents.runtime import run_local
from flink_agents.runtime.local import LinesReport, run_local_lines
from tests.sample_agents import fail_on_negative, wait_then_answer

HANDLED: list[object] = []


def record(event: InputEvent, ctx: RunnerContext) -> None:
    HANDLED.append(event.input)
    ctx.send_event(OutputEvent(output=event.input))


def test_a_missing_credential_fails_before_any_input_is_run() -> None:
    """As a Flink job fails at start, not in the first run's action."""
    HANDLED.clear()
    agent = Agent(name="keyed").add_action(record, InputEvent)
    agent.add_resource(
        "llm",
        ResourceType.CHAT_MODEL_CONNECTION,
        ScriptedChatModelConnection,
        turns=[{"content": "hi"}],
        api_key={"env": "FLINK_AGENTS_TEST_NEVER_SET"},
    )
    with pytest.raises(PlanValidationError) as info:
        run_local(agent, [{"id": 1}], key="id", environ={})
    assert "environment variable 'FLINK_AGENTS_TEST_NEVER_SET' is not set" in str(info.value)
    assert HANDLED == []


def policy_agent(policy: ErrorPolicy) -> Agent:
    """Outputs each input's ``n``; raises for a negative one (tests.sample_agents)."""
    return Agent(name="policy", error_policy=policy).add_action(fail_on_negative)


# Per error policy, the outputs of lines 1, 2 (n=-1) and 3 with one run at a time. Every policy
# is listed: a new one fails the check below until its behaviour is pinned here.
EXPECTED_BY_POLICY: dict[str, list[dict[str, Any]]] = {
    "fail": [{"agent": "policy", "key": "a", "output": 1, "seq": 0}],
    "emit": [
        {"agent": "policy", "key": "a", "output": 1, "seq": 0},
        {"agent": "policy", "key": "b", "seq": 0, "error_type": "ValueError"},
        {"agent": "policy", "key": "c", "output": 3, "seq": 0},
    ],
}


def test_every_error_policy_has_its_expected_outputs() -> None:
    assert set(EXPECTED_BY_POLICY) == set(get_args(ErrorPolicy))


def _summary(line: str) -> dict[str, Any]:
    """An output line with its error reduced to the error type (its message is elsewhere)."""
    record = json.loads(line)
    error = record.pop("error", None)
    return record if error is None else {**record, "error_type": error["error_type"]}


@pytest.mark.parametrize("policy", get_args(ErrorPolicy))
def test_each_output_is_written_as_its_run_finishes_whatever_later_runs_do(policy) -> None:
    lines = ['{"id": "a", "n": 1}', '{"id": "b", "n": -1}', '{"id": "c", "n": 3}']
    written: list[str] = []
    seen_by_run: dict[Any, list[str]] = {}

    class Watch:  # what had been written when each run started
        def on_record(self, record: LogRecord) -> None:
            if isinstance(record, RunStarted):
                seen_by_run[record.key] = list(written)

    plan = compile_agent(policy_agent(policy))
    report = run_local_lines(
        plan, lines, key="id", write=written.append, max_in_flight=1, listeners=[Watch()]
    )
    assert [_summary(line) for line in written] == EXPECTED_BY_POLICY[policy]
    assert seen_by_run["b"] == written[:1]  # a's output was out before b ran
    assert report.runs == len(written)
    assert report.ok is False
    if policy == "fail":
        assert report.stopped_by is not None and "negative input -1" in str(report.stopped_by)
        assert (report.failed_runs, report.not_run) == (0, 1)
    else:
        assert (report.stopped_by, report.failed_runs, report.not_run) == (None, 1, 0)


@pytest.mark.parametrize("policy", get_args(ErrorPolicy))
def test_runs_in_flight_together_write_each_output_as_it_finishes(policy) -> None:
    """a finishes first, b fails next, c is slow: under fail, c is cut off (not waited for)."""
    slow = 10 if policy == "fail" else 0.2  # under fail, waiting for c would show
    lines = [
        f'{{"id": "c", "n": 3, "wait": {slow}}}',
        '{"id": "b", "n": -1, "wait": 0.05}',
        '{"id": "a", "n": 1, "wait": 0}',
    ]
    agent = Agent(name="policy", error_policy=policy).add_action(wait_then_answer)
    written: list[str] = []
    started = time.monotonic()
    report = run_local_lines(compile_agent(agent), lines, key="id", write=written.append)
    keys = [json.loads(line)["key"] for line in written]
    if policy == "fail":
        assert keys == ["a"]
        assert (report.runs, report.not_run) == (1, 1)
        assert time.monotonic() - started < 5  # c was cancelled, not waited for
    else:
        assert keys == ["a", "b", "c"]
        assert (report.runs, report.failed_runs, report.not_run) == (3, 1, 0)


@pytest.mark.parametrize("policy", get_args(ErrorPolicy))
def test_bad_lines_are_bad_record_outputs_naming_the_line_and_the_rest_runs(policy) -> None:
    lines = [
        '{"id": "a", "n": 1}\n',
        "not json\n",
        "\n",
        '{"n": 2}\n',
        '{"id": null, "n": 2}\n',
        "[1, 2]\n",
        '{"id": "c", "n": 3}\n',
    ]
    written: list[str] = []
    report = run_local_lines(
        compile_agent(policy_agent(policy)), lines, key="id", write=written.append, source="in"
    )
    bad = [json.loads(line) for line in written if '"BadRecord"' in line]
    assert [record["error"]["message"] for record in bad] == [
        "in:2: input record is not JSON (Expecting value: line 1 column 1 (char 0)): 'not json'",
        "in:4: input record has no usable key (no 'id'): '{\"n\": 2}'",
        "in:5: input record has no usable key (field 'id' is null): '{\"id\": null, \"n\": 2}'",
        "in:6: input record has no usable key (not a JSON object): '[1, 2]'",
    ]
    # The shape a job writes for a bad record: no key, seq -1.
    assert all(record.keys() == {"agent", "error", "seq"} and record["seq"] == -1 for record in bad)
    outputs = [json.loads(line) for line in written if '"BadRecord"' not in line]
    assert sorted(record["output"] for record in outputs) == [1, 3]
    assert (report.runs, report.bad_records, report.stopped_by, report.ok) == (2, 4, None, False)


def test_lines_that_all_run_report_ok() -> None:
    written: list[str] = []
    lines = ['{"id": {"user": 7}, "n": 1}']
    report = run_local_lines(
        compile_agent(policy_agent("fail")), lines, key="id", write=written.append
    )
    assert written == ['{"agent":"policy","key":{"user":7},"output":1,"seq":0}']
    assert report == LinesReport(runs=1)
    assert report.ok
