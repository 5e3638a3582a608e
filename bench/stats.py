"""Throughput and latency from per-output stamps: pure functions, no Flink.

Every benchmark job writes one line per output, ``<t_in> <t_out>`` (epoch seconds): when the
input was stamped at the source and when its output left the operator. Only the middle of the
run counts, so JVM start-up, ramp-up and the drain at the end do not.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

MIDDLE = (0.1, 0.9)
"""Fraction of outputs (ordered by output time) cut at each end before measuring."""


@dataclass(frozen=True)
class RunStats:
    """What one job measured."""

    outputs: int
    errors: int
    runs_per_s: float
    p50_ms: float
    p99_ms: float


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list (nan when empty)."""
    if not sorted_values:
        return math.nan
    rank = min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[rank]


def summarize(pairs: Iterable[tuple[float, float]], errors: int = 0) -> RunStats:
    """Rate and latency over the middle of the run from (t_in, t_out) pairs."""
    ordered = sorted(pairs, key=lambda pair: pair[1])
    n = len(ordered)
    lo, hi = int(n * MIDDLE[0]), max(int(n * MIDDLE[1]) - 1, 0)
    if n < 5 or ordered[hi][1] <= ordered[lo][1]:
        return RunStats(n, errors, math.nan, math.nan, math.nan)
    rate = (hi - lo) / (ordered[hi][1] - ordered[lo][1])
    latencies = sorted(t_out - t_in for t_in, t_out in ordered[lo : hi + 1])
    return RunStats(
        outputs=n,
        errors=errors,
        runs_per_s=rate,
        p50_ms=percentile(latencies, 0.50) * 1000,
        p99_ms=percentile(latencies, 0.99) * 1000,
    )


def read_stamps(folder: Path) -> tuple[list[tuple[float, float]], int]:
    """All ``t_in t_out`` lines under ``folder`` (a FileSink's output); lines with a ``nan``
    input time are outputs that carried no stamp (error outputs) and are counted apart."""
    pairs: list[tuple[float, float]] = []
    errors = 0
    for part in sorted(folder.rglob("*")):
        if not part.is_file() or part.name.startswith("."):
            continue
        for line in part.read_text().splitlines():
            fields = line.split()
            if len(fields) != 2:
                continue
            t_in, t_out = float(fields[0]), float(fields[1])
            if math.isnan(t_in):
                errors += 1
            else:
                pairs.append((t_in, t_out))
    return pairs, errors
