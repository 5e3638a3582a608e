"""The emission point: the engine and the call runners tell an :class:`EventLog` what happens;
it builds the records and hands them to its listeners.

Hosts that configure no listener pass no event log, and every hook is then a single ``is not
None`` check at its call site: nothing is built or timed. A
:class:`~flink_agents.observability.listener.RunCounter` (the metrics) is called with the few
typed values it counts, and no record is built for it. Records are built
without validation (:func:`~flink_agents.observability.log_records.construct`): their fields come
from the engine, already typed, and validating 13 records per run cost about as much CPU as the
run itself (bench/observability_cost.py). When every listener takes lines
(:class:`~flink_agents.observability.lines.LineListener`: the JSON-lines file), no record is
built either: each record's line is rendered straight from its fields
(:mod:`~flink_agents.observability.lines`).
"""

from __future__ import annotations

import functools
import logging
import time
import zlib
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

from flink_agents.api.budgets import Budget
from flink_agents.api.chat import ChatMessage
from flink_agents.api.connection_notes import ConnectionNote
from flink_agents.api.events import ActionFailure, Event
from flink_agents.api.json_values import json_bytes
from flink_agents.api.waits import Decision, WaitRequest
from flink_agents.observability.call_refs import CallNamer, CallRef, RunRef, call_kind
from flink_agents.observability.lines import (
    LineListener,
    fields_json,
    members_line,
    payload_key,
    render_line,
)
from flink_agents.observability.listener import (
    EventListener,
    Observer,
    RunCounter,
    never_raises,
    record_kinds_of,
)
from flink_agents.observability.log_records import (
    ActionFinished,
    ActionStarted,
    BudgetDecision,
    BudgetNoted,
    CallFinished,
    CallOutcome,
    ConnectionNoted,
    EventDropped,
    EventSent,
    LogRecord,
    RunAdmitted,
    RunFinished,
    RunStarted,
    RunStatus,
    WaitChange,
    WaitNoted,
    _Record,
    construct,
    record_json,
)
from flink_agents.observability.payloads import PayloadWriter

logger = logging.getLogger(__name__)

T = TypeVar("T")

# The payload fields' keys as a line writes them, made once.
_INPUT = payload_key("input")
_PAYLOAD = payload_key("payload")

_ACTION_KINDS = frozenset({"action_started", "action_finished", "event_sent", "event_dropped"})


class RunSummary(Protocol):
    """What a finished run reports (:class:`~flink_agents.runtime.engine.RunResult` fits)."""

    @property
    def outputs(self) -> Sequence[Any]: ...
    @property
    def error(self) -> ActionFailure | None: ...
    @property
    def paused(self) -> object | None:
        """What the run waits for, if it paused at a wait instead of finishing."""


