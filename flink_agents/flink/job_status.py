"""A running job's counts (the status line's) and its failures, read from Flink's REST API.

The agent operator's vertex (named ``agent:<name>``, chained with what follows it) reports
Flink's own operator counters ``<operator>.numRecordsIn`` / ``numRecordsOut`` and the runtime's
gauge ``flink_agents.runs.in_flight`` (docs/operations.md), summed over subtasks by
``/jobs/<id>/vertices/<id>/subtasks/metrics?agg=sum``.

The REST API serves what its metric fetcher last collected, every
``metrics.fetcher.update-interval`` (10 s by default). The operator's Java counters exist from
the task's start, the runtime's Python metrics only once the Python worker has opened the
operator: a fetch in between has ``in``/``out`` but no in-flight gauge, and the line showed
``in flight ?`` until the next fetch, ten seconds later (most of a short job's life).
:func:`local_rest_settings` fetches every second instead.
"""

from __future__ import annotations

import json
import socket
import threading
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flink_agents.observability.sinks.metrics import RUNS_IN_FLIGHT

_AGENT_VERTEX = "agent:"
_AGENT_OPERATOR = "agent_"  # Flink's metric name of operator "agent:x" is "agent_x"
_IN_FLIGHT = f"flink_agents.{RUNS_IN_FLIGHT}"
_TIMEOUT_S = 2.0
_LOCALHOST = "127.0.0.1"


def free_local_port() -> int:
    """A TCP port free on 127.0.0.1 now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((_LOCALHOST, 0))
        return int(probe.getsockname()[1])


def local_rest_settings(port: int) -> dict[str, str]:
    """Flink settings for a local mini-cluster whose REST API the status line and the failure
    watch read: on 127.0.0.1:``port`` (chosen by the caller, so that its address is known
    without asking PyFlink, which does not tell it), metrics fetched every second (the line's
    refresh), the job's details refreshed every 200 ms.

    The port is free when :func:`free_local_port` picks it and bound by the mini-cluster a few
    seconds later; another process taking it in between would fail the job's start (not seen).
    """
    return {
        "rest.bind-address": _LOCALHOST,
        "rest.address": _LOCALHOST,
        "rest.bind-port": str(port),
        "rest.port": str(port),
        "metrics.fetcher.update-interval": "1000",
        # The job's details (its exception history) are cached this long (3 s by default):
        # a short job can restart and end within that, its failure never shown.
        "web.refresh-interval": "200 ms",
    }


def local_rest_url(port: int) -> str:
    """The REST API of a mini-cluster started with :func:`local_rest_settings`."""
    return f"http://{_LOCALHOST}:{port}"


@dataclass(frozen=True)
class JobCounts:
    """A running job's counts, summed over its subtasks: records into and out of the agent
    operator, runs in flight; None for a count the API does not report (yet). What
    ``flink-agents run``'s status line shows."""

    records_in: int | None
    records_out: int | None
    in_flight: int | None


class JobMetricsReader:
    """Reads one job's status counts from the REST API at ``rest_url``."""

    def __init__(self, rest_url: str, job_id: str) -> None:
        self.rest_url = rest_url.rstrip("/")
        self.job_id = job_id

    def read(self) -> JobCounts | None:
        """The counts now; None while the job has no agent vertex or the API does not answer
        (the job is starting, or already gone)."""
        try:
            return self._read()
        except (OSError, ValueError):  # connection refused, timeouts, bad JSON
            return None

    def _read(self) -> JobCounts | None:
        job = self._get(f"/jobs/{self.job_id}")
        vertex = next(
            (v["id"] for v in job.get("vertices", []) if _AGENT_VERTEX in v.get("name", "")),
            None,
        )
        if vertex is None:
            return None
        base = f"/jobs/{self.job_id}/vertices/{vertex}/subtasks/metrics"
        names = [metric["id"] for metric in self._get(base)]
        wanted = wanted_metrics(names)
        if not wanted:
            return None
        query = urllib.parse.urlencode({"get": ",".join(wanted.values()), "agg": "sum"})
        values = {metric["id"]: metric.get("sum") for metric in self._get(f"{base}?{query}")}
        return counts_from(wanted, values)

    def read_failures(self) -> list[JobFailure] | None:
        """The job's failures so far, oldest first (each one restarted the job or ended it);
        None when the API does not answer."""
        try:
            history = self._get(f"/jobs/{self.job_id}/exceptions").get("exceptionHistory", {})
        except (OSError, ValueError):
            return None
        return sorted(
            (failure_of(entry) for entry in history.get("entries", [])),
            key=lambda failure: failure.timestamp_ms,
        )

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(self.rest_url + path, timeout=_TIMEOUT_S) as answer:
            return json.load(answer)


