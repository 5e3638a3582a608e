"""Long-term memory: named memory sets per key, written and searched by an action (docs/memory.md).

A memory set is declared as a resource (``ResourceType.LONG_TERM_MEMORY``, a
:class:`LongTermMemorySetup` naming an embedding model); an action reaches the sets of its run's
key through ``ctx.long_term_memory``::

    facts = ctx.long_term_memory["facts"]
    await facts.add("prefers e-mail over phone", metadata={"topic": "contact"})
    hits = await facts.search("how to contact the customer?", k=3)

What makes it safe to replay:

* an item's id is derived from the run's durable identity (run, event, action, set and the
  ordinal of the write within the action), so a write made again by a replayed action replaces
  the item it wrote the first time, never adds a second one;
* each text is embedded by a durable call (its vector is recorded) and each search is a durable
  call whose hits are recorded, so a replay hands the model the context the live run saw even
  if the set has grown since;
* ``remember`` (a set with :class:`~flink_agents.api.fact_extraction.MemoryExtraction`
  settings) asks a model for the facts a text states in one durable call, whose recorded reply
  makes the writes after it deterministic: a replay writes the same facts under the same ids;
* on the keyed-state backend, writes are staged in the run and committed with the key's state
  when the run succeeds (a failed run's writes are dropped, like short-term memory); on a vector
  store they are made at the call. Either way an action's writes are journaled with its
  completion, so an action that is not run again on replay still writes them.

The store behind the sets is a :class:`KeyMemory` (the backend interface); the engine provides
the keyed-state one (``flink_agents.runtime.keyed_memory``) and routes a set declared with
``backend="vector_store"`` to a :class:`MemoryNamespace` of the vector store it names (Chroma:
a collection per set and key), written at the call rather than with the key's state.
"""

from __future__ import annotations

import base64
import functools
import json
import struct
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Future
from typing import Any, ClassVar, Literal, Protocol, TypeVar, cast, runtime_checkable

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_serializer,
    field_validator,
    model_validator,
)

from flink_agents.api.chat import ChatMessage, TokenUsage
from flink_agents.api.embeddings import EmbeddingModelSetup, Vector
from flink_agents.api.fact_extraction import (
    ExtractionModel,
    MemoryExtraction,
    extraction_request,
    facts_of,
)
from flink_agents.api.memory_compaction import MemoryCompaction
from flink_agents.api.resources import Resource, ResourceType
from flink_agents.api.vector_stores import MetadataFilter, MetadataValue, filter_conditions

T = TypeVar("T")

MemoryBackendName = Literal["keyed_state", "vector_store"]
MEMORY_BACKENDS: tuple[MemoryBackendName, ...] = ("keyed_state", "vector_store")
"""The long-term memory backends (docs/memory.md)."""

LONG_TERM_MEMORY_BACKEND_KEY = "long_term_memory_backend"
"""Agent config key: the backend of the agent's memory sets that name none (``keyed_state``,
the default, or ``vector_store``)."""

LONG_TERM_MEMORY_STORE_KEY = "long_term_memory_vector_store"
"""Agent config key: the vector_store resource of the agent's memory sets on backend
``vector_store`` that name none."""

MEMORY_CALL_PREFIX = "memory:"
"""The call ids of memory's durable calls (and of its item ids) start with this."""


class MemorySetFullError(ValueError):
    """A write would take a memory set of one key past its ``max_items``."""


