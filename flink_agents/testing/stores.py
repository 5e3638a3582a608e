"""Stores for tests: a live store and restorable successors over one log (memory or Kafka)."""

from __future__ import annotations

from collections.abc import Callable

from flink_agents.durable.store import ActionStateStore, InMemoryActionStateStore, InMemoryLog


class Stores:
    """Stores over one log: ``first`` for the live run, ``restored()`` for a new process's.

    ``make`` builds a store over the shared log (``InMemoryActionStateStore(log)``, or a
    ``StoreConfig(kind="kafka", ...).build``). ``marker`` is the checkpoint taken before any
    input arrived: every ``restored()`` store is rebuilt from it, as after a failover.
    """

    def __init__(self, make: Callable[[], ActionStateStore]) -> None:
        self._make = make
        self._built: list[ActionStateStore] = []
        self.first = self._new()
        self.marker = self.first.recovery_marker()

    @classmethod
    def in_memory(cls, partitions: int = 1) -> Stores:
        """Stores over a fresh :class:`InMemoryLog`."""
        log = InMemoryLog(partitions)
        return cls(lambda: InMemoryActionStateStore(log))

    def _new(self) -> ActionStateStore:
        store = self._make()
        self._built.append(store)
        return store

    def restored(self) -> ActionStateStore:
        """A new store restored from :attr:`marker` (what a restarted job would read)."""
        store = self._new()
        store.restore(self.marker)
        return store

    @property
    def latest(self) -> ActionStateStore:
        """The store built last."""
        return self._built[-1]

    def close(self) -> None:
        """Close every store built."""
        for store in self._built:
            store.close()
