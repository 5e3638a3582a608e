"""What an action changed in its run's short-term memory, as :class:`MemoryChangedEvent`s.

A diff of the entries before and after the action (like the journal's memory watch, so a value
mutated in place counts too), made only for an agent with a listener to the events.
"""

from __future__ import annotations

from flink_agents.api.memory import Memory, MemoryChangedEvent


class MemoryChanges:
    """Snapshots ``memory`` now; :meth:`events` tells the entries changed since."""

    def __init__(self, memory: Memory) -> None:
        self._memory = memory
        self._before = memory.snapshot()

    def events(self) -> list[MemoryChangedEvent]:
        """One event per entry set to another value or deleted, in entry order (those deleted
        first, then the others in the memory's order)."""
        after = self._memory.snapshot()
        changed = [
            MemoryChangedEvent(key=key, previous=value, deleted=True)
            for key, value in self._before.items()
            if key not in after
        ]
        changed += [
            MemoryChangedEvent(key=key, value=value, previous=self._before.get(key))
            for key, value in after.items()
            if key not in self._before or self._before[key] != value
        ]
        return changed
