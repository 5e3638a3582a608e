"""The soak's checker: the promise checked against a whole history of calls, faults and outputs.

The history (all times epoch seconds):

* every request the services answered (:class:`bench.crash_oracle.Request`: service, key,
  when it arrived and was answered), the independent witness;
* per call (witness key), when the action-state store's topic first held its outcome (the
  store topic read after the run, :func:`bench.crash_oracle.completed_at`);
* the faults as they happened (:class:`Happened`);
* the inputs with their expected answers, and every committed output (read ``read_committed``).

The checks, each violation named with its call (or input) and the fault nearest before it:

* **reinvoked**: a request of a call whose outcome the store held (plus ``slack_s``) before the
  request arrived: a completed call made again;
* **resent-not-in-flight**: a request repeating an earlier one of its call that no fault
  explains: a resend is in order only if some fault began while the call was in flight (sent,
  its outcome not yet recorded), and the resend came after the fault began (a fault that
  restarted nothing, such as checkpoints failing that the job tolerated, explains none);
* **lost**: an input with no committed output;
* **duplicate**: an input with more than one committed output (the sink is exactly-once);
* **wrong**: a committed output other than the input's expected answer (an error included).

The mixed workload's waits (:func:`check_waits`), from the wait calls' recorded decisions and
the gated tool's requests as its service saw them:

* **wait-unresolved**: an input whose wait has no recorded decision (nor timeout);
* **wait-resolved-twice**: a wait with more than one distinct recorded decision;
* **gated-twice**: a gated tool run for one input under more than one call (idempotency key);
* **gated-unapproved**: a gated tool run whose wait was not approved (rejected, timed out, not
  resolved), or with other arguments than the approved (or edited) ones.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from bench.crash_oracle import Request

#: The store's record of an outcome is written before the action sees it and acknowledged a
#: little later; a request this close after the record does not count as a re-invocation.
SLACK_S = 1.0

CHECKS = ("reinvoked", "resent-not-in-flight", "lost", "duplicate", "wrong")
WAIT_CHECKS = ("wait-unresolved", "wait-resolved-twice", "gated-twice", "gated-unapproved")


@dataclass(frozen=True)
class Happened:
    """A fault as it was done: from ``start`` to ``end`` (epoch seconds; equal for a kill), and
    what the job did about it where the soak looked (``outcome``: checkpoints failed and job
    restarts, or what the job was doing when a restore was hit; "" for the rest).
    ``explains_resends`` is False for a fault that cannot make a call be sent again (checkpoints
    failing that the job tolerated without a restart): no resend is in order because of it."""

    fault_id: str
    kind: str
    start: float
    end: float
    outcome: str = ""
    explains_resends: bool = True


@dataclass(frozen=True)
class Output:
    """A committed output record: its input's (key, seq), when it was read, and its body."""

    key: str
    seq: int
    read_at: float
    body: dict[str, Any]


@dataclass(frozen=True)
class Violation:
    """One broken promise: which check, about which call or input, near which fault."""

    check: str
    subject: str
    fault: str
    detail: str

    def line(self) -> str:
        return f"{self.check}: {self.subject} (fault {self.fault}): {self.detail}"


@dataclass
class Verdict:
    """Every violation, and what the history held."""

    violations: list[Violation] = field(default_factory=list)
    checks: tuple[str, ...] = CHECKS
    requests: int = 0
    calls: int = 0
    resends: int = 0
    inputs: int = 0
    outputs: int = 0

    def counts(self) -> dict[str, int]:
        """Violations per check, every check named (0 where none)."""
        found = Counter(v.check for v in self.violations)
        return {check: found.get(check, 0) for check in self.checks}

    @property
    def ok(self) -> bool:
        return not self.violations


def check_history(
    requests: Sequence[Request],
    completed: Mapping[str, float],
    faults: Sequence[Happened],
    expected: Mapping[tuple[str, int], str],
    outputs: Sequence[Output],
    *,
    slack_s: float = SLACK_S,
) -> Verdict:
    """The checker over one run's history (module docstring)."""
    verdict = Verdict(requests=len(requests), inputs=len(expected), outputs=len(outputs))
    by_call: dict[tuple[str, str], list[Request]] = defaultdict(list)
    for request in sorted(requests, key=lambda r: r.started):
        by_call[(request.service, request.key)].append(request)
    verdict.calls = len(by_call)
    for (service, key), sent in by_call.items():
        done = completed.get(key)
        call = f"{service} call {key[:16]}"
        for earlier, again in pairwise(sent):
            verdict.resends += 1
            nearest = _nearest_before(faults, again.started)
            if done is not None and again.started > done + slack_s:
                verdict.violations.append(
                    Violation(
                        "reinvoked",
                        call,
                        nearest,
                        f"sent at {again.started:.3f}, its outcome recorded at {done:.3f}",
                    )
                )
            elif not _explained(earlier, again, done, faults, slack_s):
                verdict.violations.append(
                    Violation(
                        "resent-not-in-flight",
                        call,
                        nearest,
                        f"sent at {earlier.started:.3f} and again at {again.started:.3f} with "
                        f"no fault between them while it was in flight",
                    )
                )
    _check_outputs(verdict, faults, expected, outputs)
    return verdict


