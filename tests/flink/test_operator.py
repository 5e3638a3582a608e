"""The keyed operator on the mini-cluster: every input yields its outputs, per key in order."""

from __future__ import annotations

import json

import pytest

from examples.weather import build_agent
from flink_agents.flink import AgentsExecutionEnvironment, OperatorOptions
from flink_agents.providers.scripted import ScriptedChatModelConnection

pytestmark = pytest.mark.flink


def test_weather_agent_answers_every_input(fresh_flink_env) -> None:
    cities = ["Berlin", "Lisbon", "Oslo", "Rome"]
    records = [{"city": city, "n": n} for n in range(3) for city in cities]
    agents = AgentsExecutionEnvironment(fresh_flink_env, options=OperatorOptions(max_in_flight=8))

    outputs = agents.from_list(records, key="city").apply(build_agent()).to_datastream()
    lines = [json.loads(line) for line in outputs.execute_and_collect()]

    assert len(lines) == len(records)
    assert all("error" not in line for line in lines), lines
    by_key: dict[str, list[int]] = {}
    for line in lines:
        by_key.setdefault(line["key"], []).append(line["seq"])
        assert line["output"]["city"] == line["key"]
    # One run per key at a time, in arrival order: seqs per key come out as 0, 1, 2.
    assert by_key == {city: [0, 1, 2] for city in cities}


def test_bad_records_are_reported_and_the_job_goes_on(fresh_flink_env) -> None:
    agents = AgentsExecutionEnvironment(fresh_flink_env)
    stream = fresh_flink_env.from_collection(
        ['{"city": "Oslo"}', "not json", '{"town": "Oslo"}'],
    )
    from pyflink.common import Types

    stream = stream.map(lambda s: s, output_type=Types.STRING())
    outputs = agents.from_datastream(stream, key="city").apply(build_agent()).to_datastream()
    lines = [json.loads(line) for line in outputs.execute_and_collect()]

    errors = [line for line in lines if "error" in line]
    answers = [line for line in lines if "output" in line]
    assert len(answers) == 1 and answers[0]["output"]["city"] == "Oslo"
    assert len(errors) == 2
    assert all(e["error"]["error_type"] == "BadRecord" for e in errors)
    assert ScriptedChatModelConnection is not None
