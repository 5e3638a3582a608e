"""Which backend keeps each memory set, and one run's view of its key's memory across them.

A memory set declared with ``backend="vector_store"`` lives in a namespace per key of the vector
store it names (:class:`~flink_agents.api.long_term_memory.MemoryNamespace`: Chroma's is a
collection per set and key); every other set lives in the key's state
(:mod:`flink_agents.runtime.keyed_memory`). :class:`RunLongTermMemory` is the
:class:`~flink_agents.api.long_term_memory.KeyMemory` a run sees: it stages a keyed-state set's
writes (committed with the key's state when the run succeeds) and makes a vector-store set's
writes at once, under their deterministic ids. A replayed write is therefore an upsert of the
same item; what this means at each crash point is in docs/memory.md.

It also counts what memory did in the run (:class:`MemoryActivity`), for the metrics.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field

from flink_agents.api.embeddings import Vector
from flink_agents.api.long_term_memory import (
    MemoryHit,
    MemoryNamespace,
    MemoryNamespaces,
    MemoryWrite,
    StoredMemory,
    memory_backend,
)
from flink_agents.api.resources import ResourceType
from flink_agents.api.vector_stores import MetadataFilter
from flink_agents.plan.resolve import ResolvedPlan
from flink_agents.runtime.keyed_memory import CommittedMemory, KeyedStateMemory
from flink_agents.runtime.resource_registry import ResourceRegistry


def _on_vector_store(resolved: ResolvedPlan) -> dict[str, str]:
    """The memory sets ``resolved`` keeps on a vector store (their own backend, or the agent's
    default), each with the store's name."""
    stores: dict[str, str] = {}
    for name, declared in resolved.plan.resources.items():
        if declared.type is ResourceType.LONG_TERM_MEMORY:
            backend, store = memory_backend(declared.arguments, resolved.plan.config)
            if backend == "vector_store" and store is not None:
                stores[name] = store
    return stores


def _cannot_keep_memory(set_name: str, store: str, class_name: str) -> str:
    return (
        f"memory set {set_name!r}: vector store {store!r} ({class_name}) cannot keep long-term "
        "memory (it has no memory_namespace); use a Chroma store"
    )


class MemoryBackends:
    """The agent's memory sets on vector stores, and their stores (opened on first use)."""

    def __init__(
        self, resolved: ResolvedPlan, resources: ResourceRegistry, *, vector_stores: bool = True
    ) -> None:
        """``vector_stores`` False: every set is kept in the key's state, whatever its backend
        (the offline replayer's engine, which must not write to the job's stores)."""
        for scope, child in resolved.scopes.items():
            nested = _on_vector_store(child)
            if nested:
                raise ValueError(
                    f"memory sets {sorted(nested)} of sub-agent scope {scope!r} are on a vector "
                    "store: declare a vector-store memory set on the agent itself"
                )
        self._resources = resources
        self._store_names = _on_vector_store(resolved) if vector_stores else {}
        self.external = tuple(self._store_names)
        """The sets on a vector store (every other set is in the key's state)."""
        for set_name, store in self._store_names.items():  # refused when built, not at a write
            store_class = resolved.resource_classes.get(store)
            if store_class is not None and not hasattr(store_class, "memory_namespace"):
                raise TypeError(_cannot_keep_memory(set_name, store, store_class.__name__))
        self._stores: dict[str, MemoryNamespaces] = {}

    def store(self, set_name: str) -> MemoryNamespaces:
        """The vector store that keeps ``set_name`` (one of :attr:`external`)."""
        store = self._stores.get(set_name)
        if store is None:
            name = self._store_names[set_name]
            resource = self._resources.get(name, ResourceType.VECTOR_STORE)
            if not isinstance(resource, MemoryNamespaces):
                raise TypeError(_cannot_keep_memory(set_name, name, type(resource).__name__))
            store = self._stores[set_name] = resource
        return store

    def for_run(self, key: str, committed: CommittedMemory) -> RunLongTermMemory:
        """A run's view of the memory of ``key`` (its canonical JSON), from ``committed``."""
        return RunLongTermMemory(KeyedStateMemory(committed), self, key)


@dataclass
class MemoryActivity:
    """What a run did with long-term memory: live searches, items written and deleted, the
    bytes written (texts, metadata and vectors as JSON) and the sets written."""

    searches: int = 0
    writes: int = 0
    deletes: int = 0
    bytes_written: int = 0
    sets_written: set[str] = field(default_factory=set)
    compactions: list[Compacted] = field(default_factory=list)


