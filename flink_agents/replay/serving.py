"""What a replay makes of calls it cannot serve: every durable call is served from its record by
:class:`~flink_agents.durable.calls.DurableCalls` in ``recorded-only`` mode, none is made.

The calls compare each call the code makes now with the call recorded at the same position of
the same action invocation (as a job's replay does); :class:`ReplayBook` is told the rest. The
same call gets its recorded outcome; another call is a divergence; a call with no record is
reported and not made. Either ends the run: the error is an :class:`InfrastructureError`, so no
action or tool-call loop swallows it.

Live calls (``flink-agents replay --live``) are the exception: with ``live="missing"`` a call
with no record is made, with ``live="changed"`` also a call that differs from its record (the
model asked again after a prompt was edited). The run goes on with what the call returned; the
first such call is still the run's divergence, and every one is kept (:class:`LiveCall`) with
what it returned against what was recorded.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from flink_agents.api.context import InfrastructureError
from flink_agents.durable.call import DurableCall
from flink_agents.durable.mismatch import CallSignature, arguments_diff
from flink_agents.durable.store import ActionState, ActionStateKey, CallResult
from flink_agents.durable.store.inspect import payload_text
from flink_agents.observability import CallKind, PayloadWriter, call_kind

LiveCalls = Literal["missing", "changed"]
"""Which calls a replay makes live: those with no record, or also those that changed."""

#: How much of a live call's outcome and its record a report shows (secret fields redacted).
_SHOWN = PayloadWriter(max_chars=500)


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

    def succeeded(self, value: Any) -> None:
        self.returned = value

    def failed(self, error: BaseException) -> None:
        self.raised = error

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
class ReplayBook:
    """What a replayed run's recorded-only calls could not serve (see the module docstring):
    the :class:`~flink_agents.durable.calls.Unserved` policy of a replay.

    ``live``: which calls are made instead of ending the run (kept in :attr:`made_live`); the
    first is still reported as the run's divergence.
    """

    live: LiveCalls | None = None
    served: int = 0
    made_live: list[LiveCall] = field(default_factory=list)
    divergence: Divergence | None = None
    _made: int = 0  # calls asked for so far: the next one's ordinal in the run

    def handed_back(self, call: DurableCall) -> None:
        self.served += 1
        self._made += 1

    def unserved(
        self,
        call: DurableCall,
        position: int,
        recorded: CallResult | None,
        requested: CallSignature,
    ) -> LiveCall:
        """The run's divergence (the first one kept); raises :class:`DivergedError` unless
        ``live`` has the call made (then returns its :class:`LiveCall`)."""
        identity = call.identity
        index, self._made = self._made, self._made + 1
        kind = call_kind(call.function)
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

    def unconsumed(
        self,
        states: dict[ActionStateKey, ActionState],
        expected: set[ActionStateKey] | None,
        taken: Callable[[ActionStateKey], int],
    ) -> Divergence | None:
        """The first recorded call of an ``expected`` invocation (None: any of ``states``) the
        replay did not ask for (``taken``: how many of an invocation's calls it asked for), if
        any (checked at the end)."""
        for key, state in states.items():
            if expected is not None and key not in expected:
                continue
            position = taken(key)
            if position < len(state.calls):
                recorded = CallSignature.recorded(state.calls[position])
                return Divergence(
                    self._made,
                    key.action,
                    key.event_id or "",
                    position,
                    state.calls[position].kind or "function",  # none in older records
                    recorded,
                    None,
                )
        return None
