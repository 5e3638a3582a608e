"""The action journal: what a completed action invocation did, so replay need not re-run it.

The engine asks its call runner for a journal (:attr:`CallRunner.journal`). Without one (no
store) nothing is recorded and every action runs. With one, before invoking an action the
engine asks :meth:`ActionJournal.recorded`; a completed invocation comes back as a
:class:`RecordedAction`, whose memory writes are re-applied and whose events are dispatched in
place of calling the action. After an action returns, the engine hands the journal what it did.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from flink_agents.api.events import Event
from flink_agents.api.long_term_memory import KeyMemory, MemoryWrite
from flink_agents.api.memory import Memory
from flink_agents.api.waits import ScheduledInput
from flink_agents.durable.identity import ActionInvocation, RunId

MemoryScope = Literal["short_term", "sensory", "long_term", "scheduled"]
"""What an action's recorded write changes: a memory, or (``scheduled``) the run's follow-ups
(``ctx.schedule``), which the run stages like its long-term writes."""


class RunMemories(Protocol):
    """The memories of a run that an action writes (the engine's ``RunState``)."""

    short_term_memory: Memory
    sensory_memory: Memory
    scheduled: list[ScheduledInput]

    @property
    def long_term_memory(self) -> KeyMemory:
        """The key's long-term memory with the run's writes staged (docs/memory.md)."""
        ...


class MemoryUpdate(BaseModel):
    """One write to a run's memory: set the entry ``key`` to ``value`` (expiring at
    ``expires_at``, epoch ms, if it expires) or (``delete``) remove it; for long-term memory,
    ``value`` is the :class:`MemoryWrite` (``key``: its set, for readers); for a follow-up, the
    :class:`ScheduledInput` (``key``: its id)."""

    scope: MemoryScope
    key: str
    delete: bool = False
    value: Any = None
    # Left out when None: the journal of a write that does not expire is what it was before
    # short-term memory could expire.
    expires_at: float | None = Field(default=None, exclude_if=lambda at: at is None)

    def apply(self, run: RunMemories) -> None:
        if self.scope == "long_term":
            run.long_term_memory.apply(MemoryWrite.model_validate(self.value))
            return
        if self.scope == "scheduled":
            run.scheduled.append(ScheduledInput.model_validate(self.value))
            return
        memory = run.short_term_memory if self.scope == "short_term" else run.sensory_memory
        if self.delete:
            memory.drop_entry(self.key)
        else:
            memory.replace_entry(self.key, self.value, self.expires_at)


@dataclass
class RecordedAction:
    """What one action invocation did: the events it sent and its memory writes, in order."""

    events: list[Event] = field(default_factory=list)
    memory_updates: list[MemoryUpdate] = field(default_factory=list)

    def reapply(self, run: RunMemories) -> list[Event]:
        """Re-apply the memory writes to ``run``; returns the events to dispatch."""
        for update in self.memory_updates:
            update.apply(run)
        return list(self.events)


class MemoryWatch:
    """Snapshots a run's memories before an action, to tell its writes afterwards.

    A diff rather than hooks on :class:`Memory`: it also catches values mutated in place.
    """

    def __init__(self, run: RunMemories) -> None:
        self._run = run
        # Long-term writes are staged in order, never diffed: the new ones are the writes.
        self._long_term_from = len(run.long_term_memory.writes)
        self._scheduled_from = len(run.scheduled)  # appended in order, like long-term writes
        self._before = {
            "short_term": _snapshot(run.short_term_memory),
            "sensory": _snapshot(run.sensory_memory),
        }
        self._expiry_before = run.short_term_memory.expiry()

    def updates(self) -> list[MemoryUpdate]:
        """Writes since the snapshot, as updates that turn the old content into the new."""
        now: dict[MemoryScope, Memory] = {
            "short_term": self._run.short_term_memory,
            "sensory": self._run.sensory_memory,
        }
        updates: list[MemoryUpdate] = []
        for scope, memory in now.items():
            before = self._before[scope]
            if not before and not len(memory):
                continue  # empty before and after
            after = _snapshot(memory)
            gone = [k for k in before if k not in after]
            updates += [MemoryUpdate(scope=scope, key=k, delete=True) for k in gone]
            expiry = memory.expiry()
            updates += [
                MemoryUpdate(scope=scope, key=k, value=v, expires_at=expiry.get(k))
                for k, v in after.items()
                if k not in before
                or before[k] != v
                or (scope == "short_term" and self._expiry_before.get(k) != expiry.get(k))
            ]
        updates += [
            MemoryUpdate(scope="long_term", key=write.set, value=write)
            for write in self._run.long_term_memory.writes[self._long_term_from :]
        ]
        updates += [
            MemoryUpdate(scope="scheduled", key=scheduled.schedule_id, value=scheduled)
            for scheduled in self._run.scheduled[self._scheduled_from :]
        ]
        return updates


def _snapshot(memory: Memory) -> dict[str, Any]:
    """``memory``'s content as a copy; an empty memory (most actions' sensory memory, and
    every memory of a stateless agent) without a deep copy: four per action otherwise."""
    return memory.snapshot() if len(memory) else {}


class ActionJournal(Protocol):
    """Records completed action invocations and hands them back on replay."""

    def recorded(self, invocation: ActionInvocation) -> RecordedAction | None:
        """What ``invocation`` did, if it completed before; None if it must run."""

    async def completed(self, invocation: ActionInvocation, action: RecordedAction) -> None:
        """``invocation`` returned normally having done ``action``."""

    async def settled(self, run: RunId) -> None:
        """Return once every call outcome recorded for ``run`` is durable: awaited before the
        run's result (outputs, memory) leaves the engine."""