class LongTermMemorySetup(Resource):
    """One named memory set: what an action asks ``ctx.long_term_memory[name]`` for."""

    resource_type: ClassVar[ResourceType] = ResourceType.LONG_TERM_MEMORY

    embedding_model: str = Field(description="Name of an embedding_model resource.")
    backend: MemoryBackendName | None = Field(
        default=None,
        description="Where items live: 'keyed_state' keeps them (with their vectors) in the "
        "key's Flink state, checkpointed with the run and rescaled with the key groups; "
        "'vector_store' in a namespace per key of the vector store named by 'vector_store' "
        "(Chroma), written when the action writes. Unset: the agent's default "
        f"(config {LONG_TERM_MEMORY_BACKEND_KEY!r}), else 'keyed_state'.",
    )
    vector_store: str | None = Field(
        default=None,
        description="Name of a vector_store resource that keeps a namespace per key "
        "(backend 'vector_store' only; unset: the agent's default, config "
        f"{LONG_TERM_MEMORY_STORE_KEY!r}).",
    )
    max_items: int | None = Field(
        default=None, ge=1, description="Items one key may hold in this set; a write past it fails."
    )
    extraction: MemoryExtraction | None = Field(
        default=None,
        description="The chat model (and instructions) with which `remember` extracts facts "
        "from a text; unset, the set has no `remember`.",
    )

    compaction: MemoryCompaction | None = Field(
        default=None,
        description="Compact a key's items into fewer facts (a model call) once a run leaves "
        "more than compaction.max_items of them (keyed_state backend only).",
    )

    @model_validator(mode="after")
    def _store_with_its_backend(self) -> LongTermMemorySetup:
        if self.backend == "keyed_state" and self.vector_store is not None:
            raise ValueError("'vector_store' is for backend 'vector_store', not 'keyed_state'")
        return self


class MemoryBackendError(ValueError):
    """A memory set's backend, or the agent's default one, is unknown or misses its store."""


def memory_backend(
    arguments: Mapping[str, Any], config: Mapping[str, Any]
) -> tuple[MemoryBackendName, str | None]:
    """The backend and vector store of a memory set declared with ``arguments`` in an agent
    whose config is ``config``: the set's own, else the agent's default, else ``keyed_state``.
    :class:`MemoryBackendError` for an unknown backend or a vector-store set with no store."""
    backend = arguments.get("backend") or config.get(LONG_TERM_MEMORY_BACKEND_KEY) or "keyed_state"
    if backend not in MEMORY_BACKENDS:
        source = (
            "its backend" if arguments.get("backend") else f"config {LONG_TERM_MEMORY_BACKEND_KEY}"
        )
        raise MemoryBackendError(
            f"unknown long-term memory backend {backend!r} ({source}): choose one of "
            f"{', '.join(MEMORY_BACKENDS)}"
        )
    if backend == "keyed_state":
        return "keyed_state", None
    store = arguments.get("vector_store") or config.get(LONG_TERM_MEMORY_STORE_KEY)
    if not store:
        raise MemoryBackendError(
            "backend 'vector_store' needs a vector_store resource: the set's 'vector_store', "
            f"or the agent's config {LONG_TERM_MEMORY_STORE_KEY!r}"
        )
    return "vector_store", str(store)


class MemoryItem(BaseModel):
    """One item of a memory set, as an action reads it."""

    model_config = ConfigDict(extra="forbid")

    id: str
    text: str
    metadata: dict[str, MetadataValue] = Field(default_factory=dict)


class MemoryHit(MemoryItem):
    """One result of a search, nearest first."""

    score: float = Field(description="Cosine similarity to the query.")


