"""A job spec caps the calls in flight of the agent's chat model connections."""

from __future__ import annotations

from pathlib import Path

import pytest

from flink_agents.flink.job import load_job
from flink_agents.plan.yaml.loader import YamlAgentError

REPO = Path(__file__).resolve().parents[2]


def _spec(tmp_path: Path, caps: str) -> Path:
    job = tmp_path / "job.yaml"
    agent = REPO / "examples" / "weather.yaml"
    job.write_text(
        f"name: capped\nagent: {agent}\nsource: {{kind: list, path: in.jsonl}}\nkey: city\n"
        f"max_concurrent_calls: {caps}\n"
    )
    return job


def test_the_job_spec_sets_the_cap_of_a_named_connection_in_the_plan(tmp_path: Path) -> None:
    plan = load_job(_spec(tmp_path, "{scripted: 4}")).plan()
    assert plan.resources["scripted"].arguments["max_concurrent_calls"] == 4


def test_a_cap_on_a_name_that_is_no_connection_is_refused(tmp_path: Path) -> None:
    spec = load_job(_spec(tmp_path, "{chat_model: 4}"))
    with pytest.raises(
        ValueError, match=r"'chat_model' is not a chat model connection.*\['scripted'\]"
    ):
        spec.plan()
    with pytest.raises(YamlAgentError, match="max_concurrent_calls"):
        load_job(_spec(tmp_path, "{scripted: 0}"))