class EventLog:
    """Builds event-log records and hands each to every listener; tells every counter what it
    counts.

    ``payloads`` writes the payload fields (inputs, events, call arguments and results) and
    scrubs error messages; with ``include_payloads=False`` (a host that only counts) payload
    fields stay empty and nothing is serialized. ``sample`` below 1 records that fraction of the
    runs (:meth:`kept`); the counters count every run. ``observers`` are record listeners
    (``listeners``) and counters (``counters``): an object with the
    :class:`~flink_agents.observability.listener.RunCounter` methods is a counter. Listeners
    that take lines (``on_line``) get each record's JSON line, rendered without the record when
    no other listener wants records of its kind.
    """

    def __init__(
        self,
        observers: Sequence[Observer],
        *,
        payloads: PayloadWriter | None = None,
        include_payloads: bool = True,
        sample: float = 1.0,
    ) -> None:
        self.counters = tuple(each for each in observers if isinstance(each, RunCounter))
        self.listeners: tuple[EventListener | LineListener, ...] = tuple(
            each for each in observers if not isinstance(each, RunCounter)
        )
        self.payloads = payloads or PayloadWriter()
        self.include_payloads = include_payloads
        # A payload's JSON (the line path), bound once: no frame of the log's own per payload.
        self._payload_json: Callable[[Any], bytes] = (
            self.payloads.json if include_payloads else _null_json
        )
        self._payload_members: Callable[[dict[str, Any]], bytes] = (
            self.payloads.members if include_payloads else _null_members
        )
        if not 0.0 < sample <= 1.0:
            raise ValueError(f"sample must be in (0, 1], got {sample}")
        self._keep_below = None if sample == 1.0 else int(sample * 2**32)
        # Hooks ask kept() only of a sampled log: a call per hook cost ~2,000 instructions.
        self._sampled = self._keep_below is not None
        # The counters' hooks, bound once: each hook below calls them without building anything.
        # None without counters.
        self._admitted = _teller([counter.on_run_admitted for counter in self.counters])
        self._started = _teller([counter.on_run_started for counter in self.counters])
        self._finished = _teller([counter.on_run_finished for counter in self.counters])
        self._called = _teller([counter.on_call for counter in self.counters])
        # Counters that count connection notes (optional: RunCounter does not require it).
        self._noted_counters = tuple(
            counter for counter in self.counters if hasattr(counter, "on_connection_note")
        )
        # Counters that count paused and resumed waits (optional too).
        self._wait_counters = tuple(
            counter for counter in self.counters if hasattr(counter, "on_wait")
        )
        # Counters of long-term memory's work (optional too).
        self._memory_counters = tuple(
            counter for counter in self.counters if hasattr(counter, "on_memory")
        )
        self._compaction_counters = tuple(
            counter for counter in self.counters if hasattr(counter, "on_memory_compaction")
        )
        self._line_sinks = tuple(each for each in self.listeners if isinstance(each, LineListener))
        self._record_listeners = tuple(
            each  # an object with neither method fails in emit (logged), as before
            for each in self.listeners
            if not isinstance(each, LineListener)
        )
        self._records = bool(self._record_listeners)
        # Where a rendered line goes: the only line sink's own `on_line` when it never raises
        # (the file sink's queue put, a C call), else every sink, each in a try (a frame a line).
        self._line: Callable[[bytes], None] = self._to_line_sinks
        if len(self._line_sinks) == 1 and never_raises(self._line_sinks[0]):
            self._line = self._line_sinks[0].on_line
        kinds = [record_kinds_of(listener) for listener in self._record_listeners]
        # Actions and the events they send are most of a run's records; skip building them
        # when no listener wants them (kinds are checked per hook, not per record).
        self._action_records = any(
            wanted is None or not wanted.isdisjoint(_ACTION_KINDS) for wanted in kinds
        )
        self._actions_wanted = self._action_records or bool(self._line_sinks)
        self._names = CallNamer()
        # The file sinks' (JsonLinesSink) hand-over to the disk, for write_queued.
        self._writers: tuple[Callable[[], None], ...] = tuple(
            writer
            for each in self.listeners
            if (writer := getattr(each, "write_queued", None)) is not None
        )

    def emit(self, record: LogRecord) -> None:
        """Hand ``record`` to every listener of records (lines: :meth:`_publish`)."""
        for listener in self._record_listeners:
            try:
                listener.on_record(record)
            except Exception:
                logger.exception("event listener %r failed on a %s record", listener, record.kind)

    def _publish(
        self,
        record_type: type[_Record],
        fields: dict[str, Any],
        payloads: dict[str, Any] | None,
    ) -> None:
        """One record of ``fields`` (its non-payload fields in declaration order, ``kind``
        included: each hook writes them out as one dict literal, the cheapest dict to build, a
        third of a helper's with keyword arguments) and ``payloads`` (raw values, or None),
        built and emitted to the listeners of records (a hook calls this when one wants its
        kind; otherwise it renders the line itself and hands it to :attr:`_line`), then its
        line to the line sinks."""
        written = {name: self._payload(value) for name, value in (payloads or {}).items()}
        record = cast(LogRecord, construct(record_type, **fields, **written))
        self.emit(record)
        if self._line_sinks:
            self._line(record_json(record).encode())

    def _to_line_sinks(self, line: bytes) -> None:
        """Hand ``line`` to every line sink; one that raises is logged, as a listener is."""
        for sink in self._line_sinks:
            try:
                sink.on_line(line)
            except Exception:
                logger.exception("event listener %r failed on a line", sink)

    def write_queued(self) -> None:
        """Have the listeners that write files (``write_queued()``: the JSON-lines sink) write
        what they hold now, on the calling thread: a host calls this before it lets finished
        runs' outputs go, so that their records are in the file, even if the process is killed
        right after. Other sinks are not waited for (a Kafka topic's producer holds records in
        the process until the broker acknowledges them: a kill loses those)."""
        for write in self._writers:
            write()

    def close(self) -> None:
        """Close the listeners and counters that can be closed (a file sink writes what it
        holds)."""
        for observer in (*self.listeners, *self.counters):
            close: Callable[[], None] | None = getattr(observer, "close", None)
            if close is not None:
                close()

    def kept(self, run: RunRef) -> bool:
        """Whether ``run``'s records are written: always, unless the log samples runs. Then
        the run's identity decides (a hash of agent, key and seq against the fraction), so a
        run is in or out on every execution of it, after a restore too, in every process."""
        if self._keep_below is None:
            return True
        # ~0.7 us a hook (json.dumps with sorted keys: ~3.4): the key's JSON as it comes, the
        # same for the same key on every execution (a restored key is its JSON read back).
        identity = json_bytes([run.agent, run.key, run.seq], fallback=str)
        return zlib.crc32(identity) < self._keep_below

    # --- runs ------------------------------------------------------------------------------------

    def run_admitted(self, run: RunRef) -> None:
        if self._admitted is not None:
            self._admitted()
        if self.listeners and (not self._sampled or self.kept(run)):
            fields = _record_head(run, "run_admitted")
            if self._records:
                self._publish(RunAdmitted, fields, None)
            else:
                self._line(fields_json(fields))

    async def observe_run(
        self,
        run: RunRef,
        input: Any,
        work: Coroutine[Any, Any, T],
        summary: Callable[[T], RunSummary],
    ) -> T:
        """Await ``work`` (one run), recording its start and its end.

        A run the log does not keep (:meth:`kept`) is recorded only if it fails: its start and
        its end, both written when it ends (its actions and calls are not)."""
        start = _RunStart(run, input, time.time(), not self._sampled or self.kept(run))
        if self.listeners and start.kept:
            self._run_started(start)
        if self._started is not None:
            self._started()
        started = time.perf_counter_ns()
        try:
            outcome = await work
        except BaseException as exc:
            if not isinstance(exc, Exception):
                self._run_finished(start, "cancelled", started, 0, None)
            else:
                failure = self._error(exc) if self.listeners else None
                self._run_finished(start, "failed", started, 0, failure)
            raise
        result = summary(outcome)
        error = result.error
        self._run_finished(
            start,
            "paused" if result.paused is not None else "succeeded" if error is None else "failed",
            started,
            len(result.outputs),
            None if error is None or not self.listeners else self.payloads.text(error.describe()),
        )
        return outcome

    def _run_started(self, start: _RunStart) -> None:
        run = start.run
        fields = _record_head(run, "run_started", at=start.time)
        if self._records:
            self._publish(RunStarted, fields, {"input": start.input})
        else:
            self._line(render_line(fields, self._payload_json, (_INPUT, start.input)))

    def _run_finished(
        self,
        start: _RunStart,
        status: RunStatus,
        started: int,
        outputs: int,
        error: str | None,
    ) -> None:
        """Count a run's end and record it (``error``: rendered only when there are listeners);
        a failed run the sample left out gets its start recorded now."""
        latency_ms = _ms_since(started)
        if self._finished is not None:
            self._finished(status, latency_ms, outputs)
        if not self.listeners or not (start.kept or status == "failed"):
            return
        if not start.kept:
            self._run_started(start)
        run = start.run
        fields = _record_head(
            run,
            "run_finished",
            status=status,
            latency_ms=latency_ms,
            outputs=outputs,
            error=error,
        )
        if self._records:
            self._publish(RunFinished, fields, None)
        else:
            self._line(fields_json(fields))

    # --- actions and events ----------------------------------------------------------------------

    def action_started(self, run: RunRef, event: Event, action: str) -> ActionWatch | None:
        """Record an action's start; None (nothing to time) when no listener wants actions or
        the run is not kept."""
        if not self._actions_wanted or (self._sampled and not self.kept(run)):
            return None
        fields = _record_head(
            run,
            "action_started",
            action=action,
            event_id=event.id,
            event_type=event.type,
        )
        if self._action_records:
            self._publish(ActionStarted, fields, None)
        else:
            self._line(fields_json(fields))
        return ActionWatch(self, run, event, action, time.perf_counter_ns())

    def action_replayed(self, run: RunRef, event: Event, action: str, sent: list[Event]) -> None:
        """A completed action's record was reapplied instead of running it."""
        if self._sampled and not self.kept(run):
            return
        self.action_finished(run, event, action, time.perf_counter_ns(), sent, None, replayed=True)

    def action_finished(
        self,
        run: RunRef,
        event: Event,
        action: str,
        started: int,
        sent: Sequence[Event],
        error: BaseException | None,
        *,
        replayed: bool = False,
    ) -> None:
        """Record the events an action sent, then its end; ``started`` is its
        ``time.perf_counter_ns()`` start (see :class:`ActionWatch`)."""
        if not self._actions_wanted:
            return
        records = self._action_records
        for item in sent:
            fields = _record_head(
                run,
                "event_sent",
                event_id=item.id,
                event_type=item.type,
                upstream_id=item.upstream_id,
                action=item.upstream_action,
            )
            if records:
                self._publish(EventSent, fields, {"payload": item})
            else:
                self._line(render_line(fields, self._payload_json, (_PAYLOAD, item)))
        fields = _record_head(
            run,
            "action_finished",
            action=action,
            event_id=event.id,
            event_type=event.type,
            latency_ms=_ms_since(started),
            replayed=replayed,
            events_sent=len(sent),
            error=None if error is None else self._error(error),
        )
        if records:
            self._publish(ActionFinished, fields, None)
        else:
            self._line(fields_json(fields))

    def event_dropped(self, run: RunRef, event: Event) -> None:
        """Record that ``event`` was dropped: no action listens to it (rare: no cost per event)."""
        if not self._actions_wanted or (self._sampled and not self.kept(run)):
            return
        fields = _record_head(
            run,
            "event_dropped",
            event_id=event.id,
            event_type=event.type,
            upstream_id=event.upstream_id,
            action=event.upstream_action,
        )
        if self._action_records:
            self._publish(EventDropped, fields, None)
        else:
            self._line(fields_json(fields))

    def budget_noted(
        self, run: RunRef, decision: BudgetDecision, budget: Budget, spent: float
    ) -> None:
        """Record what a budget did to a new model call (rare: no cost per call)."""
        fields = _record_head(
            run,
            "budget",
            budget=budget.name,
            decision=decision,
            unit=budget.unit,
            spent=spent,
            limit=budget.limit,
        )
        self._publish(BudgetNoted, fields, None)

    def connection_noted(self, run: RunRef, note: ConnectionNote) -> None:
        """Record and count what a connection did to a call of ``run`` (routed it, moved it to
        a fallback, held it for a rate limit): rare next to calls, built unconditionally."""
        for counter in self._noted_counters:
            counter.on_connection_note(note.decision, note.waited_ms)
        if not self.listeners or (self._sampled and not self.kept(run)):
            return
        fields = _record_head(
            run,
            "connection",
            connection=note.connection,
            decision=note.decision,
            reason=note.reason,
            target=note.target,
            waited_ms=note.waited_ms,
        )
        self._publish(ConnectionNoted, fields, None)

    # --- long-term memory ------------------------------------------------------------------------

    @property
    def counts_memory(self) -> bool:
        """Whether a counter counts memory's work (:meth:`memory_noted` then has a reader)."""
        return bool(self._memory_counters)

    def memory_noted(
        self, searches: int, writes: int, deletes: int, bytes_written: int, items: list[int]
    ) -> None:
        """Count a run's long-term memory work (metrics only: no record)."""
        for counter in self._memory_counters:
            counter.on_memory(searches, writes, deletes, bytes_written, items)

    def memory_compacted(self, items_before: int, items_after: int, tokens: int) -> None:
        """Count a compaction of a key's memory set (metrics only: no record; its model call
        is recorded as the compaction run's call)."""
        for counter in self._compaction_counters:
            counter.on_memory_compaction(items_before, items_after, tokens)

    # --- waits ----------------------------------------------------------------------------------

    def wait_noted(
        self,
        run: RunRef,
        change: WaitChange,
        request: WaitRequest,
        deadline_ms: int | None,
        decision: Decision | None = None,
    ) -> None:
        """Record and count that ``run`` paused at the wait ``request`` (``paused``), or that
        ``decision`` resolved it (``resumed``): rare next to calls, built unconditionally. The
        decision's message and an edit's arguments are left out (a decider's free text);
        the request is a payload, as on the run's ``waiting`` output record."""
        verdict = None if decision is None else decision.verdict
        for counter in self._wait_counters:
            counter.on_wait(change, verdict)
        if not self.listeners or (self._sampled and not self.kept(run)):
            return
        fields = _record_head(
            run,
            "wait",
            wait_id=request.wait_id,
            wait_kind=request.kind,
            change=change,
            deadline_ms=deadline_ms,
            verdict=verdict,
            by=None if decision is None else decision.by,
        )
        asked = request.request if change == "paused" else None
        self._publish(WaitNoted, fields, {"request": asked})

    # --- durable calls ---------------------------------------------------------------------------

    def call_finished(
        self,
        call: CallRef,
        outcome: CallOutcome,
        started: int,
        *,
        attempts: int | None = None,
        value: Any = None,
        error: BaseException | None = None,
    ) -> None:
        """Record ``call``'s outcome; ``started`` is its ``time.perf_counter_ns()`` start."""
        latency_ms = _ms_since(started)
        usage = (
            value.usage
            if type(value) is ChatMessage or isinstance(value, ChatMessage)  # ABCMeta's: ~1,000
            else None
        )
        kind = call_kind(call.function)  # asked once, for the counters and the names
        if self._called is not None:
            self._called(kind, outcome, latency_ms, usage)
        if not self.listeners or (self._sampled and not self.kept(call.identity.run)):
            return
        identity = call.identity
        target, function = self._names.names(call.function, kind)
        run = identity.run
        fields = _record_head(
            run,
            "call",
            event_id=identity.event_id,
            action=identity.action,
            call_id=identity.call_id,
            call_kind=target.kind,
            function=function,
            target=target.name,
            provider=target.provider,
            outcome=outcome,
            attempts=attempts,
            latency_ms=latency_ms,
            usage=usage,
            error=None if error is None else self._error(error),
        )
        payloads = {
            "arguments": {"args": call.args, "kwargs": call.kwargs},
            "result": value if error is None else None,
        }
        if self._records:
            self._publish(CallFinished, fields, payloads)
        else:  # both payloads serialized and gated at once
            self._line(members_line(fields, self._payload_members(payloads)))

    # --- helpers ---------------------------------------------------------------------------------

    def _payload(self, value: Any) -> Any:
        return self.payloads(value) if self.include_payloads else None

    def _error(self, error: BaseException) -> str:
        return self.payloads.text(f"{type(error).__name__}: {error}")