class StoredMemory(BaseModel):
    """An item as a backend keeps it: its text, metadata and vector (never changed in place).

    In JSON (a key's saved state, an action's journal) the vector is packed: its float64s,
    little-endian, in base64, about half the bytes of the numbers written out and much faster
    to write; read back, it is the same list of floats, bit for bit.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str
    metadata: dict[str, MetadataValue] = Field(default_factory=dict)
    embedding: Vector

    @field_serializer("embedding", when_used="json")
    def _packed(self, embedding: Vector) -> str:
        return base64.b64encode(struct.pack(f"<{len(embedding)}d", *embedding)).decode("ascii")

    @field_validator("embedding", mode="before")
    @classmethod
    def _unpacked(cls, value: Any) -> Any:
        if isinstance(value, str):
            packed = base64.b64decode(value, validate=True)
            if len(packed) % 8:
                raise ValueError("a packed vector holds whole float64s (8 bytes each)")
            return list(struct.unpack(f"<{len(packed) // 8}d", packed))
        return value


class MemoryWrite(BaseModel):
    """One write to a key's long-term memory, as it is staged, journaled and committed.

    ``item`` set: insert or replace item ``id`` of ``set``; ``item`` None: delete it; ``set``
    empty: delete every item of every set of the key (:meth:`LongTermMemory.delete_key`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    set: str = ""
    id: str = ""
    item: StoredMemory | None = None


class KeyMemory(Protocol):
    """The long-term memory of one key as one run sees it: the backend interface.

    Reads see the committed items and the run's own writes; :meth:`apply` makes a write. The
    keyed-state backend stages it and commits the run's :attr:`writes` with the key's state
    when the run succeeds; a set on a vector store (:class:`MemoryNamespace`) is written at
    once, under the write's deterministic id (so a replayed write replaces, never adds).
    """

    @property
    def writes(self) -> list[MemoryWrite]:
        """The run's writes so far, in order (the action journal records each action's)."""
        ...

    def apply(self, write: MemoryWrite) -> None:
        """Stage ``write``."""

    def get(self, set_name: str, item_id: str) -> StoredMemory | None:
        """Item ``item_id`` of ``set_name``, or None."""

    def count(self, set_name: str) -> int:
        """How many items ``set_name`` holds."""

    def search(
        self, set_name: str, vector: Vector, k: int, where: MetadataFilter | None
    ) -> list[MemoryHit]:
        """The ``k`` items of ``set_name`` nearest to ``vector`` among those matching ``where``,
        nearest first (ties by id)."""


class MemoryNamespace(Protocol):
    """The items of one memory set of one key in an external store (a vector store's
    namespace for the key), read back by the key's later runs.

    A write is started at the call and made off the engine's thread, after the namespace's
    earlier writes (its order kept); it returns the write's future, which the run waits for
    before the action that made it completes (a failure is that action's). A read waits for
    the namespace's writes in flight first, so a run reads its own writes."""

    def get(self, item_id: str) -> StoredMemory | None:
        """Item ``item_id``, or None."""

    def count(self) -> int:
        """How many items the namespace holds."""

    def search(self, vector: Vector, k: int, where: MetadataFilter | None) -> list[MemoryHit]:
        """The ``k`` items nearest to ``vector`` (cosine) among those matching ``where``,
        nearest first (ties by id)."""

    def upsert(self, item_id: str, item: StoredMemory) -> Future[None]:
        """Store ``item`` under ``item_id``, replacing an item with that id."""

    def delete(self, item_id: str) -> Future[None]:
        """Delete item ``item_id`` (nothing if there is none)."""

    def clear(self) -> Future[None]:
        """Delete every item of the namespace."""


@runtime_checkable
class MemoryNamespaces(Protocol):
    """A vector store that can keep long-term memory: a namespace per memory set and key."""

    def memory_namespace(self, set_name: str, key: str) -> MemoryNamespace:
        """The namespace of ``set_name``'s items for ``key`` (the key's canonical JSON, so
        ``1`` and ``"1"`` are two keys)."""
        ...


class MemoryHits(list[MemoryHit]):
    """A search's hits, with what embedding its query spent (``usage``: None when the
    embedding connection reported none): budgets count it with the search's call, as they
    count an :class:`~flink_agents.api.embeddings.Embeddings`' (docs/budgets.md). A replay hands
    back the recorded hits as a plain list and counts the spend recorded with the call."""

    def __init__(self, hits: list[MemoryHit], *, usage: TokenUsage | None = None) -> None:
        super().__init__(hits)
        self.usage = usage


async def search_memory_set(
    memory: KeyMemory,
    setup: LongTermMemorySetup,
    embedding: EmbeddingModelSetup,
    set_name: str,
    query: str,
    k: int,
    where: MetadataFilter | None,
) -> MemoryHits:
    """One search: embed ``query`` and ask the backend. The durable call of a search (see
    :meth:`MemorySet.search`): bound to ``memory`` by a partial, so its signature covers the
    set's setup, the embedding model, the query, ``k`` and the filter, never the items (a replay
    hands the recorded hits back however the set has changed). The query's embedding is made
    inside it, so its usage comes back with the hits, metered as the search's."""
    vectors = await embedding.embed_batch([query])
    (vector,) = vectors
    return MemoryHits(memory.search(set_name, vector, k, where), usage=vectors.usage)


class MemorySet:
    """One memory set of the run's key (``ctx.long_term_memory[name]``)."""

    def __init__(
        self,
        owner: LongTermMemory,
        name: str,
        setup: LongTermMemorySetup,
    ) -> None:
        self._owner = owner
        self.name = name
        self.setup = setup

    async def add(self, text: str, metadata: Mapping[str, MetadataValue] | None = None) -> str:
        """Store ``text`` as a new item; returns its id, derived from the run's durable
        identity (a replayed action writes the same id again)."""
        ctx = self._owner.ctx
        ordinal = self._owner.next_ordinal(self.name, "add")
        item_id = ctx.durable_call_key(f"{MEMORY_CALL_PREFIX}{self.name}:add:{ordinal}")
        return await self.upsert(item_id, text, metadata)

    async def upsert(
        self, id: str, text: str, metadata: Mapping[str, MetadataValue] | None = None
    ) -> str:
        """Store ``text`` under ``id``, replacing an item with that id; returns ``id``."""
        if not id:
            raise ValueError("a memory item needs a non-empty id")
        memory = self._owner.memory
        max_items = self.setup.max_items
        if (  # the lookups only when bounded: each is a request on a vector-store backend
            max_items is not None
            and memory.get(self.name, id) is None
            and memory.count(self.name) >= max_items
        ):
            raise MemorySetFullError(
                f"memory set {self.name!r} holds {max_items} items for this key "
                "(max_items); delete some before adding more"
            )
        embedding = self._owner.embedding(self.setup)
        ordinal = self._owner.next_ordinal(self.name, "embed")
        (vector,) = await self._owner.ctx.durable_execute_async(
            type(embedding).embed_batch,
            embedding,
            [text],
            call_id=f"{MEMORY_CALL_PREFIX}{self.name}:embed:{ordinal}",
        )
        stored = StoredMemory(text=text, metadata=dict(metadata or {}), embedding=vector)
        memory.apply(MemoryWrite(set=self.name, id=id, item=stored))
        return id

    async def remember(
        self, text: str, metadata: Mapping[str, MetadataValue] | None = None
    ) -> list[str]:
        """Ask the set's extraction model for the facts ``text`` states and store each as an
        item (with ``metadata``); returns their ids.

        One durable model call (``memory:<set>:extract:<n>``) whose reply, a JSON list of
        strings, is recorded: a replay is handed the same facts and writes them under the same
        ids (derived from the run's durable identity and each fact's position), so it neither
        asks the model again nor adds an item twice. A reply that is not such a list raises
        :class:`~flink_agents.api.fact_extraction.MemoryExtractionError` naming the run's key
        and the call.
        """
        extraction = self.setup.extraction
        if extraction is None:
            raise ValueError(
                f"memory set {self.name!r} has no extraction settings: give it `extraction` "
                "(the chat model that extracts facts) to use remember()"
            )
        owner = self._owner
        ctx = owner.ctx
        ordinal = owner.next_ordinal(self.name, "extract")
        call_id = f"{MEMORY_CALL_PREFIX}{self.name}:extract:{ordinal}"
        model = cast(
            ExtractionModel, ctx.get_resource(extraction.chat_model, ResourceType.CHAT_MODEL)
        )
        request = extraction_request(model, extraction, text)
        # A call of the connection's ``chat``: budgets meter it like any model call.
        reply = await ctx.durable_execute_async(
            model.chat_connection().chat, request, call_id=call_id, result_type=ChatMessage
        )
        where = f"the run of key {json.dumps(ctx.key, default=str)}, call {call_id}"
        ids: list[str] = []
        for index, fact in enumerate(facts_of(reply.content, where)):
            item_id = ctx.durable_call_key(
                f"{MEMORY_CALL_PREFIX}{self.name}:fact:{ordinal}:{index}"
            )
            ids.append(await self.upsert(item_id, fact, metadata))
        return ids

    def get(self, id: str) -> MemoryItem | None:
        """Item ``id``, or None."""
        stored = self._owner.memory.get(self.name, id)
        if stored is None:
            return None
        return MemoryItem(id=id, text=stored.text, metadata=dict(stored.metadata))

    def delete(self, id: str) -> bool:
        """Delete item ``id``; returns whether there was one."""
        memory = self._owner.memory
        if memory.get(self.name, id) is None:
            return False
        memory.apply(MemoryWrite(set=self.name, id=id))
        return True

    def __len__(self) -> int:
        return self._owner.memory.count(self.name)

    async def search(
        self, query: str, k: int = 4, filter: MetadataFilter | None = None
    ) -> list[MemoryHit]:
        """The ``k`` items nearest to ``query`` (cosine), among those whose metadata matches
        ``filter`` (the vector stores' filter language). One durable call: its hits are
        recorded and handed back on replay."""
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        filter_conditions(filter or {})  # a bad filter is the action's error, not a call's
        owner = self._owner
        ordinal = owner.next_ordinal(self.name, "search")
        return await owner.ctx.durable_execute_async(
            functools.partial(search_memory_set, owner.memory),
            self.setup,
            owner.embedding(self.setup),
            self.name,
            query,
            k,
            dict(filter) if filter is not None else None,
            call_id=f"{MEMORY_CALL_PREFIX}{self.name}:search:{ordinal}",
            result_type=list[MemoryHit],
        )


class MemoryContext(Protocol):
    """What long-term memory uses of the action's context (a ``RunnerContext`` fits)."""

    @property
    def key(self) -> Any: ...

    def get_resource(self, name: str, resource_type: ResourceType) -> Resource: ...

    def durable_call_key(self, call_id: str) -> str: ...

    async def durable_execute_async(
        self,
        fn: Callable[..., Awaitable[T]],
        *args: Any,
        call_id: str | None = None,
        result_type: type | None = None,
        **kwargs: Any,
    ) -> T: ...


class LongTermMemory:
    """The memory sets of the run's key, as one action invocation uses them."""

    def __init__(self, ctx: MemoryContext, memory: KeyMemory) -> None:
        self.ctx = ctx
        self.memory = memory
        self._ordinals: Counter[tuple[str, str]] = Counter()

    def __getitem__(self, name: str) -> MemorySet:
        setup = cast(
            LongTermMemorySetup, self.ctx.get_resource(name, ResourceType.LONG_TERM_MEMORY)
        )
        return MemorySet(self, name, setup)

    def delete_key(self) -> None:
        """Delete every item of every set of this key (committed with the run)."""
        self.memory.apply(MemoryWrite())

    def embedding(self, setup: LongTermMemorySetup) -> EmbeddingModelSetup:
        """The embedding model ``setup`` names."""
        return cast(
            EmbeddingModelSetup,
            self.ctx.get_resource(setup.embedding_model, ResourceType.EMBEDDING_MODEL),
        )

    def next_ordinal(self, set_name: str, what: str) -> int:
        """The ordinal of the next ``what`` (add, embed, search) on ``set_name`` in this
        invocation: part of its call id, the same on every replay of the invocation."""
        key = (set_name, what)
        ordinal = self._ordinals[key]
        self._ordinals[key] = ordinal + 1
        return ordinal
