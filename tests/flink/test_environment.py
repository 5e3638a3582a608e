"""What `AgentsExecutionEnvironment` does to the environment it is given: the Python its
workers run, when the user named none (the job specs' settings); and the one Beam warning it
keeps off a job's stderr (no google-cloud-storage for a filesystem no agent job uses)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pyflink.common import Configuration
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.java_gateway import get_gateway

from flink_agents.flink import AgentsExecutionEnvironment
from flink_agents.flink.job import python_settings

pytestmark = pytest.mark.flink

ROOT = Path(__file__).resolve().parents[2]

JOB = """
from pyflink.datastream import StreamExecutionEnvironment

from flink_agents.flink import AgentsExecutionEnvironment
from tests.sample_agents import EchoAgent

env = StreamExecutionEnvironment.get_execution_environment()  # no python.executable
agents = AgentsExecutionEnvironment(env)
outputs = agents.from_list([{"k": "a", "n": 21}], key="k").apply(EchoAgent(name="echo"))
with outputs.to_datastream().execute_and_collect() as results:
    for line in results:
        print("OUTPUT", line, flush=True)
"""


@pytest.fixture(scope="module")
def job_run(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    """The Python job of docs/api.md, as a user runs it (`.venv/bin/python job.py`), with a
    `python` on PATH that is not the venv's: one that fails."""
    folder = tmp_path_factory.mktemp("python-job")
    shims = folder / "bin"
    shims.mkdir()
    for name in ("python", "python3"):
        shim = shims / name
        shim.write_text("#!/bin/sh\necho 'the python on PATH was run' >&2\nexit 3\n")
        shim.chmod(0o755)
    script = folder / "job.py"
    script.write_text(JOB)
    # As a user's shell has it: without the PYFLINK_* variables a PyFlink session of this test
    # process (an earlier test's mini-cluster) sets, which make a new process refuse to start a
    # gateway of its own ("launching the PythonGatewayServer during Python UDF execution").
    environ = {
        **{name: value for name, value in os.environ.items() if not name.startswith("PYFLINK_")},
        "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "JVM_ARGS": f"-Djava.io.tmpdir={folder}",
    }
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_python_job_without_python_executable_runs_its_workers_on_this_interpreter(job_run):
    outputs = [
        json.loads(line.removeprefix("OUTPUT "))
        for line in job_run.stdout.splitlines()
        if line.startswith("OUTPUT ")
    ]
    assert job_run.returncode == 0, job_run.stderr[-3000:]
    assert [output.get("output") for output in outputs] == [{"doubled": 42, "count": 1}]
    assert "the python on PATH was run" not in job_run.stderr


def test_an_environment_naming_no_python_gets_the_job_specs_python_settings(flink_env):
    env = StreamExecutionEnvironment.get_execution_environment(Configuration())
    config = _environment_config(env)
    assert not any(config.containsKey(name) for name in python_settings())

    AgentsExecutionEnvironment(env)

    assert {name: config.getString(name, None) for name in python_settings()} == python_settings()


def test_a_python_the_user_named_is_kept_with_nothing_added(flink_env):
    env = StreamExecutionEnvironment.get_execution_environment(Configuration())
    env.set_python_executable("/opt/cluster-python/bin/python3")

    AgentsExecutionEnvironment(env)

    config = _environment_config(env)
    assert config.getString("python.executable", None) == "/opt/cluster-python/bin/python3"
    assert not config.containsKey("python.pythonpath")
    assert not config.containsKey("python.client.executable")


def test_beams_gcs_import_warning_is_not_printed_by_a_job(job_run):
    beam_alone = subprocess.run(
        [sys.executable, "-c", "import pyflink.fn_execution"],  # imports Beam, as a job does
        capture_output=True,
        text=True,
        timeout=120,
    )
    if "Failed to import GCSFileSystem" not in beam_alone.stderr:
        pytest.skip("google-cloud-storage is installed: Beam has nothing to warn about")
    assert job_run.returncode == 0, job_run.stderr[-3000:]
    assert "GCSFileSystem" not in job_run.stderr


def test_beams_other_filesystem_warnings_are_kept(flink_env, caplog):
    AgentsExecutionEnvironment(
        StreamExecutionEnvironment.get_execution_environment(Configuration())
    )
    beam = logging.getLogger("apache_beam.io.filesystems")
    with caplog.at_level(logging.WARNING, logger=beam.name):
        beam.warning("Failed to import GCSFileSystem; loading ... Error details: %s", "absent")
        beam.warning("Failed to import S3FileSystem; loading ... Error details: %s", "broken")
    assert [record.getMessage() for record in caplog.records if record.name == beam.name] == [
        "Failed to import S3FileSystem; loading ... Error details: broken"
    ]


def _environment_config(env: StreamExecutionEnvironment) -> Any:
    """The Java configuration of ``env`` that PyFlink's own setters write."""
    util = get_gateway().jvm.org.apache.flink.python.util.PythonConfigUtil
    return util.getEnvironmentConfig(env._j_stream_execution_environment)


def _uids_upstream(transformation: Any) -> list[str]:
    """The uids set on ``transformation`` and the transformations it reads from."""
    found, todo = [], [transformation]
    while todo:
        current = todo.pop()
        if current.getUid() is not None:
            found.append(str(current.getUid()))
        todo.extend(current.getInputs())
    return found


def test_the_stateful_operators_get_uids_named_after_what_they_do(
    fresh_flink_env, tmp_path: Path
) -> None:
    """A savepoint's state is found by these ids (docs/operations.md, "Upgrading a running
    job"); a name given twice is numbered in build order (Flink refuses two operators with one
    uid)."""
    from tests.sample_agents import EchoAgent

    records = tmp_path / "records.jsonl"
    records.write_text('{"k": "a"}\n')
    agents = AgentsExecutionEnvironment(fresh_flink_env)
    inputs = [agents.from_file(records, key="k") for _ in range(2)]
    outputs = [i.apply(EchoAgent(name="echo")).to_datastream() for i in inputs]
    uids = [_uids_upstream(o._j_data_stream.getTransformation()) for o in outputs]
    assert uids == [
        ["agent:echo", f"source:file:{records}"],
        ["agent:echo#2", f"source:file:{records}#2"],
    ]