@dataclass(slots=True)
class _RunStart:
    """What a run's end needs of its start."""

    run: RunRef
    input: Any
    time: float
    kept: bool


@dataclass(slots=True)
class ActionWatch:
    """One action invocation being timed; :meth:`finished` or :meth:`failed` ends it."""

    log: EventLog
    run: RunRef
    event: Event
    action: str
    started: int

    def finished(self, sent: Sequence[Event]) -> None:
        self.log.action_finished(self.run, self.event, self.action, self.started, sent, None)

    def failed(self, error: BaseException) -> None:
        self.log.action_finished(self.run, self.event, self.action, self.started, (), error)


def _null_json(value: Any) -> bytes:
    return b"null"


def _null_members(values: dict[str, Any]) -> bytes:
    return b",".join(b'"%s":null' % name.encode() for name in values)


def _teller(hooks: list[Callable[..., None]]) -> Callable[..., None] | None:
    """What a hook calls to tell every counter: None without counters; the counter's own
    method when it is the only one and never raises (the Flink metrics: no frame of ours a
    call); else :func:`_tell` over them."""
    if not hooks:
        return None
    if len(hooks) == 1 and never_raises(getattr(hooks[0], "__self__", None)):
        return hooks[0]
    return functools.partial(_tell, tuple(hooks))


def _tell(hooks: tuple[Callable[..., None], ...], *values: Any) -> None:
    """Call each counter's hook with ``values``; a counter that raises is logged, as a listener
    is."""
    for hook in hooks:
        try:
            hook(*values)
        except Exception:
            logger.exception("event log counter hook %r failed", hook)


def _ms_since(started: int) -> float:
    """Milliseconds since ``started`` (a ``time.perf_counter_ns()``), to the microsecond: the
    float ``round(seconds * 1000, 3)`` gave, from integers (that ``round`` of a float cost
    ~2,600 instructions a call)."""
    return (time.perf_counter_ns() - started + 500) // 1000 / 1000


def _record_head(run: RunRef, kind: str, at: float | None = None, **rest: Any) -> dict[str, Any]:
    """A record's fields: the head every record starts with (when, which run, what kind), then
    ``rest`` in the order given (a line record keeps it)."""
    return {
        "time": time.time() if at is None else at,
        "agent": run.agent,
        "key": run.key,
        "seq": run.seq,
        "kind": kind,
        **rest,
    }
