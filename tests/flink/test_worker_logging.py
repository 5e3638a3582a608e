"""The Python worker's root logger: PyFlink's thread mode leaves it at DEBUG, the operator sets
the configured level (INFO by default) so third-party DEBUG records are dropped where they are
made instead of being formatted and handed to the JVM."""

from __future__ import annotations

import json
import logging

import pytest

from flink_agents.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents.flink import AgentsExecutionEnvironment
from tests.flink.conftest import job_spec_settings

pytestmark = pytest.mark.flink


@action(InputEvent)
def report_root_log_level(event: InputEvent, ctx: RunnerContext) -> None:
    level = logging.getLogger().getEffectiveLevel()
    ctx.send_event(OutputEvent(output=logging.getLevelName(level)))


def test_thread_mode_worker_logs_at_info_by_default(make_flink_env, tmp_path) -> None:
    agent = Agent(name="log-level")
    agent.add_action(report_root_log_level)
    env = make_flink_env(**job_spec_settings(tmp_path / "ckpt", execution_mode="thread"))
    agents = AgentsExecutionEnvironment(env)

    outputs = agents.from_list([{"k": "a"}], key="k").apply(agent).to_datastream()
    lines = [json.loads(line) for line in outputs.execute_and_collect()]

    assert [line.get("output") for line in lines] == ["INFO"], lines
