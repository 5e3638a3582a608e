"""Write ``results.md`` (tables) and PNG plots from the suite's raw rows.

Pure over its inputs (rows and run metadata), so a unit test can feed synthetic numbers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from bench.analysis import Row, of, ratio, with_efficiency

HEADLINE = {"workload": "one_call", "latency": 0.5, "keys": 10_000, "bound": 1000}
"""The efficiency the issue asks for: L = 500 ms, 10,000 keys, the default in-flight bound."""


def fmt(value: Any, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def table(headers: Sequence[str], lines: Iterable[Sequence[Any]]) -> str:
    rows = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    rows += ["| " + " | ".join(str(cell) for cell in line) + " |" for line in lines]
    return "\n".join(rows)


def ms(latency: float) -> str:
    return f"{latency * 1000:g} ms"


def ours_table(rows: list[Row]) -> str:
    return table(
        ["workload", "L", "keys", "in-flight bound", "inputs", "runs/s", "p50 ms", "p99 ms",
         "ceiling runs/s", "efficiency"],
        (
            [r["workload"], ms(r["latency"]), fmt(r["keys"]), fmt(r["bound"]), fmt(r["inputs"]),
             fmt(r["runs_per_s"], 1), fmt(r["p50_ms"]), fmt(r["p99_ms"]), fmt(r["ceiling"], 1),
             fmt(r["efficiency"], 2)]
            for r in with_efficiency(rows)
        ),
    )  # fmt: skip


def peers_table(rows: list[Row]) -> str:
    """Workload (1) side by side: ours at its best bound, the blocking baseline, the peer."""
    lines = []
    points = sorted({(r["latency"], r["keys"]) for r in of(rows, "peer") + of(rows, "baseline")})
    for latency, keys in points:
        mine = [r["runs_per_s"] for r in of(rows, "ours", workload="one_call", latency=latency,
                                            keys=keys)]  # fmt: skip
        best = max(mine) if mine else math.nan
        base = next((r["runs_per_s"] for r in of(rows, "baseline", latency=latency, keys=keys)),
                    math.nan)  # fmt: skip
        peer = {r["threads"]: r for r in of(rows, "peer", latency=latency, keys=keys)}
        default, large = peer.get(0), next((r for t, r in peer.items() if t), None)
        lines.append([
            ms(latency), fmt(keys), fmt(best, 1), fmt(base, 1),
            fmt(default["runs_per_s"], 1) if default else "-",
            f"{fmt(large['runs_per_s'], 1)} ({large['threads']} threads)" if large else "-",
            fmt(ratio(best, base), 1),
            fmt(ratio(best, default["runs_per_s"] if default else None), 1),
            fmt(ratio(best, large["runs_per_s"] if large else None), 1),
        ])  # fmt: skip
    return table(
        ["L", "keys", "ours (best bound) runs/s", "naive keyed fn runs/s",
         "flink-agents default pool", "flink-agents larger pool", "ours / naive",
         "ours / fa default", "ours / fa larger"],
        lines,
    )  # fmt: skip


def durability_table(rows: list[Row]) -> str:
    lines = []
    for latency in sorted({r["latency"] for r in of(rows, "durability")}):
        none = next(iter(of(rows, "durability", latency=latency, store="none")), None)
        kafka = next(iter(of(rows, "durability", latency=latency, store="kafka")), None)
        if none is None or kafka is None:
            continue
        lines.append([
            ms(latency), fmt(none["keys"]), fmt(none["bound"]), fmt(none["runs_per_s"], 1),
            fmt(kafka["runs_per_s"], 1), fmt(ratio(kafka["runs_per_s"], none["runs_per_s"]), 2),
            fmt(none["p50_ms"]), fmt(kafka["p50_ms"]),
        ])  # fmt: skip
    return table(
        ["L", "keys", "bound", "no store runs/s", "Kafka store runs/s", "Kafka / none",
         "p50 ms none", "p50 ms Kafka"],
        lines,
    )  # fmt: skip


def recovery_table(rows: list[Row]) -> str:
    return table(
        ["store", "L", "inputs", "outputs written", "failure → next output", "calls needed",
         "calls made again", "in flight at the failure"],
        (
            [r["store"], ms(r["latency"]), fmt(r["inputs"]), fmt(r["outputs"]),
             f"{r['failure_to_next_output_s']:.2f} s", fmt(r["calls_needed"]),
             fmt(r["calls_reinvoked"]), fmt(r.get("calls_in_flight_at_failure", "-"))]
            for r in of(rows, "recovery")
        ),
    )  # fmt: skip


def rebuild_table(rows: list[Row]) -> str:
    return table(
        ["older records", "open at marker", "new after marker", "raw write", "restore from marker",
         "states loaded", "full rebuild from offset 0"],
        (
            [fmt(r["older"]), fmt(r["open_runs"]), fmt(r["after"]), f"{r['write_s']:.1f} s",
             f"{r['restore_ms']:,.0f} ms", fmt(r["loaded"]),
             f"{r['full_rebuild_ms']:,.0f} ms" if r["full_rebuild_ms"] else "not run"]
            for r in of(rows, "rebuild")
        ),
    )  # fmt: skip


def headline(rows: list[Row]) -> str:
    found = [r for r in with_efficiency(rows) if all(r[k] == v for k, v in HEADLINE.items())]
    if not found:
        return "Not measured in this run (the quick mode may skip it)."
    r = found[0]
    return (
        f"**{r['efficiency']:.2f}** - {r['runs_per_s']:,.1f} runs/s against a ceiling of "
        f"{r['ceiling']:,.1f} (min of {min(r['bound'], r['keys'])} in flight / 0.5 s and the "
        f"CPU-bound rate at L = 0)."
    )


def markdown(rows: list[Row], meta: dict[str, Any], plots: list[str]) -> str:
    failed = meta.get("failed_sections") or []
    parts = [
        "# Benchmark results",
        "Generated by the command below; every figure on this page comes from one run of it. "
        "Reading and caveats: `bench/README.md` and `bench/results/analysis.md`.",
        table(["", ""], [[k, v] for k, v in meta.items() if k != "failed_sections"]),
    ]
    if failed:
        parts.append(f"**Sections that failed in this run:** {', '.join(failed)}.")
    parts += [
        "## Concurrency efficiency at L = 500 ms, 10,000 keys", headline(rows),
        "## Workload (1) side by side with peers", peers_table(rows),
        "## Our operator: throughput and latency against the in-flight bound",
        "Latency: source stamp to the output leaving the operator, p50/p99 over the middle 80 % "
        "of outputs; rate over the same window. Ceiling = min(min(bound, keys) / (depth x L), "
        "CPU-bound rate at L = 0); depth = model calls on a run's critical path "
        "(1, 3 and 4 for the three workloads).",
        ours_table(rows),
        "## Durability overhead (workload 1, both in this run)", durability_table(rows),
        "## Recovery after an injected failure (mini-cluster, not a TaskManager kill)",
        recovery_table(rows),
        "## Store rebuild after a restore", rebuild_table(rows),
        "## Plots", "\n".join(f"![{p}]({p})" for p in plots),
    ]  # fmt: skip
    return "\n\n".join(parts) + "\n"


def write(rows: list[Row], meta: dict[str, Any], out: Path) -> list[Path]:
    """Write results.md and the plots into ``out``; return the files written."""
    from bench.plots import draw_all

    out.mkdir(parents=True, exist_ok=True)
    plots = draw_all(rows, out)
    page = out / "results.md"
    page.write_text(markdown(rows, meta, [p.name for p in plots]))
    return [page, *plots]
