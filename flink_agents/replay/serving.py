"""The call runner of a replay: every durable call is served from its record, none is made.

:class:`RecordedCallRunner` compares each call the code makes now with the call recorded at
the same position of the same action invocation (as a job's replay does). The same call gets
its recorded outcome; another call is a divergence; a call with no record is reported and not
made. Either ends the run: the error is an :class:`InfrastructureError`, so no action or
tool-call loop swallows it.

Live calls (``flink-agents replay --live``) are the exception: with ``live="missing"`` a call
with no record is made, with ``live="changed"`` also a call that differs from its record (the
model asked again after a prompt was edited). The run goes on with what the call returned; the
first such call is still the run's divergence, and every one is kept (:class:`LiveCall`) with
what it returned against what was recorded.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from flink_agents.api.context import InfrastructureError, RecordedCallError
from flink_agents.durable.call import DurableCall
from flink_agents.durable.identity import ActionInvocation, RunId, canonical_json
from flink_agents.durable.replay import CallSignature, arguments_diff
from flink_agents.durable.store import ActionState, ActionStateKey, CallResult, CallStatus, RunKey
from flink_agents.durable.store.inspect import payload_text
from flink_agents.observability import EventLog
from flink_agents.observability.payloads import PayloadWriter

CallKind = Literal["model", "tool", "sub-agent", "call"]
LiveCalls = Literal["missing", "changed"]
"""Which calls a replay makes live: those with no record, or also those that changed."""

#: How much of a live call's outcome and its record a report shows (secret fields redacted).
_SHOWN = PayloadWriter(max_chars=500)


def call_kind(call_id: str, function: str) -> CallKind:
    """What a durable call is, from its id and label (the built-in actions' conventions)."""
    if call_id == "chat" or function.endswith(".chat"):
        return "model"
    if call_id.startswith("tool:"):
        return "tool"
    if "subagent" in call_id.lower() or "subagent" in function.lower():
        return "sub-agent"
    return "call"


@dataclass(frozen=True)
class Divergence:
    """The first call where the code now differs from the record.

    ``index`` is the call's ordinal in the run (0-based, in the order the code made them),
    ``position`` its ordinal within its action invocation. ``recorded`` is None for a call with
    no record (a new call), ``requested`` None for a recorded call the code no longer makes.
    ``made_live``: the call was made (``--live``) instead of ending the run.
    """

    index: int
    action: str
    event_id: str
    position: int
    kind: CallKind
    recorded: CallSignature | None
    requested: CallSignature | None
    made_live: bool = False

    @property
    def reason(self) -> str:
        made = "made live" if self.made_live else "not made"
        if self.recorded is None:
            return f"a call with no record ({made})"
        if self.requested is None:
            return "a recorded call the code no longer makes"
        return "another call than the recorded one" + (" (made live)" if self.made_live else "")

    def describe(self) -> str:
        """Position, kind, function, both digests and the diff of the arguments."""
        signature = self.requested or self.recorded
        assert signature is not None
        lines = [
            f"first differing call: #{self.index} of the run, #{self.position} of action "
            f"{self.action!r} (event {self.event_id}): {self.kind} {signature.function} "
            f"({self.reason})",
            f"  recorded: {self.recorded.describe() if self.recorded else '-'}",
            f"  now:      {self.requested.describe() if self.requested else '-'}",
        ]
        if self.recorded is not None and self.requested is not None:
            lines.append(arguments_diff(self.recorded, self.requested))
        elif self.requested is not None and self.requested.arguments is not None:
            lines.append("  arguments now:")
            lines.extend(f"    {line}" for line in self.requested.arguments.splitlines())
        return "\n".join(line for line in lines if line)


class DivergedError(InfrastructureError):
    """Ends a replayed run at its first divergence (see :class:`Divergence`)."""

    def __init__(self, divergence: Divergence) -> None:
        self.divergence = divergence
        super().__init__(divergence.describe())


@dataclass
class LiveCall:
    """A call a replay made live (see the module): where it was, its record at that position
    (None: none, or one that never finished) and what it returned or raised."""

    index: int
    action: str
    position: int
    kind: CallKind
    function: str
    recorded: CallResult | None
    returned: Any = None
    raised: BaseException | None = None

    def describe(self) -> str:
        """Where the call was, then its recorded and its live outcome (JSON, cut, with
        secret-named fields redacted)."""
        return "\n".join(
            [
                f"made live: #{self.index} of the run, #{self.position} of action "
                f"{self.action!r}: {self.kind} {self.function}",
                f"  recorded: {_recorded_text(self.recorded)}",
                f"  live:     {self._live_text()}",
            ]
        )

    def _live_text(self) -> str:
        if self.raised is not None:
            return f"raised {type(self.raised).__name__}: {_SHOWN.text(str(self.raised))}"
        return json.dumps(_SHOWN(self.returned), ensure_ascii=False)


def _recorded_text(recorded: CallResult | None) -> str:
    if recorded is None:
        return "- (no outcome recorded)"
    if recorded.error is not None:
        return f"failed {recorded.error.type}: {payload_text(recorded, _SHOWN)}"
    return payload_text(recorded, _SHOWN)


@dataclass
class _Position:
    state: ActionState | None
    next: int = 0


@dataclass
class RecordedCallRunner:
    """Serves one recorded run's calls (``states``); see the module docstring.

    ``live``: which calls are made instead of ending the run (kept in :attr:`made_live`); the first
    is still reported as the run's divergence. ``expected`` are the
    invocations whose every recorded call the code must make again (see :meth:`unconsumed`;
    None: all of ``states``).
    """

    states: dict[ActionStateKey, ActionState]
    live: LiveCalls | None = None
    expected: set[ActionStateKey] | None = None
    served: int = 0
    made_live: list[LiveCall] = field(default_factory=list)
    divergence: Divergence | None = None
    journal: None = None  # every action runs again: that is the point of a replay
    event_log: EventLog | None = None  # not written: a replay records nothing
    _positions: dict[ActionStateKey, _Position] = field(default_factory=dict)
    _made: int = 0

    def run_admitted(self, run: RunId, input: Any) -> None:
        return None

    def run_finished(self, run: RunId) -> None:
        return None

    def run(self, call: DurableCall) -> Any:
        served = self._serve(call)
        if isinstance(served, CallResult):
            return _outcome(served, call)
        try:
            served.returned = call.invoke()
        except Exception as exc:
            served.raised = exc
            raise
        return served.returned

    async def run_async(self, call: DurableCall) -> Any:
        served = self._serve(call)
        if isinstance(served, CallResult):
            return _outcome(served, call)
        try:
            value = call.invoke()
            served.returned = await value if inspect.isawaitable(value) else value
        except Exception as exc:
            served.raised = exc
            raise
        return served.returned

    def unconsumed(self) -> Divergence | None:
        """The first recorded call of an ``expected`` invocation the replay did not ask for,
        if any (checked at the end)."""
        for key, state in self.states.items():
            if self.expected is not None and key not in self.expected:
                continue
            taken = self._positions[key].next if key in self._positions else 0
            if taken < len(state.calls):
                recorded = CallSignature.recorded(state.calls[taken])
                return Divergence(
                    self._made,
                    key.action,
                    key.event_id or "",
                    taken,
                    call_kind(recorded.call_id, recorded.function),
                    recorded,
                    None,
                )
        return None

    def _serve(self, call: DurableCall) -> CallResult | LiveCall:
        """The record to hand back, or the live call to make (see ``live``)."""
        identity = call.identity
        key = _state_key(identity.invocation)
        where = self._positions.setdefault(key, _Position(self.states.get(key)))
        position, where.next = where.next, where.next + 1
        index, self._made = self._made, self._made + 1
        requested = CallSignature.of(identity.call_id, call.function, call.args, call.kwargs)
        calls = where.state.calls if where.state is not None else []
        recorded = calls[position] if position < len(calls) else None
        if recorded is not None and CallSignature.recorded(recorded).matches(requested):
            if recorded.status is not CallStatus.PENDING:
                self.served += 1
                return recorded
            recorded = None  # started but never finished when recorded: no outcome to give
        kind = call_kind(requested.call_id, requested.function)
        made_live = self.live == "changed" or (self.live == "missing" and recorded is None)
        found = Divergence(
            index,
            identity.action,
            identity.event_id,
            position,
            kind,
            CallSignature.recorded(recorded) if recorded is not None else None,
            requested,
            made_live,
        )
        if self.divergence is None:
            self.divergence = found
        if not made_live:
            raise DivergedError(found)
        live = LiveCall(index, identity.action, position, kind, requested.function, recorded)
        self.made_live.append(live)
        return live


def _outcome(recorded: CallResult, call: DurableCall) -> Any:
    if recorded.status is CallStatus.FAILED:
        error = recorded.error
        assert error is not None
        raise RecordedCallError(call.identity.call_id, error.type, error.message, error.trace)
    return recorded.value(call.result_type)


def _state_key(invocation: ActionInvocation) -> ActionStateKey:
    run = invocation.run
    return RunKey(agent=run.agent, key=canonical_json(run.key), seq=run.seq).action(
        invocation.action, invocation.event_id
    )