@dataclass(frozen=True)
class Compacted:
    """One compaction of a key's memory set (runtime/compaction_runs.py): the set's items
    before and after it, and the tokens its model call spent (0 when none were reported)."""

    set_name: str
    items_before: int
    items_after: int
    tokens: int


class RunLongTermMemory:
    """One run's long-term memory: keyed-state sets staged over the committed ones, vector-store
    sets read and written in their namespaces for the key (a
    :class:`~flink_agents.api.long_term_memory.KeyMemory`). Without ``backends`` every set is
    in the key's state."""

    def __init__(
        self,
        keyed: KeyedStateMemory | None = None,
        backends: MemoryBackends | None = None,
        key: str = "",
    ) -> None:
        self._keyed = keyed or KeyedStateMemory()
        self._backends = backends
        self._external = frozenset(backends.external) if backends is not None else frozenset()
        self._key = key
        self._namespaces: dict[str, MemoryNamespace] = {}
        self._in_flight: list[Future[None]] = []  # vector-store writes not waited for yet
        self._writes: list[MemoryWrite] = []
        self.activity = MemoryActivity()

    @property
    def writes(self) -> list[MemoryWrite]:
        return self._writes

    def apply(self, write: MemoryWrite) -> None:
        self._writes.append(write)
        activity = self.activity
        if not write.set:  # delete_key: every set of the key
            self._keyed.apply(write)
            for name in sorted(self._external):
                self._in_flight.append(self._namespace(name).clear())
            activity.deletes += 1
            return
        activity.sets_written.add(write.set)
        if write.item is None:
            activity.deletes += 1
        else:
            activity.writes += 1
            activity.bytes_written += len(write.item.model_dump_json())
        if write.set not in self._external:
            self._keyed.apply(write)
        elif write.item is None:
            self._in_flight.append(self._namespace(write.set).delete(write.id))
        else:
            self._in_flight.append(self._namespace(write.set).upsert(write.id, write.item))

    async def written(self) -> None:
        """Wait for the writes to vector stores made since the last call (off the engine's
        thread, in order per key); a failed one raises here, as the error of the action that
        made it. Nothing to wait for (keyed-state sets only) costs a truth test."""
        if not self._in_flight:
            return
        in_flight, self._in_flight = self._in_flight, []
        failure: BaseException | None = None
        for write in in_flight:  # every one waited for: none goes on after the action
            try:
                await asyncio.wrap_future(write)
            except Exception as exc:
                failure = failure or exc
        if failure is not None:
            raise failure

    def get(self, set_name: str, item_id: str) -> StoredMemory | None:
        if set_name in self._external:
            return self._namespace(set_name).get(item_id)
        return self._keyed.get(set_name, item_id)

    def count(self, set_name: str) -> int:
        if set_name in self._external:
            return self._namespace(set_name).count()
        return self._keyed.count(set_name)

    def search(
        self, set_name: str, vector: Vector, k: int, where: MetadataFilter | None
    ) -> list[MemoryHit]:
        self.activity.searches += 1  # a replayed search is handed back, never made again
        if set_name in self._external:
            return self._namespace(set_name).search(vector, k, where)
        return self._keyed.search(set_name, vector, k, where)

    def committed_count(self, set_name: str) -> int:
        """How many items keyed-state set ``set_name`` held when the run started."""
        return self._keyed.committed_count(set_name)

    def listed(self, set_name: str) -> list[tuple[str, StoredMemory]]:
        """The items of keyed-state set ``set_name`` in the order they were first written."""
        return self._keyed.listed(set_name)

    def commit(self) -> CommittedMemory:
        """The key's keyed-state memory once the run's writes are applied (the vector-store
        sets were written at each call)."""
        return self._keyed.commit()

    def items_written(self) -> Mapping[str, int]:
        """How many items each set the run wrote holds for the key now."""
        return {name: self.count(name) for name in sorted(self.activity.sets_written)}

    def _namespace(self, set_name: str) -> MemoryNamespace:
        namespace = self._namespaces.get(set_name)
        if namespace is None:
            assert self._backends is not None  # only a set of `external` gets here
            namespace = self._backends.store(set_name).memory_namespace(set_name, self._key)
            self._namespaces[set_name] = namespace
        return namespace
