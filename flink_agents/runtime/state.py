"""Per-key state, in the form a host (the keyed logic, for the Flink operator) saves and restores.

The saved :class:`KeyState` is the one owner of a key's ``seq`` and of its committed short-term
memory: the engine runs each input under the ``seq`` it is handed, and starts from this memory
after a restore.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from flink_agents.api.long_term_memory import StoredMemory
from flink_agents.api.waits import ScheduledInput
from flink_agents.runtime.budget_meter import KeySpend
from flink_agents.runtime.wait_book import WaitBook


class PendingInput(BaseModel):
    """An input that has a ``seq`` but whose run has not finished."""

    seq: int
    input: Any
    admitted_at: float | None = Field(default=None, exclude_if=lambda at: at is None)
    """When the input got its ``seq`` (epoch ms): the run's clock, by which its short-term
    memory expires. Saved with the input, so a run restored from a checkpoint keeps the clock
    it had (None in a state saved before memory could expire: the restore sets it)."""
    timestamp: int | None = Field(default=None, exclude_if=lambda ts: ts is None)
    """The input's event time (epoch ms), kept when the host asks for it: the run's outputs
    carry it (docs/pipelines.md, "Event time")."""


class KeyState(BaseModel):
    """Everything the engine keeps for one key between runs.

    ``pending`` lists unfinished inputs in order, the running one first: after a restore they run
    again with the same ``seq`` (hence the same run and call ids). ``short_term_memory`` is the
    memory as of the last finished run; a run's writes are committed only when it succeeds.
    ``spend`` is what the key's finished runs spent on model and embedding calls (with an error
    output too), kept for its budgets (docs/budgets.md).
    ``long_term_memory`` is the key's memory sets (set -> item id -> item with its vector), the
    keyed-state backend of long-term memory (runtime/keyed_memory.py), committed the same way.
    """

    next_seq: int = 0
    pending: list[PendingInput] = Field(default_factory=list)
    short_term_memory: dict[str, Any] = Field(default_factory=dict)
    short_term_expiry: dict[str, float] = Field(default_factory=dict, exclude_if=lambda e: not e)
    """Entry -> when it expires (epoch ms), for the short-term memory entries that expire."""
    spend: KeySpend | None = Field(default=None, exclude_if=lambda spend: spend is None)
    # Left out of the saved JSON when empty: a key without long-term memory saves the bytes it
    # saved before long-term memory existed.
    long_term_memory: dict[str, dict[str, StoredMemory]] = Field(
        default_factory=dict, exclude_if=lambda sets: not sets
    )
    waits: WaitBook = Field(default_factory=WaitBook, exclude_if=lambda waits: not waits)
    """The key's waits: open, decided, kept early (docs/waits.md); not written while it holds
    none, so the state of a key that never waited is what it was before waits."""
    scheduled: list[ScheduledInput] = Field(
        default_factory=list, exclude_if=lambda scheduled: not scheduled
    )
    """Follow-ups of the key's finished runs not yet due (``ctx.schedule``, docs/waits.md):
    checkpointed with the key, each delivered once as a new input when its time comes."""

    def runs_on(self, *, alongside: bool) -> bool:
        """Whether a run of the key's pending inputs can go on now: the head's unless it is
        paused at a wait; with ``alongside`` (``while_paused``), any one's not paused."""
        if not self.pending or not self.waits:
            return bool(self.pending)
        if alongside:
            return any(not self.waits.paused(p.seq) for p in self.pending)
        return not self.waits.paused(self.pending[0].seq)

    def schedule(self, follow_ups: Sequence[ScheduledInput]) -> None:
        """Keep a finished run's follow-ups (one already kept, by id, is not kept twice)."""
        kept = {s.schedule_id for s in self.scheduled}
        self.scheduled += [s for s in follow_ups if s.schedule_id not in kept]

    def next_wake(self) -> int | None:
        """When a timer of the key must fire next: its earliest wait deadline or follow-up."""
        times = [s.at_ms for s in self.scheduled]
        deadline = self.waits.next_deadline() if self.waits else None
        if deadline is not None:
            times.append(deadline)
        return min(times, default=None)

    def take_due(self, now_ms: int) -> list[PendingInput]:
        """The follow-ups due at ``now_ms``, in order of their time, as the key's next inputs
        (each with its own ``seq``); they are no longer scheduled."""
        due = sorted((s for s in self.scheduled if s.at_ms <= now_ms), key=lambda s: s.at_ms)
        if not due:
            return []
        self.scheduled = [s for s in self.scheduled if s.at_ms > now_ms]
        taken = []
        for follow_up in due:
            taken.append(PendingInput(seq=self.next_seq, input=follow_up.input))
            self.next_seq += 1
        self.pending += taken
        return taken
