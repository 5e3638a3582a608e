"""The result-table writer and the plots on synthetic numbers: fast, no JVM, no broker."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench.analysis import with_efficiency
from bench.stats import summarize

pytest.importorskip("matplotlib")  # a bench-only dependency (installed by `make bench`)


def _ours(workload: str, latency: float, bound: int, rate: float) -> dict:
    return {
        "section": "ours", "workload": workload, "latency": latency, "keys": 10_000,
        "bound": bound, "inputs": 1000, "outputs": 1000, "errors": 0, "runs_per_s": rate,
        "p50_ms": 600.0, "p99_ms": 900.0, "wall_s": 5.0,
    }  # fmt: skip


ROWS = [
    _ours("one_call", 0.0, 1000, 400.0),
    _ours("one_call", 0.5, 100, 190.0),
    _ours("one_call", 0.5, 1000, 320.0),
    _ours("subagents", 0.0, 1000, 100.0),
    _ours("subagents", 0.5, 100, 40.0),
    {**_ours("one_call", 0.5, 1, 2.0), "section": "baseline"},
    {**_ours("one_call", 0.5, 4, 8.0), "section": "peer", "threads": 0},
    {**_ours("one_call", 0.5, 64, 120.0), "section": "peer", "threads": 64},
    {**_ours("one_call", 0.0, 1000, 400.0), "section": "durability", "store": "none"},
    {**_ours("one_call", 0.0, 1000, 200.0), "section": "durability", "store": "kafka"},
    {"section": "recovery", "store": "kafka", "latency": 0.05, "inputs": 3000, "outputs": 3000,
     "failure_to_next_output_s": 2.5, "calls_needed": 3000, "calls_reinvoked": 900},
    {"section": "rebuild", "older": 10_000, "open_runs": 200, "after": 1000, "write_s": 1.0,
     "restore_ms": 400.0, "loaded": 1200, "full_rebuild_ms": 2000.0},
]  # fmt: skip


def test_efficiency_is_rate_over_the_smaller_ceiling() -> None:
    rows = {(r["workload"], r["latency"], r["bound"]): r for r in with_efficiency(ROWS)}
    # window 1000 / 0.5 s = 2000 runs/s > CPU rate 400: the CPU rate is the ceiling
    assert rows["one_call", 0.5, 1000]["efficiency"] == pytest.approx(320 / 400)
    # window 100 / 0.5 s = 200 runs/s < 400
    assert rows["one_call", 0.5, 100]["efficiency"] == pytest.approx(190 / 200)
    # depth 4: 100 / (4 x 0.5 s) = 50 runs/s
    assert rows["subagents", 0.5, 100]["efficiency"] == pytest.approx(40 / 50)


def test_report_writes_tables_and_plots(tmp_path: Path) -> None:
    from bench.report import write

    written = write(ROWS, {"command": "`make bench`", "failed_sections": []}, tmp_path)
    page = (tmp_path / "results.md").read_text()
    assert "**0.80**" in page  # the headline efficiency at 500 ms x 10k keys, bound 1000
    assert "| 0 ms | 10,000 | 1,000 | 400.0 | 200.0 | 0.50 |" in page  # durability ratio
    assert "(64 threads)" in page
    pngs = [p for p in written if p.suffix == ".png"]
    assert {p.name for p in pngs} >= {"throughput.png", "latency.png", "durability.png"}
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in pngs)


def test_summarize_uses_the_middle_of_the_run() -> None:
    # 100 outputs, one per 10 ms, each 50 ms after its input; a slow start is cut off
    pairs = [(i * 0.01 - 0.05, i * 0.01) for i in range(100)]
    pairs[0] = (-10.0, 0.0)
    stats = summarize(pairs)
    assert stats.runs_per_s == pytest.approx(100, rel=0.01)
    assert stats.p50_ms == pytest.approx(50)
    assert math.isnan(summarize(pairs[:3]).runs_per_s)
