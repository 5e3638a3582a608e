"""Derived figures from raw rows: ceilings, concurrency efficiency, side-by-side ratios."""

from __future__ import annotations

import math
from typing import Any

from bench.workloads import DEPTH

Row = dict[str, Any]


def of(rows: list[Row], section: str, **match: Any) -> list[Row]:
    """Rows of ``section`` whose fields equal ``match``."""
    return [
        r for r in rows if r["section"] == section and all(r.get(k) == v for k, v in match.items())
    ]


def cpu_rates(rows: list[Row]) -> dict[tuple[str, int], float]:
    """Best L = 0 rate of our operator per (workload, keys): the CPU-bound rate."""
    best: dict[tuple[str, int], float] = {}
    for r in of(rows, "ours", latency=0.0):
        if r["runs_per_s"] > 0:
            key = (r["workload"], r["keys"])
            best[key] = max(best.get(key, 0.0), r["runs_per_s"])
    return best


def with_efficiency(rows: list[Row]) -> list[Row]:
    """Our rows with ``ceiling`` = min(min(bound, keys) / (depth * L), CPU rate at L = 0) and
    ``efficiency`` = runs/s over that ceiling (nan when the L = 0 rate is missing)."""
    cpu = cpu_rates(rows)
    out = []
    for r in of(rows, "ours"):
        rate0 = cpu.get((r["workload"], r["keys"]), math.nan)
        latency = r["latency"]
        window = (
            min(r["bound"], r["keys"]) / (DEPTH[r["workload"]] * latency) if latency else math.inf
        )
        ceiling = math.nan if math.isnan(rate0) else min(window, rate0)
        out.append({**r, "ceiling": ceiling, "efficiency": r["runs_per_s"] / ceiling})
    return out


def ratio(numerator: float | None, denominator: float | None) -> float:
    if not numerator or not denominator or math.isnan(numerator) or math.isnan(denominator):
        return math.nan
    return numerator / denominator
