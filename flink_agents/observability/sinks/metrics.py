"""Metrics counted at the event log's hooks, for a host to publish (Flink's metric group).

:class:`MetricsListener` is a :class:`~flink_agents.observability.listener.RunCounter`: the
event log calls it with the values it counts and builds no record for it, so the metrics and the
event log come from the same emission point and a job without an event log builds no record at
all. It counts on the engine's thread in plain Python, without a lock; the host calls
:meth:`MetricsListener.publish` from its own thread (Flink's operator thread, the only one that
may touch PyFlink metrics) to push what changed into a :class:`MetricsSink`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, get_args

from flink_agents.api.chat import TokenUsage
from flink_agents.api.connection_notes import ConnectionDecision
from flink_agents.api.waits import Verdict
from flink_agents.observability.log_records import CallKind, CallOutcome, RunStatus, WaitChange

RUNS_STARTED = "runs.started"
RUNS_FINISHED = "runs.finished"
RUNS_FAILED = "runs.failed"
RUNS_PAUSED = "runs.paused"
TOKENS_INPUT = "tokens.input"
TOKENS_OUTPUT = "tokens.output"
RUNS_IN_FLIGHT = "runs.in_flight"
RUNS_QUEUED = "runs.queued"
RUN_LATENCY = "runs.latency_ms"
CALL_LATENCY = "calls.latency_ms"
CONNECTIONS_ROUTED = "connections.routed"
CONNECTIONS_FALLBACKS = "connections.fallbacks"
RATE_LIMIT_WAITS = "connections.rate_limit_waits"
RATE_LIMIT_WAITED_MS = "connections.rate_limit_waited_ms"
WAITS_PAUSED = "waits.paused"
WAITS_RESUMED = "waits.resumed"
WAITS_TIMED_OUT = "waits.timed_out"
WAITS_OPEN = "waits.open"
MEMORY_SEARCHES = "memory.searches"
MEMORY_WRITES = "memory.writes"
MEMORY_DELETES = "memory.deletes"
MEMORY_BYTES_WRITTEN = "memory.bytes_written"
MEMORY_ITEMS = "memory.items"
MEMORY_COMPACTIONS = "memory.compactions"
MEMORY_COMPACTION_TOKENS = "memory.compaction_tokens"
MEMORY_ITEMS_BEFORE_COMPACTION = "memory.items_before_compaction"
MEMORY_ITEMS_AFTER_COMPACTION = "memory.items_after_compaction"
_NOTE_COUNTERS = {
    "routed": CONNECTIONS_ROUTED,
    "fallback": CONNECTIONS_FALLBACKS,
    "rate_limited": RATE_LIMIT_WAITS,
}


def call_counter(kind: CallKind, outcome: CallOutcome) -> str:
    """The counter of ``kind`` calls with ``outcome``: ``calls.<kind>.<outcome>``."""
    return f"calls.{kind}.{outcome}"


COUNTERS: tuple[str, ...] = (
    RUNS_STARTED,
    RUNS_FINISHED,
    RUNS_FAILED,
    RUNS_PAUSED,
    *(call_counter(k, o) for k in get_args(CallKind) for o in get_args(CallOutcome)),
    TOKENS_INPUT,
    TOKENS_OUTPUT,
    CONNECTIONS_ROUTED,
    CONNECTIONS_FALLBACKS,
    RATE_LIMIT_WAITS,
    RATE_LIMIT_WAITED_MS,
    WAITS_PAUSED,
    WAITS_RESUMED,
    WAITS_TIMED_OUT,
    MEMORY_SEARCHES,
    MEMORY_WRITES,
    MEMORY_DELETES,
    MEMORY_BYTES_WRITTEN,
    MEMORY_COMPACTIONS,
    MEMORY_COMPACTION_TOKENS,
)
_CALL_COUNTERS = {
    (k, o): call_counter(k, o) for k in get_args(CallKind) for o in get_args(CallOutcome)
}
GAUGES: tuple[str, ...] = (RUNS_IN_FLIGHT, RUNS_QUEUED, WAITS_OPEN)
DISTRIBUTIONS: tuple[str, ...] = (
    RUN_LATENCY,
    CALL_LATENCY,
    MEMORY_ITEMS,
    MEMORY_ITEMS_BEFORE_COMPACTION,
    MEMORY_ITEMS_AFTER_COMPACTION,
)
_MAX_SAMPLES = 10_000  # between two publishes; later samples are dropped


class MetricsSink(Protocol):
    """Where metrics go; names are dotted (``calls.model.live``). Flink's adapter nests a group
    per dot."""

    def register_gauge(self, name: str, read: Callable[[], int]) -> None:
        """``read`` gives the gauge's current value whenever the host reports it."""

    def increment(self, name: str, amount: int) -> None: ...

    def sample(self, name: str, value: int) -> None:
        """One value of the distribution ``name``."""


