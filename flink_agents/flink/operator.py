"""The keyed operator: a PyFlink KeyedProcessFunction over the plain per-key logic.

What a key's input or timer does -- its state, its runs, when to come back, restoring the
action-state store after a restart -- is :class:`~flink_agents.runtime.keyed.KeyedAgentLogic`,
which knows nothing of Flink. This adapter only connects it to PyFlink: it hands the logic the
key's ``ValueState`` and the clock, emits the records the logic returns, registers the timers it
asks for, and reads what only PyFlink tells (attempt number, subtask index, parallelism and max
parallelism: the store places records by the key's Flink key group, docs/state-store.md). The
mechanism (measured in ``bench/results/operator-mechanism.md``) is written down in
``docs/flink-runtime.md``:

* The engine runs on its own asyncio thread; ``process_element`` only records the input in
  keyed state and hands it over, so a slow model call never blocks the operator thread, and a
  checkpoint never waits for one. It blocks while the window of unfinished inputs is full.
* A processing-time timer per key with a run in flight brings the operator back to that key to
  emit finished runs and commit the key's state (state may only be touched under its own key),
  aimed at the running input's expected end; the visits are counted (``operator.visits``,
  ``operator.visits_idle``). Timers are checkpointed: after a restore they fire and the key's
  pending inputs run again with the same ``seq`` -- the action-state store then hands back
  every call that had completed.
* An event-time timer at the end of time, registered with a key's first input (Flink
  checkpoints it with the key's state), fires when a bounded input ends (the final watermark):
  it waits for the key's remaining runs, so a bounded job does not finish with runs in flight.
* In thread mode PyFlink never calls ``close()`` when a task ends (a stop with a savepoint, a
  cancel, a failover): the engine would go on running the task's runs, calling models. The
  function notes the thread the task calls it on (:class:`TaskThread`) and the engine closes
  itself once that thread is gone (``KeyedAgentLogic.open(task_alive=...)``).
* Metrics are counted at the event log's hooks by a
  :class:`~flink_agents.observability.sinks.metrics.MetricsListener` on the engine's thread and
  published into the operator's metric group (group ``flink_agents``) from the operator thread
  (PyFlink's metrics may only be touched from there), at an input or timer at most every
  ``PUBLISH_INTERVAL_S`` and whenever nothing is in flight: each counter or distribution update
  is a call into the JVM, and published after every input and timer they cost ~8 % of the
  runs/s at 200 ms (bench/results/operator.md, "Observability cost"). Gauges too are
  pushed (as counters set to the current value), never read by Flink: a Python gauge is called
  from Flink's metrics thread, which crashed the TaskManager (SIGSEGV in ``take_gil``) when it
  read one of a task that had just been cancelled. With ``metrics: false`` in the options no
  group is registered and nothing is counted.
"""

from __future__ import annotations

import gc
import json
import logging
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from pydantic import ValidationError
from pyflink.common import Types
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import KeyedProcessFunction, RuntimeContext, TimerService
from pyflink.datastream.state import ValueStateDescriptor
from pyflink.metrics import Counter, Distribution, MetricGroup

from flink_agents.durable import faults
from flink_agents.durable.faults import KillPoint
from flink_agents.flink.cluster_config import cluster_heartbeat
from flink_agents.flink.pemja_references import release_pemja_references
from flink_agents.flink.resume_input import resume_text
from flink_agents.observability import MetricsListener
from flink_agents.plan.models import AgentPlan
from flink_agents.runtime.keyed import KeyedAgentLogic, Visit, VisitCounts
from flink_agents.runtime.options import OperatorOptions
from flink_agents.runtime.settings import RuntimeSettings

logger = logging.getLogger(__name__)

END_OF_INPUT = (1 << 63) - 2
"""Event-time timer that only the final watermark of a bounded input reaches."""

NO_TIMESTAMP = -(1 << 63)
"""Flink's "this record has no timestamp" (Long.MIN_VALUE): sinks write none (Kafka's producer
then stamps the record with its own clock)."""

METRIC_GROUP = "flink_agents"
"""The operator's metric group; metric names below it are in docs/operations.md."""

VISITS = "operator.visits"
"""Counter: timer visits of keys (processing time; the end-of-input visit not counted)."""
VISITS_IDLE = "operator.visits_idle"
"""Counter: timer visits that emitted nothing (the key's run was still going)."""

YOUNG_COLLECTION_THRESHOLD = 20_000
"""Allocations between two young-generation collections in the operator's interpreter, set
when the operator opens (Python's default: 700). Process-wide, like `gc.freeze`."""


