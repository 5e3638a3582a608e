"""Durable waits: an action that stops for a person's decision or for an outside event.

``await ctx.wait_for_approval(request, timeout_s=...)``, ``await ctx.wait_for_event(type,
match=..., timeout_s=...)`` and ``await ctx.sleep(duration_s)`` are durable calls of their own
kind (``wait``). While a run waits,
nothing of it is held in memory: the run ends its step *paused* (:class:`WaitRequest`, kept in
the key's state), and when its :class:`Decision` arrives (or its timeout fires) the decision is
recorded as the wait call's result and the action runs again, its earlier calls handed back
from their records. ``await ctx.schedule(input, delay_s=...)`` asks for a follow-up input of
the key later (:class:`ScheduledInput`). See docs/waits.md.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

WaitKind = Literal["approval", "event", "timer"]
"""What a wait is resolved by: a decision addressed to its id, an event of a type, or its own
time (``ctx.sleep``)."""

Verdict = Literal["approved", "edited", "rejected", "timed_out", "event", "elapsed"]
"""How a wait was resolved: a person approved, edited or rejected it, its timeout fired, the
event it waited for arrived, or (a sleep) its time came."""

OnTimeout = Literal["reject", "raise"]
"""What a timed-out approval gives the action: a :class:`Decision` whose verdict is
``timed_out`` (``reject``: not approved, so a gated step does not run), or
:class:`WaitTimedOutError` raised."""


class Decision(BaseModel):
    """The resolution of a wait: the wait call's recorded result, the same live and replayed."""

    model_config = ConfigDict(frozen=True)

    verdict: Verdict
    by: str | None = Field(default=None, description="Who decided (from the decision record).")
    at_ms: int | None = Field(default=None, description="When the decision was applied (ms).")
    message: str | None = Field(default=None, description="The decider's message, if any.")
    arguments: dict[str, Any] | None = Field(
        default=None, description="An edit's new arguments (verdict ``edited``)."
    )
    data: Any = Field(default=None, description="The event's data (verdict ``event``).")
    fingerprint: str | None = Field(
        default=None,
        description="The fingerprint of the approval request decided on (a person's decision); "
        "a run replayed under a plan whose wait has another one does not take it.",
    )

    @property
    def approved(self) -> bool:
        """Whether the gated step may go ahead (approved or edited)."""
        return self.verdict in ("approved", "edited")


class WaitRequest(BaseModel):
    """What a paused run waits for: emitted as the run's ``waiting`` record, kept in key state.

    ``wait_id`` is the wait call's identity digest (run, event, action, call id): a replay of
    the run derives the same id, so a decision sent for it finds the wait again.
    """

    model_config = ConfigDict(frozen=True)

    wait_id: str
    kind: WaitKind
    request: Any = None
    event_type: str | None = None
    match: dict[str, Any] = Field(default_factory=dict)
    timeout_ms: int | None = None
    deciders: list[str] | None = Field(
        default=None,
        description="Who may decide an approval (a decision's ``by``); None: anyone.",
    )
    fingerprint: str | None = Field(
        default=None,
        description="A digest of what an approval's decision is validated against (the gated "
        "tool's schema, the action): a run replayed under a plan whose wait has another one "
        "refuses a decision made on this one.",
    )


class ScheduledInput(BaseModel):
    """A follow-up input ``ctx.schedule`` asked for: at ``at_ms`` (processing time) the key
    gets ``input`` as a new input of its own run. ``schedule_id`` is the schedule call's
    identity digest, so a replayed run schedules the same follow-up, not another."""

    model_config = ConfigDict(frozen=True)

    schedule_id: str
    at_ms: int
    input: Any = None


class WaitTimedOutError(RuntimeError):
    """A wait's timeout fired before its decision or event (raised by ``wait_for_event``, and
    by ``wait_for_approval`` with ``on_timeout="raise"``)."""

    def __init__(self, wait_id: str) -> None:
        self.wait_id = wait_id
        super().__init__(f"wait {wait_id} timed out")
