"""A key's waits, as its saved state keeps them: :class:`WaitBook` (docs/waits.md).

Part of the key's :class:`~flink_agents.runtime.state.KeyState`, so one owner -- the keyed
logic, under the key -- decides every race by state, not by timing:

* a decision that arrives before its wait registers (the run is still on its way to the wait,
  or replaying towards it after a restore) is kept and applied when the wait registers;
* a record seen before (a source rewound after a failover) is dropped;
* a decision for a wait that is unknown (and no run of the key could still register it),
  timed out, or already decided is refused with the reason, never applied;
* a sleep (a wait of kind ``timer``) is resolved by its deadline only: a decision for it is
  refused;
* an approval that names its deciders refuses a decision by anyone else, and one that names
  the fingerprint of another version of its request;
* a run replayed under a plan whose wait has another fingerprint (the gated tool's schema or
  the action changed since the wait began) registers the wait anew: a person's decision not
  yet taken by the run is refused, and the wait asks again (fail closed);
* a timeout and a decision: whichever the key's logic handles first resolves the wait; the
  other is refused (a late decision) or does nothing (a late timer).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from flink_agents.api.waits import Decision, Verdict, WaitRequest
from flink_agents.durable.identity import canonical_json, digest

REMEMBERED = 256
"""How many resolved waits and applied records a key remembers (to refuse a late decision and
drop a duplicate): older ones are forgotten, a decision for them is then 'unknown'."""

_VERDICTS: dict[str, Verdict] = {"approve": "approved", "edit": "edited", "reject": "rejected"}


class Resume(BaseModel):
    """A decision or event record, keyed like the inputs (the JSON a decider writes).

    A decision names its wait (``wait``, from the run's ``waiting`` record) and a ``verdict``:
    ``approve``, ``edit`` (with the new ``arguments``) or ``reject``; ``by`` and ``message``
    are recorded with it. An event names its type (``event``) and carries ``data``.
    ``record_id`` names the record for duplicate detection (default: a digest of the whole
    record; not ``id``, which is often the key field). ``fingerprint`` (optional) is the one
    of the ``waiting`` record decided on: a decision naming another is refused.
    """

    wait: str | None = None
    verdict: Literal["approve", "edit", "reject"] | None = None
    by: str | None = None
    message: str | None = None
    arguments: dict[str, Any] | None = None
    event: str | None = None
    data: Any = None
    fingerprint: str | None = None
    record_id: str = ""

    @classmethod
    def parse(cls, record: Any) -> Resume:
        """The resume record ``record`` (a JSON object); raises ``ValueError`` naming what is
        wrong."""
        if not isinstance(record, dict):
            raise ValueError("a decision or event record is a JSON object")
        try:
            resume = cls.model_validate(record)
        except ValidationError as exc:
            raise ValueError(f"not a decision or event record: {exc.errors()[0]['msg']}") from exc
        if (resume.wait is None) == (resume.event is None):
            raise ValueError("a record names either a wait (a decision) or an event")
        if resume.wait is not None and resume.verdict is None:
            raise ValueError("a decision needs a verdict: approve, edit or reject")
        if resume.verdict == "edit" and resume.arguments is None:
            raise ValueError("an edit needs its new arguments")
        if not resume.record_id:
            named = digest(["resume", canonical_json(record)])
            resume = resume.model_copy(update={"record_id": named})
        return resume

    def decision(self, now_ms: int, fingerprint: str | None = None) -> Decision:
        """The decision this record makes, applied at ``now_ms`` to the request of
        ``fingerprint``."""
        if self.event is not None:
            return Decision(verdict="event", at_ms=now_ms, data=self.data)
        assert self.verdict is not None
        return Decision(
            verdict=_VERDICTS[self.verdict],
            by=self.by,
            at_ms=now_ms,
            message=self.message,
            arguments=self.arguments if self.verdict == "edit" else None,
            fingerprint=fingerprint,
        )

    def fits(self, wait: OpenWait) -> bool:
        """Whether this record resolves ``wait``."""
        request = wait.request
        if self.wait is not None:  # a sleep is resolved by its time only
            return self.wait == request.wait_id and request.kind != "timer"
        return (
            request.kind == "event"
            and request.event_type == self.event
            and isinstance(self.data, dict)
            and all(self.data.get(name) == value for name, value in request.match.items())
        )


class OpenWait(BaseModel):
    """A wait a paused run registered; decided once its decision is applied."""

    request: WaitRequest
    seq: int
    deadline_ms: int | None = None
    decision: Decision | None = None


@dataclass(frozen=True, slots=True)
class Apply:
    """Hand the run of the key's head input this decision for its wait."""

    wait_id: str
    decision: Decision


@dataclass(frozen=True, slots=True)
class Refused:
    """A record not applied, and why: goes to the error output."""

    reason: str
    record: Resume


Offer = Apply | Refused | Literal["kept", "duplicate"]
"""What became of a decision or event record."""


@dataclass(frozen=True, slots=True)
class Registered:
    """What registering a paused run's wait did: whether the wait is new to the key (its
    ``waiting`` record is due), the decision to hand the run at once, and the records refused
    (kept early for it, or decided on a request the plan no longer makes)."""

    new: bool
    apply: Apply | None = None
    refused: list[Refused] = field(default_factory=list)


class WaitBook(BaseModel):
    """The waits of one key (see the module docstring)."""

    open: list[OpenWait] = Field(default_factory=list)
    early: list[Resume] = Field(default_factory=list)
    resolved: dict[str, str] = Field(
        default_factory=dict, description="Wait id -> how it was resolved (the newest last)."
    )
    applied: list[str] = Field(default_factory=list, description="Ids of records applied.")

    def __bool__(self) -> bool:
        return bool(self.open or self.early or self.resolved)

    def offer(self, resume: Resume, *, runs_pending: bool, now_ms: int) -> Offer:
        """A decision or event record arrives; ``runs_pending``: the key has inputs whose runs
        have not finished (one of them may still register the wait)."""
        named = resume.record_id
        if named in self.applied or any(kept.record_id == named for kept in self.early):
            return "duplicate"
        for wait in self.open:
            if resume.fits(wait) and wait.decision is None:
                refused = _not_for(wait.request, resume)
                return refused or self._decide(wait, resume, now_ms)
        if any(w.request.wait_id == resume.wait and w.request.kind == "timer" for w in self.open):
            return Refused("the wait is a sleep: only its time ends it", resume)
        if resume.wait is not None:
            how = self.resolved.get(resume.wait) or next(
                (_how(w.decision) for w in self.open if w.request.wait_id == resume.wait), None
            )
            if how is not None:
                return Refused(f"the wait was already resolved ({how})", resume)
        if runs_pending:
            self.early.append(resume)
            return "kept"
        what = "wait" if resume.wait is not None else f"wait for event {resume.event!r}"
        return Refused(f"no {what} of this key is open or to come", resume)

    def register(self, request: WaitRequest, seq: int, now_ms: int) -> Registered:
        """A run of input ``seq`` paused at ``request``: whether the wait is new (a replay
        after a restore registers its waits again, keeping their deadlines; under a plan whose
        wait has another fingerprint it asks again), the decision to hand the run now (kept
        early, or decided before), and the records refused on the way."""
        for wait in self.open:
            if wait.request.wait_id == request.wait_id:
                if _changed(wait.request, request):
                    return self._ask_again(wait, request)
                decided = wait.decision
                return Registered(
                    False, None if decided is None else Apply(request.wait_id, decided)
                )
        timeout = request.timeout_ms
        wait = OpenWait(
            request=request, seq=seq, deadline_ms=None if timeout is None else now_ms + timeout
        )
        self.open.append(wait)
        refused: list[Refused] = []
        for kept in list(self.early):
            if kept.fits(wait):
                self.early.remove(kept)
                not_for = _not_for(request, kept)
                if not_for is None:
                    return Registered(True, self._decide(wait, kept, now_ms), refused)
                refused.append(not_for)
        return Registered(True, None, refused)

    def _ask_again(self, wait: OpenWait, request: WaitRequest) -> Registered:
        """The wait's plan changed since it began: its request is now ``request``, and a
        person's decision on the old one is refused (a timeout stands: no one decided)."""
        wait.request = request
        decided = wait.decision
        if decided is not None and decided.verdict not in ("approved", "edited", "rejected"):
            return Registered(False, Apply(request.wait_id, decided))
        wait.decision = None
        if decided is None:
            return Registered(True, None)
        why = (
            "the plan changed incompatibly since the wait began (what the decision is checked "
            "against differs): decide again on the new request"
        )
        return Registered(True, None, [Refused(why, _record_of(request.wait_id, decided))])

    def due(self, now_ms: int) -> list[Apply]:
        """Resolve the undecided waits whose deadline has passed: timed out (a sleep: elapsed)."""
        fired: list[Apply] = []
        for wait in self.open:
            deadline = wait.deadline_ms
            if wait.decision is None and deadline is not None and deadline <= now_ms:
                verdict: Verdict = "elapsed" if wait.request.kind == "timer" else "timed_out"
                wait.decision = Decision(verdict=verdict, at_ms=now_ms)
                fired.append(Apply(wait.request.wait_id, wait.decision))
        return fired

    def paused(self, seq: int) -> bool:
        """Whether the run of input ``seq`` waits for a decision."""
        return any(w.seq == seq and w.decision is None for w in self.open)

    def next_deadline(self) -> int | None:
        """The earliest deadline of an undecided wait."""
        deadlines = [
            w.deadline_ms for w in self.open if w.decision is None and w.deadline_ms is not None
        ]
        return min(deadlines, default=None)

    def decisions(self) -> dict[str, Decision]:
        """The decisions of open waits, by wait id (for a run restored after a failover)."""
        return {w.request.wait_id: w.decision for w in self.open if w.decision is not None}

    def waited(self) -> dict[int, set[str]]:
        """The open waits by the ``seq`` of the input whose run registered them."""
        by_seq: dict[int, set[str]] = {}
        for wait in self.open:
            by_seq.setdefault(wait.seq, set()).add(wait.request.wait_id)
        return by_seq

    def run_finished(self, seq: int, *, runs_pending: bool) -> list[Refused]:
        """Input ``seq``'s run finished: its waits close. Without runs left to register a wait,
        records kept early are refused."""
        for wait in [w for w in self.open if w.seq == seq]:
            self.open.remove(wait)
            # A run finishes past a wait only with its decision: none here means the run got
            # it from the wait call's record, written before a restore rewound the key state.
            self.resolved[wait.request.wait_id] = _how(wait.decision) or "decided before a restore"
        _forget_oldest(self.resolved)
        if runs_pending:
            return []
        orphans, self.early = self.early, []
        return [Refused("no wait of this key took it before its runs finished", r) for r in orphans]

    def _decide(self, wait: OpenWait, resume: Resume, now_ms: int) -> Apply:
        wait.decision = resume.decision(now_ms, wait.request.fingerprint)
        self.applied.append(resume.record_id)
        del self.applied[:-REMEMBERED]
        return Apply(wait.request.wait_id, wait.decision)


def _not_for(request: WaitRequest, resume: Resume) -> Refused | None:
    """Why ``resume``, which fits the wait of ``request``, may not decide it: a decider it
    does not name, or a decision made on another version of its request."""
    if request.deciders is not None and resume.by not in request.deciders:
        who = "a decision without 'by'" if resume.by is None else f"{resume.by!r}"
        named = ", ".join(request.deciders)
        return Refused(f"{who} may not decide this wait (its deciders: {named})", resume)
    if resume.fingerprint is not None and resume.fingerprint != request.fingerprint:
        return Refused(
            "the decision was made on another version of the request (its fingerprint "
            f"{resume.fingerprint}, the wait's {request.fingerprint})",
            resume,
        )
    return None


def _changed(registered: WaitRequest, replayed: WaitRequest) -> bool:
    """Whether a replayed run waits under another plan than the one the wait began with (a
    wait registered before fingerprints existed has none: it cannot tell, and stands)."""
    before = registered.fingerprint
    return before is not None and before != replayed.fingerprint


def _record_of(wait_id: str, decision: Decision) -> Resume:
    """The decision record that made ``decision`` (for a refusal's output)."""
    verdicts = {verdict: name for name, verdict in _VERDICTS.items()}
    return Resume(
        wait=wait_id,
        verdict=verdicts.get(decision.verdict),  # type: ignore[arg-type]
        by=decision.by,
        message=decision.message,
        arguments=decision.arguments,
    )


def _how(decision: Decision | None) -> str | None:
    if decision is None:
        return None
    return "timed out" if decision.verdict == "timed_out" else f"{decision.verdict}"


def _forget_oldest(resolved: dict[str, str]) -> None:
    for wait_id in list(resolved)[:-REMEMBERED]:
        del resolved[wait_id]