class AgentFunction(KeyedProcessFunction):
    """Runs one agent plan per key; emits each output as a JSON string.

    With a store in the ``settings``, every durable call goes through the action-state store,
    so a run replayed after a restore gets back what had completed instead of calling again.
    """

    def __init__(
        self,
        plan_json: str,
        settings: RuntimeSettings | None = None,
        *,
        event_time: bool = False,
    ) -> None:
        self._plan_json = plan_json
        self._settings = settings or RuntimeSettings()
        # Keep each input's timestamp and write it on its outputs (see OutputTimestamps).
        self._event_time = event_time
        self._logic: KeyedAgentLogic | None = None
        self._task_thread: TaskThread | None = None

    def open(self, runtime_context: RuntimeContext) -> None:
        settings = self._settings
        # Before any client exists: records below this level are then dropped at the call site.
        logging.getLogger().setLevel(settings.operator.python_log_level)
        options = with_cluster_heartbeat(settings.operator)
        settings = self._settings = settings.model_copy(update={"operator": options})
        plan = AgentPlan.from_json(self._plan_json, source="operator plan")
        counts = MetricsListener() if options.metrics else None
        self._logic = KeyedAgentLogic(plan, settings, listeners=[] if counts is None else [counts])
        self._metrics: PublishedMetrics | None = None
        if counts is not None:
            self._metrics = PublishedMetrics(
                counts,
                FlinkMetrics(runtime_context.get_metrics_group().add_group(METRIC_GROUP)),
                visits=self._logic.visits,
            )
            self._metrics.publish()
        self._task_thread = TaskThread.of_thread_mode(runtime_context)
        self._logic.open(
            attempt=_attempt_number(runtime_context),
            subtask=_subtask_index(runtime_context),
            parallelism=_parallelism(runtime_context),
            max_parallelism=_max_parallelism(runtime_context),
            task_alive=None if self._task_thread is None else self._task_thread.alive,
        )
        tidy_shared_interpreter()
        # A run allocates thousands of short-lived containers (events, records, pydantic
        # models): with Python's default of 700, young collections ran every few runs and
        # promoted objects still in use. Measured: -9 to -21 % CPU per run with the Kafka
        # store (bench/results/analysis.md, "The collector's young generation").
        gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *gc.get_threshold()[1:])
        self._state = runtime_context.get_state(
            ValueStateDescriptor("flink_agents.key_state", Types.STRING())
        )
        release_pemja_references()

    def close(self) -> None:
        if self._logic is not None:
            self._logic.close()

    def process_element(self, value: str, ctx: KeyedProcessFunction.Context) -> Iterable[str]:
        release_pemja_references()  # its table grows while the first elements pass
        if self._task_thread is not None:
            self._task_thread.note()
        timers = ctx.timer_service()
        logic = self._require_logic()
        resume = resume_text(value)  # a decision or event (flink/resume_input.py), or an input
        if resume is not None:
            visit = logic.on_resume(
                ctx.get_current_key(), resume, self._state, timers.current_processing_time
            )
        else:
            visit = logic.on_input(
                ctx.get_current_key(),
                value,
                self._state,
                timers.current_processing_time,
                _event_timestamp(ctx) if self._event_time else None,
            )
        if self._metrics is not None:
            self._metrics.publish_if_due()
        return _apply(visit, timers)

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Iterable[str]:
        release_pemja_references()
        if self._task_thread is not None:
            self._task_thread.note()
        timers = ctx.timer_service()
        # Only the event-time timer sits at END_OF_INPUT (processing-time ones are near now):
        # the timestamp tells the domain without a call into the JVM.
        visit = self._require_logic().on_timer(
            ctx.get_current_key(),
            self._state,
            timestamp,
            timers.current_processing_time,
            end_of_input=timestamp == END_OF_INPUT,
        )
        if self._metrics is not None:
            self._metrics.publish_if_due()
        return _apply(visit, timers)

    def _require_logic(self) -> KeyedAgentLogic:
        if self._logic is None:
            raise RuntimeError("AgentFunction used before open()")
        return self._logic


def tidy_shared_interpreter() -> None:
    """What an opening attempt clears of the ones before it that shared its interpreter (thread
    mode; in process mode there are none and this finds nothing): their foreign threads and
    import paths, then what they left in cycles."""
    forget_ended_foreign_threads()
    forget_stale_import_paths()
    freeze_what_lives()


