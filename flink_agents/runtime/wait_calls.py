"""A wait as a durable call: what ``ctx.wait_for_approval``, ``ctx.wait_for_event`` and
``ctx.sleep`` hand to the durable calls, and the durable call of ``ctx.schedule``
(docs/waits.md).

The call's identity is the invocation's next call identity, so its digest -- the wait's id -- is
derived from the run's durable identity: a replay of the run derives the same id, and a
decision sent for it finds the wait again. Its function (:class:`~flink_agents.api.paused.
WaitCall`) returns the decision the host handed the run, or pauses the run; its result is
recorded like any call's, so a resumed run gets it back from the record on every later replay.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from flink_agents.api.paused import WaitCall
from flink_agents.api.waits import Decision, ScheduledInput, WaitKind, WaitRequest
from flink_agents.durable.call import DurableCall
from flink_agents.durable.identity import CallIdentity, digest


def wait_call(
    identity: CallIdentity,
    kind: WaitKind,
    request: Any,
    event_type: str | None,
    match: Mapping[str, Any] | None,
    timeout_s: float | None,
    decisions: Mapping[str, Decision],
    deciders: Sequence[str] | None = None,
    contract: Any = None,
) -> DurableCall:
    """The durable call of one wait, resolved by ``decisions`` (the run's, by wait id); an
    approval's ``deciders`` and the digest of its ``contract`` go with its request."""
    if timeout_s is not None and timeout_s <= 0:
        raise ValueError(f"timeout_s {timeout_s!r}: a wait's timeout must be positive")
    if deciders is not None and (isinstance(deciders, str) or not deciders):
        raise ValueError(f"deciders {deciders!r}: a non-empty list of names, or None for anyone")
    waiting = WaitRequest(
        wait_id=identity.digest(),
        kind=kind,
        request=request,
        event_type=event_type,
        match=dict(match or {}),
        timeout_ms=None if timeout_s is None else max(1, round(timeout_s * 1000)),
        deciders=None if deciders is None else list(deciders),
        fingerprint=None if contract is None else digest(["wait-contract", contract]),
    )
    # The request is the call's argument: a replay that waits for something else differs from
    # the record (a mismatch), and the record shows what was asked. Who may decide and what the
    # decision is checked against are left out: the key's wait book checks them against the
    # decision (a plan changed while a run waits is not a mismatch but a decision to refuse),
    # and the arguments of waits recorded before they existed stay the same.
    asked = waiting.model_dump(mode="json", exclude={"wait_id", "deciders", "fingerprint"})
    return DurableCall(
        identity, WaitCall(waiting, decisions), (asked,), result_type=Decision, in_doubt="resend"
    )


def event_data(event_type: str | type[Any], decision: Decision) -> Any:
    """What ``wait_for_event`` returns: the event's data, validated into ``event_type`` when it
    is a pydantic model class."""
    if isinstance(event_type, type) and issubclass(event_type, BaseModel):
        return event_type.model_validate(decision.data)
    return decision.data


def schedule_call(
    identity: CallIdentity,
    input: Any,
    delay_s: float | None,
    at_ms: int | None,
    clock: Callable[[], float] = time.time,
) -> DurableCall:
    """The durable call of one ``ctx.schedule``: its result, the :class:`ScheduledInput`
    (id: the call's identity digest; time: ``at_ms``, or ``delay_s`` from when the call is
    first made), is recorded, so a replay hands back the same follow-up at the same time."""
    if (delay_s is None) == (at_ms is None):
        raise ValueError("schedule takes exactly one of delay_s and at_ms")
    if delay_s is not None and delay_s < 0:
        raise ValueError(f"delay_s {delay_s!r}: a follow-up cannot be scheduled in the past")
    asked = {"input": input, "delay_s": delay_s, "at_ms": at_ms}
    schedule_id = identity.digest()

    def scheduled(asked: dict[str, Any]) -> ScheduledInput:
        at = at_ms if at_ms is not None else round(clock() * 1000 + (delay_s or 0) * 1000)
        return ScheduledInput(schedule_id=schedule_id, at_ms=at, input=input)

    return DurableCall(identity, scheduled, (asked,), result_type=ScheduledInput)
