"""The reduced crash matrix: the support-desk job crashed once at every kill point (one run
each, a few minutes in all; ``make crash-matrix`` runs five each and writes
docs/reliability.md), and, when asked for, the refunds job crashed once at every wait kill point
(bench/crash_waits.py). Each run is a subprocess with its own mini-cluster."""

from __future__ import annotations

import os

import pytest

from bench import crash_waits
from bench.crash_matrix import RUN_TIMEOUT_S, SCENARIOS, matrix

# Eight runs, each a JVM of its own and bounded by RUN_TIMEOUT_S: on 2 shared cores they take
# longer together than the suite's default timeout.
pytestmark = [
    pytest.mark.flink,
    pytest.mark.kafka,
    pytest.mark.timeout((len(SCENARIOS) + 1) * RUN_TIMEOUT_S),
]


def test_every_kill_point_loses_nothing_and_reinvokes_no_completed_call(
    kafka_bootstrap, tmp_path
) -> None:
    # A fresh folder: `matrix` reuses the finished runs it finds in one (an earlier test run's).
    logs = tmp_path / "crash-matrix"
    baseline, rows = matrix(SCENARIOS, runs=1, seed=14, port=0, logs=logs)

    assert (baseline.lost, baseline.extra, baseline.outputs) == (0, 0, baseline.inputs)
    for row in rows:
        (run,) = row.runs
        assert run.fired, f"{row.scenario}: the kill point was never reached ({run.kill_points})"
        assert (run.reinvoked, run.lost, run.duplicates, run.extra, run.unmatched) == (0,) * 5, run
        assert run.sent_again <= run.in_flight, run


@pytest.mark.timeout(5 * crash_waits.RUN_TIMEOUT_S)
@pytest.mark.skipif(
    os.environ.get("FLINK_AGENTS_SLOW_CRASH_MATRIX") != "1",
    # Each run waits out its approval timeouts: 2-3 minutes each on 2 shared cores.
    reason="slow (~15 min): FLINK_AGENTS_SLOW_CRASH_MATRIX=1; `make crash-matrix` runs 5 each",
)
def test_every_wait_kill_point_resolves_each_wait_once_and_runs_no_gated_tool_twice(
    kafka_bootstrap, tmp_path
) -> None:
    logs = tmp_path / "crash-waits"
    baseline, rows = crash_waits.matrix(
        crash_waits.SCENARIOS, runs=1, seed=14, bootstrap=kafka_bootstrap, logs=logs
    )

    assert baseline.ok, baseline
    for name, (run,) in rows:
        assert run.fired, f"{name}: the kill point was never reached ({run.kill_points})"
        assert run.ok, run
