"""The container throughput bench's order, rate, CPU and tables on synthetic rows: no container,
no broker."""

from __future__ import annotations

import math
from pathlib import Path

from bench.cluster_throughput import middle_rate
from bench.container_cpu import CpuSampler, cpu_seconds
from bench.container_throughput import order, report


def _row(round_index: int, parallelism: int, rate: float, cores: float | None = None):
    return {
        "round": round_index, "parallelism": parallelism, "inputs": 10000, "keys": 1000,
        "latency_s": 0.0, "started": "2026-12-03T10:40:00Z", "load_before": "3.10 2.50 2.00",
        "submit_s": 20.5, "taskmanagers_used": parallelism, "wall_s": 70.0, "cpu_busy": 0.97,
        "load_after": "3.50 2.60 2.10", "outputs": 10000, "runs_per_s": rate,
        "taskmanagers_registered": 2, "taskmanager_cores": cores,
    }  # fmt: skip


def test_every_other_round_runs_the_parallelisms_in_reverse_order() -> None:
    assert order([1, 2], 0) == [1, 2]
    assert order([1, 2], 1) == [2, 1]
    assert order([1, 2], 2) == [1, 2]


def test_the_rate_counts_the_middle_80_percent_of_the_outputs() -> None:
    # 100 outputs: one a second for the first 10, then ten a second; the middle runs 10 -> 90.
    times = [float(i) for i in range(10)] + [10 + i / 10 for i in range(90)]
    assert middle_rate(times) == 10.0  # 80 outputs from t = 10 s to t = 18 s
    assert math.isnan(middle_rate([5.0]))  # no span to divide by


def test_the_summary_gives_each_parallelism_its_median_its_gain_and_its_cores() -> None:
    rows = [
        _row(0, 1, 600.0, 0.5), _row(0, 2, 1000.0, 1.0), _row(1, 2, 1200.0, 1.5),
        _row(1, 1, 500.0, 0.4), _row(2, 1, 700.0), _row(2, 2, 900.0),
    ]  # fmt: skip
    summary, jobs = report(rows).split("\n\n")
    # cores and runs per TaskManager CPU-second: medians over the jobs that measured them
    assert "| 1 | 1 | 3 | 600.0, 500.0, 700.0 | **600.0** | 1.00x | 0.45 | 1,225.0 | 0.97 |" in (
        summary
    )
    assert (
        "| 2 | 2 | 3 | 1,000.0, 1,200.0, 900.0 | **1,000.0** | 1.67x | 1.25 | 900.0 | 0.97 |"
        in (summary)
    )
    assert (
        "| 1 | 1 | 2026-12-03T10:40:00Z | 500.0 | 10,000/10,000 | 20.5 | 70.0 | 3.10 2.50 2.00 |"
        in (jobs)
    )
    assert jobs.splitlines()[-1].endswith("| 0.97 | - |")  # no cores measured


def test_a_container_s_cores_are_its_cpu_seconds_over_the_wall_seconds(tmp_path: Path) -> None:
    usage = tmp_path / "cpuacct.usage"
    usage.write_text(str(3 * 10**9))
    assert cpu_seconds(usage) == 3.0
    stat = tmp_path / "cpu.stat"
    stat.write_text("usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n")
    assert cpu_seconds(stat) == 2.5
    sampler = CpuSampler([])  # no container: the samples are given
    sampler.samples = [(99.0, {"tm": 0.0}), (100.0, {"tm": 1.0}), (104.0, {"tm": 3.0})]
    sampler.samples.append((110.0, {"tm": 9.0}))
    assert sampler.cores(100.0, 105.0) == {"tm": 0.5}  # 2 CPU seconds in 4 wall seconds
    assert sampler.cores(104.5, 105.0) == {}  # fewer than two samples in the window