def freeze_what_lives() -> None:
    """Keep everything loaded so far (plan, modules, clients), which lives as long as the job,
    out of the collector's scans: they otherwise cost ~10 % of a run's CPU.

    In thread mode one interpreter outlives the job's attempts, and each restart opens the
    function again. What an earlier freeze kept is let go and collected first: frozen objects
    are never collected, so freezing again on top would keep every ended attempt's engine in
    cycles (its loop, runs, clients) for good. Measured in the soak before this: +36,000 Python
    objects, +5 Python threads and about +35 MB of RSS per restart of the job.
    """
    gc.unfreeze()
    gc.collect()
    gc.freeze()


_IMPORT_PATHS_LOCK = threading.Lock()


def forget_stale_import_paths() -> int:
    """Drop the entries of ``sys.path`` that ended attempts left; returns how many.

    In thread mode PyFlink's embedded interpreter (pemja 0.5) inserts the job's Python paths at
    the front of the process's one ``sys.path`` for every operator it opens, and nothing takes
    them out: measured 48-60 more entries per restart of one job, repeats and folders of ended
    attempts' files that Flink has deleted. Every import that misses ``sys.modules`` looks in
    each. A later repeat and an absolute path that no longer exists are dropped, and the
    importer cache's entries for such paths.

    Only the entries present at the start are rewritten, through a slice counted from the end:
    pemja inserts at the front, so an entry another job's operator adds meanwhile is kept. Two
    of these at once (two jobs in one TaskManager) take turns.
    """
    with _IMPORT_PATHS_LOCK:
        before = list(sys.path)
        kept: list[str] = []
        seen: set[str] = set()
        for entry in before:
            if entry in seen or (os.path.isabs(entry) and not os.path.exists(entry)):
                continue
            seen.add(entry)
            kept.append(entry)
        if len(kept) < len(before):
            sys.path[-len(before) :] = kept
        for path in list(sys.path_importer_cache):
            if os.path.isabs(path) and not os.path.exists(path):
                sys.path_importer_cache.pop(path, None)
    return len(before) - len(kept)


def forget_ended_foreign_threads() -> int:
    """Drop ``threading``'s entries of foreign threads that have ended; returns how many.

    Before Python 3.13, the first time code on a thread Python did not start asks for the
    current thread (every log line does), ``threading`` registers a ``_DummyThread`` for it and
    never removes it. In thread mode each attempt's task runs on a new JVM thread: the third
    soak hour counted one more Python thread every few restarts, 9 to 41 on one TaskManager.
    An entry whose thread is gone from ``/proc/self/task`` is dropped (Linux only; private
    names of ``threading``, read defensively: elsewhere, nothing is done).
    """
    active = getattr(threading, "_active", None)
    lock = getattr(threading, "_active_limbo_lock", None)
    dummy = getattr(threading, "_DummyThread", None)
    if active is None or lock is None or dummy is None or not os.path.isdir(TaskThread.TASKS):
        return 0
    with lock:
        ended = [
            ident
            for ident, thread in active.items()
            if isinstance(thread, dummy)
            and not os.path.exists(f"{TaskThread.TASKS}/{thread.native_id}")
        ]
        for ident in ended:
            del active[ident]
    return len(ended)


class TaskThread:
    """The thread a task calls its function on in PyFlink's thread mode, and whether it lives.

    In thread mode the function runs inside the TaskManager's JVM, called on the task's own
    thread, which ends with the task; the interpreter and every thread the engine started live
    on. Whether the task ended is thus whether its thread is still one of the process's
    (``/proc/self/task``; thread ids are not reused before the kernel's pid range wraps).
    The thread is noted at every input and timer, so a host that moved the function to another
    thread would be followed, not mistaken for an ended task.
    """

    TASKS = "/proc/self/task"

    def __init__(self) -> None:
        self.native_id = threading.get_native_id()

    @classmethod
    def of_thread_mode(cls, runtime_context: RuntimeContext) -> TaskThread | None:
        """One for a function opened in thread mode on Linux; ``None`` otherwise (in process
        mode Beam's worker threads call the function: no thread stands for the task)."""
        embedded = type(runtime_context).__module__.startswith(
            "pyflink.fn_execution.datastream.embedded"
        )
        return cls() if embedded and os.path.isdir(cls.TASKS) else None

    def note(self) -> None:
        """The function was called on the current thread (an input, a timer)."""
        self.native_id = threading.get_native_id()

    def alive(self) -> bool:
        return os.path.exists(f"{self.TASKS}/{self.native_id}")