def wanted_metrics(names: list[str]) -> dict[str, str]:
    """Of a vertex's metric names, the ones the line shows: ``in``, ``out``, ``in_flight``."""
    wanted: dict[str, str] = {}
    for name in names:
        operator, _, metric = name.partition(".")
        if operator.startswith(_AGENT_OPERATOR) and metric == "numRecordsIn":
            wanted["in"] = name
        elif operator.startswith(_AGENT_OPERATOR) and metric == "numRecordsOut":
            wanted["out"] = name
        elif name.endswith(_IN_FLIGHT):
            wanted["in_flight"] = name
    return wanted


def counts_from(wanted: dict[str, str], values: dict[str, Any]) -> JobCounts:
    """The counts of the summed metric ``values`` (a count not reported is unknown)."""

    def count(which: str) -> int | None:
        value = values.get(wanted.get(which, ""))
        return None if value is None else int(float(value))

    return JobCounts(count("in"), count("out"), count("in_flight"))


_CAUSE_CHARS = 300
"""A failure's cause is cut to this many characters (Java messages can run to pages)."""


@dataclass(frozen=True)
class JobFailure:
    """One entry of a job's exception history: a task failed, and the job restarted or ended."""

    cause: str
    """The innermost cause's line (``Class: message``), cut to ``_CAUSE_CHARS``."""
    task: str | None
    timestamp_ms: int


def failure_of(entry: dict[str, Any]) -> JobFailure:
    """The :class:`JobFailure` of one ``exceptionHistory`` entry of Flink's REST API."""
    return JobFailure(
        innermost_cause(entry.get("stacktrace") or entry.get("exceptionName") or "unknown"),
        entry.get("taskName"),
        int(entry.get("timestamp") or 0),
    )


def innermost_cause(stacktrace: str) -> str:
    """The line of a Java stack trace that names its innermost cause: what a reader needs
    first (the outer ones say only that a task or a Python function failed)."""
    lines = stacktrace.splitlines()
    causes = [line.removeprefix("Caused by: ") for line in lines if line.startswith("Caused by: ")]
    cause = causes[-1] if causes else (lines[0] if lines else stacktrace)
    cause = cause.strip()
    return cause if len(cause) <= _CAUSE_CHARS else cause[: _CAUSE_CHARS - 3] + "..."


class FailureWatch:
    """Reads a running job's failures every ``interval_s`` on a thread of its own and keeps the
    last answer: a local mini-cluster's REST API goes away with its job, so its failures must
    be read while it runs. A restart takes the restart strategy's delay and the tasks' new start
    (about a second here) before the job can go on, so a failure is seen before the job ends
    unless the API stops answering."""

    def __init__(
        self, read: Callable[[], list[JobFailure] | None], interval_s: float = 0.25
    ) -> None:
        self._read = read
        self._interval_s = interval_s
        self._failures: list[JobFailure] = []
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="job-failures", daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stopped.wait(self._interval_s):
            self._take(self._read())

    def _take(self, failures: list[JobFailure] | None) -> None:
        if failures is not None and len(failures) >= len(self._failures):
            self._failures = failures

    def stop(self) -> list[JobFailure]:
        """Stop reading (after one last read) and return the failures seen."""
        self._stopped.set()
        self._thread.join()
        self._take(self._read())
        return list(self._failures)
