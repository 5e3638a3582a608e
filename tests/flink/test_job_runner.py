"""Submitting a job spec: the `flink run -py` command, and the README's command on the cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import urllib.request
from pathlib import Path
from urllib.request import url2pathname

import pytest

from flink_agents.cli import main
from flink_agents.flink.job import load_job
from flink_agents.flink.job_runner import shipped_outputs, submit_command, with_overrides
from tests.conftest import submitted_job_id

REPO = Path(__file__).resolve().parents[2]
README_SUBMIT = ".venv/bin/flink-agents submit jobs/weather.yaml --jobmanager 127.0.0.1:8081"
"""The README's submit command ("Using it"), run from the repository root."""
WEATHER_RUNS = [
    ("Berlin", 0),
    ("Berlin", 1),
    ("Lisbon", 0),
    ("Lisbon", 1),
    ("Oslo", 0),
    ("Reykjavik", 0),
]


def test_the_driver_runs_as_a_script_where_no_path_hook_imported_the_standard_library_first():
    # `flink run -py` runs job_runner.py as a script: its folder (holding operator.py) comes
    # first on sys.path. Without site (-S), no .pth hook of an editable install imports the
    # standard `operator` before it, as in an installed package (the container image).
    site_packages = sysconfig.get_paths()["purelib"]
    done = subprocess.run(
        [sys.executable, "-S", str(REPO / "flink_agents" / "flink" / "job_runner.py"), "--help"],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([site_packages, str(REPO)])},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: python -m flink_agents.flink.job_runner")


def test_submit_names_the_client_interpreter_and_the_working_directory_as_import_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    command = submit_command("jobs/weather.yaml", "127.0.0.1:8081")

    # `flink` starts the driver with `python` from PATH unless told otherwise.
    assert command[command.index("-pyclientexec") + 1] == sys.executable
    driver_args = command[command.index("-py") + 2 :]
    assert driver_args == [str(tmp_path / "jobs/weather.yaml"), str(tmp_path)]


def _job_folder(tmp_path: Path, extra: str = "") -> Path:
    """A job spec in its own folder: ``job/job.yaml``."""
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "job.yaml").write_text(
        f"name: shipped\nagent: a.yaml\nsource: {{kind: list, path: in.jsonl}}\nkey: k\n{extra}"
    )
    return folder


def test_default_checkpoints_are_not_in_the_folders_submit_ships(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _job_folder(tmp_path)
    monkeypatch.chdir(folder)  # submitted from the job's own folder: it is shipped
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    command = submit_command("job.yaml", "127.0.0.1:8081")
    shipped = [Path(each) for each in command[command.index("-pyfs") + 1].split(",")]
    assert folder in shipped

    spec = load_job(folder / "job.yaml")
    uri = spec.flink_config()["execution.checkpointing.dir"]
    checkpoints = Path(url2pathname(uri.removeprefix("file://")))
    assert checkpoints == tmp_path / "cache" / "flink-agents" / "checkpoints" / "shipped"
    assert not any(checkpoints.is_relative_to(each) for each in shipped)
    assert shipped_outputs(spec, "job.yaml") == []


def test_submit_warns_about_outputs_written_into_the_shipped_job_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _job_folder(
        tmp_path,
        "sink: {kind: file, path: out}\ncheckpointing: {dir: ckpt}\n"
        'event_log: {path: "logs/events-{subtask}.jsonl"}\n',
    )
    monkeypatch.chdir(tmp_path)
    # No JobManager on port 1: the warnings come first, then the usage error.
    assert main(["submit", "job/job.yaml", "--jobmanager", "127.0.0.1:1"]) == 2
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning:" in line]
    assert [line.split("warning: ")[1].split(" ")[:2] for line in warnings] == [
        ["checkpointing.dir", str(folder / "ckpt")],
        ["event_log.path", str(folder / "logs" / "events-{subtask}.jsonl")],
        ["sink.path", str(folder / "out")],
    ]
    assert all(f"is inside {folder}, which submit ships" in line for line in warnings)


def test_a_savepoint_start_at_another_parallelism_reaches_flink_and_the_operator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    command = submit_command(
        "jobs/weather.yaml", "127.0.0.1:8081", from_savepoint="/sp/1", parallelism=2
    )
    assert command[command.index("-s") + 1] == "/sp/1"
    assert command[-3:] == ["--from-savepoint", "--parallelism", "2"]  # for the driver

    spec = load_job(REPO / "jobs" / "weather.yaml")
    overridden = with_overrides(spec, parallelism=2, from_savepoint=True)
    assert overridden.parallelism == 2 and overridden.operator.started_from_savepoint
    assert overridden.base_dir == spec.base_dir  # relative paths still resolve
    with pytest.raises(ValueError, match=r"outside 1\.\.max_parallelism"):
        with_overrides(spec, parallelism=spec.max_parallelism + 1, from_savepoint=False)


def _taskmanager_stdout(flink_cluster) -> dict[str, str]:
    return {
        tm["id"]: _get_text(flink_cluster.rest_url + f"/taskmanagers/{tm['id']}/stdout")
        for tm in flink_cluster.get("/taskmanagers")["taskmanagers"]
    }


def _get_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode()


@pytest.mark.flink
@pytest.mark.cluster
def test_the_readme_submit_command_runs_the_job_without_the_venv_on_path(
    flink_cluster, tmp_path: Path
) -> None:
    assert README_SUBMIT in (REPO / "README.md").read_text().splitlines()
    if not (REPO / ".venv" / "bin" / "flink-agents").exists():
        pytest.fail(f"no {REPO}/.venv/bin/flink-agents: run `make install`", pytrace=False)
    venv_bin = str(REPO / ".venv" / "bin")
    path = [entry for entry in os.environ["PATH"].split(os.pathsep) if entry]
    path = [entry for entry in path if Path(entry).resolve() != Path(venv_bin).resolve()]
    # The venv's editable install maps `flink_agents` to the checkout it was made from; this
    # folder holds only this checkout's package (not `examples`, which the job must find itself).
    this_package = tmp_path / "package"
    this_package.mkdir()
    (this_package / "flink_agents").symlink_to(REPO / "flink_agents")
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYFLINK_")}
    env |= {"PATH": os.pathsep.join(path), "PYTHONPATH": str(this_package)}
    before = _taskmanager_stdout(flink_cluster)

    done = subprocess.run(
        README_SUBMIT.split(), cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )

    job = flink_cluster.get(f"/jobs/{submitted_job_id(done)}")
    assert (job["name"], job["state"]) == ("weather", "FINISHED")
    printed = [
        json.loads(line)
        for tm, text in _taskmanager_stdout(flink_cluster).items()
        for line in text[len(before.get(tm, "")) :].splitlines()
        if line.startswith('{"agent":"weather_react"')
    ]
    assert sorted((line["key"], line["seq"]) for line in printed) == WEATHER_RUNS
    assert all(line["output"]["city"] == line["key"] for line in printed)
