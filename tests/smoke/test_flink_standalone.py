"""`flink run -py` submits a Python job to the standalone cluster, and it finishes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import submitted_job_id
from tests.smoke.keyed_count_job import EXPECTED_FINAL_COUNTS

pytestmark = [pytest.mark.flink, pytest.mark.cluster]

JOB = Path(__file__).with_name("keyed_count_job.py")


def test_flink_run_py_finishes(flink_cluster, tmp_path: Path) -> None:
    output = tmp_path / "counts.txt"
    completed = subprocess.run(
        [
            flink_cluster.flink_bin,
            "run",
            "-m",
            flink_cluster.rest_url.removeprefix("http://"),
            "-py",
            str(JOB),
            str(output),
        ],
        env=flink_cluster.env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    job_id = submitted_job_id(completed)

    assert flink_cluster.get(f"/jobs/{job_id}")["state"] == "FINISHED"
    final = dict(line.split(",") for line in output.read_text().split())
    assert {k: int(v) for k, v in final.items()} == EXPECTED_FINAL_COUNTS