class MetricsListener:
    """Counts runs, calls by kind and outcome, tokens (live model calls), connections' routing
    decisions, fallbacks and rate-limit waits, runs in flight and queued, durable waits paused,
    resumed and timed out and the runs paused now, long-term memory's searches, writes, deletes
    and bytes written, and samples run and call latencies (ms) and the items a memory set holds
    for a key after a run wrote it.

    One thread counts (the engine's: its hooks are called there) and one publishes, without a
    lock: the counts only grow, and :meth:`publish` pushes the difference between what it reads
    and what it pushed before, so a count it reads a moment too early is pushed by the next
    publish, never lost nor pushed twice; samples are taken off the front of a list the counting
    thread only appends to. (With a lock and a ``Counter`` the four hooks of a run took ~8 us;
    plain adds to a dict, ~3 us.)
    """

    never_raises = True  # its hooks only add to numbers: the event log calls them unwrapped

    def __init__(self) -> None:
        self._totals: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        self._pushed: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        self._samples: list[tuple[str, int]] = []
        self.in_flight = 0
        self.queued = 0
        self.waiting = 0
        """Runs paused at a wait (registered here, not yet resumed)."""
        self._sink: MetricsSink | None = None

    def on_run_admitted(self) -> None:
        self.queued += 1

    def on_run_started(self) -> None:
        if self.queued:  # never below zero (a `max` call cost more than the test)
            self.queued -= 1
        self.in_flight += 1
        self._totals[RUNS_STARTED] += 1

    def on_run_finished(self, status: RunStatus, latency_ms: float, outputs: int) -> None:
        if self.in_flight:
            self.in_flight -= 1
        if status == "paused":  # not finished: it runs again when its wait is resolved
            self._totals[RUNS_PAUSED] += 1
        elif status != "cancelled":
            self._totals[RUNS_FINISHED] += 1
            self._sample(RUN_LATENCY, latency_ms)
        if status == "failed":
            self._totals[RUNS_FAILED] += 1

    def on_call(
        self, kind: CallKind, outcome: CallOutcome, latency_ms: float, usage: TokenUsage | None
    ) -> None:
        self._totals[_CALL_COUNTERS[kind, outcome]] += 1
        self._sample(CALL_LATENCY, latency_ms)
        if usage is not None and outcome == "live":
            self._totals[TOKENS_INPUT] += usage.input_tokens
            self._totals[TOKENS_OUTPUT] += usage.output_tokens

    def on_connection_note(self, decision: ConnectionDecision, waited_ms: float | None) -> None:
        """A connection routed a call, fell back, or held it for a rate limit (and how long)."""
        self._totals[_NOTE_COUNTERS[decision]] += 1
        if waited_ms is not None:
            self._totals[RATE_LIMIT_WAITED_MS] += round(waited_ms)

    def on_wait(self, change: WaitChange, verdict: Verdict | None) -> None:
        """A run paused at a wait, or its wait was resolved (a timeout among them)."""
        if change == "paused":
            self._totals[WAITS_PAUSED] += 1
            self.waiting += 1
            return
        self._totals[WAITS_RESUMED] += 1
        if self.waiting:  # a wait paused before a restore was not counted here
            self.waiting -= 1
        if verdict == "timed_out":
            self._totals[WAITS_TIMED_OUT] += 1

    def on_memory(
        self, searches: int, writes: int, deletes: int, bytes_written: int, items: list[int]
    ) -> None:
        """A run's long-term memory work: searches made (not handed back), items written and
        deleted, bytes written, and the items of each set it wrote, for its key, after it."""
        totals = self._totals
        totals[MEMORY_SEARCHES] += searches
        totals[MEMORY_WRITES] += writes
        totals[MEMORY_DELETES] += deletes
        totals[MEMORY_BYTES_WRITTEN] += bytes_written
        for count in items:
            self._sample(MEMORY_ITEMS, count)

    def on_memory_compaction(self, items_before: int, items_after: int, tokens: int) -> None:
        """A key's memory set was compacted: its items before and after, and the tokens the
        compaction's model call spent."""
        self._totals[MEMORY_COMPACTIONS] += 1
        self._totals[MEMORY_COMPACTION_TOKENS] += tokens
        self._sample(MEMORY_ITEMS_BEFORE_COMPACTION, items_before)
        self._sample(MEMORY_ITEMS_AFTER_COMPACTION, items_after)

    def _sample(self, name: str, value: float) -> None:
        if len(self._samples) < _MAX_SAMPLES:
            self._samples.append((name, round(value)))

    def total(self, name: str) -> int:
        """A counter's value so far (published or not)."""
        return self._totals[name]

    def publish(self, sink: MetricsSink) -> None:
        """Push the counts and samples since the last call into ``sink``; the first call
        registers every metric (so all show from the start, at zero) and the gauges."""
        if self._sink is not sink:
            self._sink = sink
            for name in COUNTERS:
                sink.increment(name, 0)
            sink.register_gauge(RUNS_IN_FLIGHT, lambda: self.in_flight)
            sink.register_gauge(RUNS_QUEUED, lambda: self.queued)
            sink.register_gauge(WAITS_OPEN, lambda: self.waiting)
        totals = self._totals.copy()  # one C call: the counting thread cannot add in between
        for name, value in totals.items():
            if value != self._pushed[name]:
                sink.increment(name, value - self._pushed[name])
                self._pushed[name] = value
        taken = len(self._samples)
        samples = self._samples[:taken]
        del self._samples[:taken]  # what was appended since stays for the next publish
        for name, value in samples:
            sink.sample(name, value)