PUBLISH_INTERVAL_S = 0.25
"""How often at most the operator pushes its metrics into Flink's group: far below Flink's own
reporting and REST refresh intervals (seconds), far above the time between inputs."""


@dataclass
class PublishedMetrics:
    """The metrics counted on the engine's thread and the operator's metric group they go to."""

    counts: MetricsListener
    group: FlinkMetrics
    clock: Callable[[], float] = time.monotonic
    visits: VisitCounts = field(default_factory=VisitCounts)
    """The logic's visit counts, counted on the operator thread itself."""
    _published_at: float = -math.inf
    _visits_pushed: VisitCounts = field(default_factory=VisitCounts)

    def publish(self) -> None:
        """Push what changed and the gauges' values (on the operator thread)."""
        self._published_at = self.clock()
        self.counts.publish(self.group)
        self.group.increment(VISITS, self.visits.visits - self._visits_pushed.visits)
        self.group.increment(VISITS_IDLE, self.visits.idle - self._visits_pushed.idle)
        self._visits_pushed = VisitCounts(self.visits.visits, self.visits.idle)
        self.group.update_gauges()

    def publish_if_due(self) -> None:
        """:meth:`publish` if the last was ``PUBLISH_INTERVAL_S`` ago, or if nothing is in flight
        or queued (the operator may get no further input or timer to publish the last runs)."""
        idle = self.counts.in_flight == 0 and self.counts.queued == 0
        if idle or self.clock() - self._published_at >= PUBLISH_INTERVAL_S:
            self.publish()


class FlinkMetrics:
    """A :class:`~flink_agents.observability.sinks.metrics.MetricsSink` on a PyFlink metric group:
    a dotted name (``calls.model.live``) is a metric in nested groups (``calls`` > ``model``).

    A gauge is a counter that :meth:`update_gauges` sets to the gauge's value: Flink would call a
    Python gauge from its metrics thread, outside the operator's, and crash the TaskManager when
    the task's interpreter state is gone (a metrics query right after a cancel).
    """

    def __init__(self, group: MetricGroup) -> None:
        self._group = group
        self._counters: dict[str, Counter] = {}
        self._distributions: dict[str, Distribution] = {}
        self._gauges: dict[str, tuple[Callable[[], int], Counter]] = {}
        self._gauge_values: dict[str, int] = {}

    def register_gauge(self, name: str, read: Callable[[], int]) -> None:
        group, leaf = self._place(name)
        self._gauges[name] = (read, group.counter(leaf))
        self._gauge_values[name] = 0

    def update_gauges(self) -> None:
        """Set every gauge's counter to the gauge's value now (on the operator thread)."""
        for name, (read, counter) in self._gauges.items():
            value = read()
            change = value - self._gauge_values[name]
            if change > 0:
                counter.inc(change)
            elif change < 0:
                counter.dec(-change)
            self._gauge_values[name] = value

    def increment(self, name: str, amount: int) -> None:
        counter = self._counters.get(name)
        if counter is None:
            group, leaf = self._place(name)
            counter = self._counters[name] = group.counter(leaf)
        if amount:
            counter.inc(amount)

    def sample(self, name: str, value: int) -> None:
        distribution = self._distributions.get(name)
        if distribution is None:
            group, leaf = self._place(name)
            distribution = self._distributions[name] = group.distribution(leaf)
        distribution.update(value)

    def _place(self, name: str) -> tuple[MetricGroup, str]:
        *groups, leaf = name.split(".")
        group = self._group
        for part in groups:
            group = group.add_group(part)
        return group, leaf


class OutputTimestamps(TimestampAssigner):
    """The outputs' timestamps: their input's event time under ``event_time``, else the one
    Flink gave them, except that the ones a bounded input's end emits get none.

    Flink stamps what the operator emits with the input or timer it emits it in, not with the
    input whose run it comes from: an input's outputs leave at a later input or timer. Under
    ``event_time`` the operator writes each input's timestamp on its outputs' envelopes
    (``timestamp``) and this assigner gives it back to them; an output without one (an input
    that had none, a bad input) gets none. Without ``event_time``: the end-of-input timer's
    time is :data:`END_OF_INPUT`, 292 million years ahead: a Kafka 4 broker refuses such a
    record (``message.timestamp.after.max.ms``, one hour by default), the sink's task fails and
    the job restarts at the end of its input, again and again without a store.
    Processing-time timers' outputs already carry none (Flink erases it).
    """

    def __init__(self, event_time: bool = False) -> None:
        self._event_time = event_time

    def extract_timestamp(self, value: str, record_timestamp: int | None) -> int:
        if self._event_time:
            return envelope_timestamp(value)
        if record_timestamp is None or record_timestamp >= END_OF_INPUT:
            return NO_TIMESTAMP
        return record_timestamp


