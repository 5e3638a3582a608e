"""The Job health page: jobs, checkpoints and restarts from Flink's REST API, and rates over
time from the event log, drawn as inline SVG charts."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from flink_agents.api.secret_values import scrub_error_text
from flink_agents.flink.job_status import JobCounts, JobFailure, JobMetricsReader
from flink_agents.observability import CallFinished, LogRecord, RunFinished

_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class FlinkJob:
    """One job of the cluster, as its overview, checkpoints and exception history tell it."""

    job_id: str
    name: str
    state: str
    duration_ms: int
    checkpoints: dict[str, Any]
    """``counts`` of ``/jobs/<id>/checkpoints`` (completed, failed, in progress, restored)."""
    last_checkpoint: dict[str, Any] | None
    failures: list[JobFailure]
    counts: JobCounts | None


def flink_jobs(rest_url: str) -> list[FlinkJob]:
    """Every job the REST API lists, newest first; an ``OSError`` when it does not answer."""
    overview = _get(rest_url, "/jobs/overview").get("jobs", [])
    found = []
    for job in sorted(overview, key=lambda job: job.get("start-time", 0), reverse=True):
        job_id = job["jid"]
        try:
            checkpoints = _get(rest_url, f"/jobs/{job_id}/checkpoints")
        except (OSError, ValueError):  # a finished job's checkpoint stats may be gone
            checkpoints = {}
        reader = JobMetricsReader(rest_url, job_id)
        failures = reader.read_failures() or []
        found.append(
            FlinkJob(
                job_id=job_id,
                name=job.get("name", "?"),
                state=job.get("state", "?"),
                duration_ms=int(job.get("duration", 0)),
                checkpoints=checkpoints.get("counts", {}),
                last_checkpoint=(checkpoints.get("latest") or {}).get("completed"),
                failures=[_scrubbed(failure) for failure in failures],
                counts=reader.read() if job.get("state") == "RUNNING" else None,
            )
        )
    return found


def _scrubbed(failure: JobFailure) -> JobFailure:
    """A failure's cause with what has the shape of a credential cut out (a Java message may
    quote a URL with its key)."""
    return JobFailure(scrub_error_text(failure.cause), failure.task, failure.timestamp_ms)


def _get(rest_url: str, path: str) -> Any:
    with urllib.request.urlopen(rest_url.rstrip("/") + path, timeout=_TIMEOUT_S) as answer:
        return json.load(answer)


@dataclass(frozen=True)
class Series:
    """Counts per second over the event log's span."""

    title: str
    unit: str
    start: float
    values: list[float]


def rate_series(records: Iterable[LogRecord], buckets: int = 60) -> list[Series]:
    """Runs finished, calls and (where recorded) tokens, per second, over the log's time span
    cut into at most ``buckets`` equal steps."""
    runs: list[float] = []
    calls: list[float] = []
    tokens: list[tuple[float, int]] = []
    for record in records:
        if isinstance(record, RunFinished):
            runs.append(record.time)
        elif isinstance(record, CallFinished):
            calls.append(record.time)
            if record.usage is not None:
                tokens.append((record.time, record.usage.total_tokens))
    times = runs + calls
    if not times:
        return []
    start, end = min(times), max(times)
    step = max((end - start) / buckets, 1.0)
    count = int((end - start) / step) + 1

    def per_second(points: Iterable[tuple[float, float]]) -> list[float]:
        values = [0.0] * count
        for at, weight in points:
            values[min(int((at - start) / step), count - 1)] += weight / step
        return values

    found = [
        Series("runs finished", "runs/s", start, per_second((t, 1) for t in runs)),
        Series("calls", "calls/s", start, per_second((t, 1) for t in calls)),
    ]
    if tokens:  # recorded only by models that report usage
        found.append(Series("tokens", "tokens/s", start, per_second(tokens)))
    return found


def svg_chart(series: Series, width: int = 520, height: int = 140) -> str:
    """``series`` as an SVG line chart with its peak and span labelled (no script)."""
    values: Sequence[float] = series.values
    peak = max(values) or 1.0
    left, right, top, bottom = 44, 8, 10, 22
    inner_w, inner_h = width - left - right, height - top - bottom
    step = inner_w / max(len(values) - 1, 1)
    points = " ".join(
        f"{left + i * step:.1f},{top + inner_h - value / peak * inner_h:.1f}"
        for i, value in enumerate(values)
    )
    title = escape(f"{series.title} ({series.unit})")
    return (
        f'<svg class="chart" role="img" aria-label="{title}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">'
        f"<title>{title}</title>"
        f'<line x1="{left}" y1="{top + inner_h}" x2="{width - right}" y2="{top + inner_h}" '
        'stroke="#888"/>'
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + inner_h}" stroke="#888"/>'
        f'<text x="{left - 4}" y="{top + 8}" text-anchor="end" font-size="10">{peak:.3g}</text>'
        f'<text x="{left - 4}" y="{top + inner_h}" text-anchor="end" font-size="10">0</text>'
        f'<text x="{left}" y="{height - 6}" font-size="10">{title}, over '
        f"{len(values)} steps</text>"
        f'<polyline fill="none" stroke="#2a6fdb" stroke-width="2" points="{points}"/>'
        "</svg>"
    )
