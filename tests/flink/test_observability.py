"""Observability on Flink: the event log of a job, and its metrics read back from the REST API
of the standalone cluster."""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from examples.weather import build_agent
from flink_agents.flink import AgentsExecutionEnvironment
from flink_agents.flink.job_runner import submit_command
from flink_agents.observability import CallFinished, EventLogConfig, RunFinished, read_records
from tests.conftest import submitted_job_id

pytestmark = pytest.mark.flink

REPO = Path(__file__).resolve().parents[2]
CITIES = ["Berlin", "Lisbon", "Oslo"]


def test_the_operator_writes_the_event_log_of_every_run(fresh_flink_env, tmp_path: Path) -> None:
    config = EventLogConfig(path=str(tmp_path / "events-{subtask}.jsonl"))
    agents = AgentsExecutionEnvironment(fresh_flink_env, event_log=config)
    records = [{"city": city} for city in CITIES]

    outputs = agents.from_list(records, key="city").apply(build_agent()).to_datastream()
    assert len(list(outputs.execute_and_collect())) == len(records)

    logged = list(read_records(tmp_path / "events-0.jsonl"))
    finished = sorted(r.key for r in logged if isinstance(r, RunFinished))
    assert finished == CITIES
    calls = Counter((r.call_kind, r.outcome) for r in logged if isinstance(r, CallFinished))
    assert calls == {("model", "live"): 9, ("tool", "live"): 6}


@pytest.mark.cluster
def test_the_job_publishes_its_metrics_to_flink(flink_cluster, tmp_path: Path) -> None:
    inputs = tmp_path / "cities.jsonl"
    cities = [CITIES[n % 3] for n in range(40)]  # at 2/s: the job runs for 20 s
    inputs.write_text("".join(json.dumps({"city": city}) + "\n" for city in cities))
    job = tmp_path / "job.yaml"
    job.write_text(
        "name: observed-weather\n"
        "agent: examples.weather:build_agent\n"
        "source: {kind: list, path: cities.jsonl, records_per_second: 2}\n"
        "key: city\n"
        "event_log:\n"
        '  path: "events-{subtask}.jsonl"\n'
    )
    # The driver imports this checkout's package (the venv's editable install may map another).
    env = {**flink_cluster.env, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        submit_command(job, flink_cluster.rest_url.removeprefix("http://"), detached=True),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    job_id = submitted_job_id(done)

    try:
        vertex = _agent_vertex(flink_cluster, job_id)
        values = _metrics_when(
            flink_cluster,
            job_id,
            vertex,
            lambda m: m.get("runs.finished", 0) >= 4,
        )
    finally:
        _wait_until_finished(flink_cluster, job_id)

    assert values["runs.started"] >= values["runs.finished"] >= 4
    assert values["runs.failed"] == 0
    assert values["calls.model.live"] >= 3 * values["runs.finished"]
    assert values["calls.tool.live"] >= 2 * values["runs.finished"]
    assert values["calls.model.replayed"] == 0
    assert "runs.in_flight" in values and "runs.queued" in values
    assert "tokens.input" in values and "calls.latency_ms" in values

    logged = list(read_records(tmp_path / "events-0.jsonl"))
    assert sum(isinstance(r, RunFinished) for r in logged) == len(cities)


def _agent_vertex(cluster, job_id: str) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for vertex in cluster.get(f"/jobs/{job_id}").get("vertices", []):
            if "agent:weather_react" in vertex["name"]:
                return vertex["id"]
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} has no agent vertex")


def _metrics_when(cluster, job_id: str, vertex: str, ready) -> dict[str, float]:
    """Our metrics of subtask 0 (``flink_agents.`` names, without the prefix), once ``ready``."""
    base = f"/jobs/{job_id}/vertices/{vertex}/metrics"
    values: dict[str, float] = {}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ids = [m["id"] for m in _get_list(cluster, base) if ".flink_agents." in m["id"]]
        ids = [i for i in ids if i.startswith("0.")]
        if ids:
            got = _get_list(cluster, f"{base}?get={','.join(ids)}")
            values = {
                m["id"].split(".flink_agents.", 1)[1]: float(m["value"])
                for m in got
                if _is_number(m.get("value"))
            }
            if ready(values):
                return values
        time.sleep(1)
    raise AssertionError(f"metrics never got there: {values}")


def _get_list(cluster, path: str) -> list[dict]:
    found = cluster.get(path)
    assert isinstance(found, list), found
    return found


def _is_number(value: object) -> bool:
    try:
        float(str(value))
    except ValueError:
        return False
    return True


def _wait_until_finished(cluster, job_id: str) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if cluster.get(f"/jobs/{job_id}")["state"] in ("FINISHED", "FAILED", "CANCELED"):
            return
        time.sleep(1)
    raise AssertionError(f"job {job_id} did not finish")