def envelope_timestamp(envelope: str) -> int:
    """The ``timestamp`` an output envelope (JSON text) carries, else :data:`NO_TIMESTAMP`."""
    if '"timestamp":' not in envelope:  # most envelopes: no parse
        return NO_TIMESTAMP
    timestamp = json.loads(envelope).get("timestamp")
    return timestamp if isinstance(timestamp, int) else NO_TIMESTAMP


def _event_timestamp(ctx: KeyedProcessFunction.Context) -> int | None:
    """The current input's timestamp, or None when it has none."""
    timestamp = ctx.timestamp()
    return None if timestamp is None or timestamp <= NO_TIMESTAMP else int(timestamp)


def _apply(visit: Visit, timers: TimerService) -> Iterable[str]:
    """Register the timers ``visit`` asks for; its outputs are what the function emits."""
    if visit.poll_at is not None:
        timers.register_processing_time_timer(visit.poll_at)
    if visit.wake_at is not None:  # a wait's deadline (docs/waits.md)
        timers.register_processing_time_timer(visit.wake_at)
    for at in visit.follow_ups_at:  # a scheduled follow-up (docs/waits.md, "Timers")
        timers.register_processing_time_timer(at)
    if visit.expiry_at is not None:  # expired short-term memory dropped (docs/memory.md)
        timers.register_processing_time_timer(visit.expiry_at)
    if visit.until_end_of_input:
        timers.register_event_time_timer(END_OF_INPUT)
    if faults.ARMED is not None and visit.outputs:
        return _emitted_then_checked(visit.outputs, faults.ARMED, visit.parked)
    return visit.outputs


def _emitted_then_checked(
    outputs: Sequence[str], plan: faults.FaultPlan, parked: int
) -> Iterator[str]:
    """``outputs``, then the :attr:`~KillPoint.AFTER_OUTPUT` kill point, and the
    :attr:`~KillPoint.WHILE_PAUSED` one for each run the visit parked: PyFlink emits each
    output as it is yielded, so the points are reached once they have left the operator."""
    yield from outputs
    plan.reached(KillPoint.AFTER_OUTPUT)
    for _ in range(parked):
        plan.reached(KillPoint.WHILE_PAUSED)


def _subtask_index(runtime_context: RuntimeContext) -> int:
    try:
        return runtime_context.get_index_of_this_subtask()
    except AttributeError:
        return runtime_context._runtime_context.getTaskInfo().getIndexOfThisSubtask()


def _parallelism(runtime_context: RuntimeContext) -> int:
    try:
        return runtime_context.get_number_of_parallel_subtasks()
    except AttributeError:
        return runtime_context._runtime_context.getTaskInfo().getNumberOfParallelSubtasks()


def _max_parallelism(runtime_context: RuntimeContext) -> int:
    """The job's key groups (its max parallelism), in process and thread mode alike."""
    try:
        return runtime_context.get_max_number_of_parallel_subtasks()
    except AttributeError:
        return runtime_context._runtime_context.getTaskInfo().getMaxNumberOfParallelSubtasks()


def with_cluster_heartbeat(
    options: OperatorOptions, environ: Mapping[str, str] | None = None
) -> OperatorOptions:
    """``options`` with the cluster's heartbeat settings where the job did not set them: the
    freeze fence then matches the cluster without every job repeating its configuration."""
    found = {
        field: value
        for field, value in cluster_heartbeat(environ).items()
        if field not in options.model_fields_set
    }
    if not found:
        return options
    try:
        return OperatorOptions.model_validate({**options.model_dump(exclude_unset=True), **found})
    except ValidationError as exc:
        logger.warning(
            "the cluster's heartbeat %s is not used for the freeze fence: %s", found, exc
        )
        return options


def _attempt_number(runtime_context: RuntimeContext) -> int:
    """The task's attempt number (0 on a fresh start), in process and thread mode alike."""
    try:
        return runtime_context.get_attempt_number()
    except AttributeError:
        # Thread mode: the embedded context calls a Java method removed in Flink 2.0.
        return runtime_context._runtime_context.getTaskInfo().getAttemptNumber()