def _explained(
    earlier: Request,
    again: Request,
    done: float | None,
    faults: Sequence[Happened],
    slack_s: float,
) -> bool:
    """Whether a fault began while the call was in flight (sent by the fault's end, its outcome
    not recorded before the fault's start) and before the resend."""
    return any(
        fault.explains_resends
        and earlier.started <= fault.end + slack_s
        and (done is None or done >= fault.start - slack_s)
        and fault.start - slack_s <= again.started
        for fault in faults
    )


def _check_outputs(
    verdict: Verdict,
    faults: Sequence[Happened],
    expected: Mapping[tuple[str, int], str],
    outputs: Sequence[Output],
) -> None:
    seen: dict[tuple[str, int], list[Output]] = defaultdict(list)
    for output in sorted(outputs, key=lambda o: o.read_at):
        seen[(output.key, output.seq)].append(output)
    for run in sorted(set(expected) - set(seen)):
        verdict.violations.append(
            Violation("lost", f"input {run[0]}#{run[1]}", "-", "no committed output")
        )
    for run, found in sorted(seen.items()):
        subject = f"input {run[0]}#{run[1]}"
        if len(found) > 1:
            verdict.violations.append(
                Violation(
                    "duplicate",
                    subject,
                    _nearest_before(faults, found[1].read_at),
                    f"{len(found)} committed outputs, read at "
                    + ", ".join(f"{o.read_at:.3f}" for o in found),
                )
            )
        answer = found[0].body.get("output")
        if run not in expected or answer != expected[run]:
            what = found[0].body.get("error") or answer
            verdict.violations.append(
                Violation(
                    "wrong",
                    subject,
                    _nearest_before(faults, found[0].read_at),
                    f"committed {str(what)[:160]!r}, expected {expected.get(run)!r}",
                )
            )


@dataclass(frozen=True)
class Resolution:
    """A wait's recorded decision (the wait call's result) and what it asked to approve."""

    request: dict[str, Any]
    decision: dict[str, Any]

    def allowed(self) -> dict[str, Any] | None:
        """The arguments the gated tool may run with: the request's when approved, the edit's
        when edited, None when it may not run."""
        verdict = self.decision.get("verdict")
        if verdict == "approved":
            return self.request
        if verdict == "edited":
            return {**self.request, **(self.decision.get("arguments") or {})}
        return None


@dataclass(frozen=True)
class GatedRun:
    """One request of a gated tool, as its service saw it: its input, its call's key, its
    arguments, when it arrived."""

    subject: str
    key: str
    arguments: dict[str, Any]
    at: float


def check_waits(
    verdict: Verdict,
    resolutions: Mapping[str, Sequence[Resolution]],
    gated: Sequence[GatedRun],
    subjects: Sequence[str],
    faults: Sequence[Happened],
) -> None:
    """Add the wait checks (module docstring) to ``verdict``: ``resolutions`` per input, its
    wait's distinct recorded decisions; ``gated`` the gated tool's requests; ``subjects``
    every input that waits."""
    verdict.checks = (*verdict.checks, *WAIT_CHECKS)
    for subject in subjects:
        found = resolutions.get(subject, ())
        if not found:
            verdict.violations.append(
                Violation("wait-unresolved", f"wait of {subject}", "-", "no recorded decision")
            )
        elif len(found) > 1:
            verdict.violations.append(
                Violation(
                    "wait-resolved-twice",
                    f"wait of {subject}",
                    "-",
                    "recorded decisions "
                    + ", ".join(r.decision.get("verdict", "?") for r in found),
                )
            )
    keys: dict[str, set[str]] = defaultdict(set)
    for run in sorted(gated, key=lambda r: r.at):
        call = f"gated call {run.key[:16]} of {run.subject}"
        fault = _nearest_before(faults, run.at)
        keys[run.subject].add(run.key)
        if len(keys[run.subject]) == 2:  # said once, at the second call
            verdict.violations.append(
                Violation("gated-twice", call, fault, f"another call ran at {run.at:.3f}")
            )
        found = resolutions.get(run.subject, ())
        allowed = found[0].allowed() if len(found) == 1 else None
        if allowed is None or any(allowed.get(k) != v for k, v in run.arguments.items()):
            said = found[0].decision.get("verdict") if len(found) == 1 else "no one decision"
            verdict.violations.append(
                Violation(
                    "gated-unapproved",
                    call,
                    fault,
                    f"ran with {run.arguments} at {run.at:.3f}; the wait: {said}, allowed "
                    f"{allowed}",
                )
            )


def _nearest_before(faults: Sequence[Happened], moment: float) -> str:
    """The fault that began last before ``moment`` ("-" when none did)."""
    before = [f for f in faults if f.start <= moment]
    return max(before, key=lambda f: f.start).fault_id if before else "-"
