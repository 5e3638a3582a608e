"""The reduced crash matrix: the support-desk job crashed once at every kill point (one run
each, a few minutes in all; ``make crash-matrix`` runs five each and writes
docs/reliability.md). Each run is a subprocess with its own mini-cluster."""

from __future__ import annotations

import pytest

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
