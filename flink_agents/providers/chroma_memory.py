"""Long-term memory on Chroma: a collection per memory set and key (docs/memory.md).

A :class:`~flink_agents.providers.chroma.ChromaVectorStore` declared as a memory set's
``vector_store`` keeps each key's items of the set in a collection of their own, named from the
store's ``collection`` and a digest of the set's name and the key's canonical JSON (so ``1`` and
``"1"`` are two namespaces, and any key fits Chroma's naming rules); the collection's metadata
says which set and key it holds. Deleting a key's memory drops its collections.

Writes (``upsert``, ``delete``, ``clear``) are made off the engine's thread, so the other
keys' runs go on while Chroma answers: each namespace's writes are made on a pool of writer threads
(:class:`OrderedWriters`), one after the other in the order they were made, and each returns
its future; the run waits for them before an action completes, and a failed
write is that action's error (``runtime/memory_backends.py``). Reads (``get``, ``count``,
``search``) are synchronous, on the engine's thread (``get``, ``len`` and ``delete`` are plain
calls of an action), after the namespace's writes in flight: a run reads its own writes. A
collection's handle is kept for the key's next runs (up to :data:`KEPT_HANDLES`); a handle whose
collection was dropped meanwhile (by the key's new owner after a rescale) is fetched again.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from chromadb.errors import NotFoundError

from flink_agents.api.embeddings import Vector
from flink_agents.api.long_term_memory import MemoryHit, StoredMemory
from flink_agents.api.vector_stores import MetadataFilter

T = TypeVar("T")

KEPT_HANDLES = 1024
"""Collection handles kept per store (the keys seen most recently)."""

WRITER_THREADS = 8
"""Threads per store that make long-term memory's writes."""


class OrderedWriters:
    """A pool of threads for writes; the work submitted under one name runs after the work
    submitted before under that name (so a key's writes to its collection are made in the order
    of its run), while other names' work runs beside it: a slow write holds up its own
    collection's next writes only."""

    def __init__(self, threads: int = WRITER_THREADS) -> None:
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="chroma-memory")
        self._last: dict[str, Future[None]] = {}  # per name, its latest work not yet done
        self._lock = threading.Lock()

    def submit(self, name: str, work: Callable[[], None]) -> Future[None]:
        """Run ``work`` once the work submitted before under ``name`` is done."""
        future: Future[None] = Future()

        def run() -> None:
            if future.set_running_or_notify_cancel():
                try:
                    work()
                except BaseException as exc:  # the caller's to see, through the future
                    future.set_exception(exc)
                else:
                    future.set_result(None)
            with self._lock:
                if self._last.get(name) is future:
                    del self._last[name]

        with self._lock:
            previous = self._last.get(name)
            self._last[name] = future
        if previous is None:
            self._pool.submit(run)
        else:  # at once if it is done already
            previous.add_done_callback(lambda _: self._pool.submit(run))
        return future

    def close(self) -> None:
        """Wait for the work submitted, then stop the threads."""
        with self._lock:
            pending = list(self._last.values())
        for future in pending:
            with contextlib.suppress(BaseException):
                future.result()
        self._pool.shutdown(wait=True)


def namespace_collection(prefix: str, set_name: str, key: str) -> str:
    """The collection of ``set_name``'s items for ``key``: ``<prefix>-<digest>``."""
    digest = hashlib.sha256(f"{set_name}\0{key}".encode()).hexdigest()[:32]
    return f"{prefix}-{digest}"


class ChromaCollections:
    """The collections of one Chroma client that hold memory namespaces, by name."""

    def __init__(self, client: Callable[[], Any]) -> None:
        self._client = client
        self._handles: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()  # the handles are kept from the writers' threads too
        self.writers = OrderedWriters()
        """Where the namespaces' writes are made."""

    def existing(self, name: str) -> Any | None:
        """The collection ``name``, or None if there is none (a read never creates one)."""
        handle = self._kept_handle(name)
        if handle is not None:
            return handle
        try:
            handle = self._client().get_collection(name, embedding_function=None)
        except NotFoundError:
            return None
        return self._kept(name, handle)

    def created(self, name: str, metadata: dict[str, str]) -> Any:
        """The collection ``name``, created (cosine space) if there is none."""
        handle = self._kept_handle(name)
        if handle is not None:
            return handle
        handle = self._client().get_or_create_collection(
            name,
            embedding_function=None,
            configuration={"hnsw": {"space": "cosine"}},
            metadata=metadata,
        )
        return self._kept(name, handle)

    def dropped(self, name: str) -> None:
        """Delete the collection ``name`` if there is one."""
        self.forget(name)
        with contextlib.suppress(NotFoundError):
            self._client().delete_collection(name)

    def forget(self, name: str) -> None:
        """Drop the kept handle of ``name`` (its collection was deleted elsewhere)."""
        with self._lock:
            self._handles.pop(name, None)

    def _kept_handle(self, name: str) -> Any | None:
        with self._lock:
            handle = self._handles.get(name)
            if handle is not None:
                self._handles.move_to_end(name)
            return handle

    def _kept(self, name: str, handle: Any) -> Any:
        with self._lock:
            self._handles[name] = handle
            if len(self._handles) > KEPT_HANDLES:
                self._handles.popitem(last=False)
        return handle


class ChromaMemoryNamespace:
    """One memory set's items for one key: a Chroma collection (a
    :class:`~flink_agents.api.long_term_memory.MemoryNamespace`). Vectors are kept as Chroma
    keeps them (float32): an item read back has its vector at that precision."""

    def __init__(
        self,
        collections: ChromaCollections,
        prefix: str,
        set_name: str,
        key: str,
        where: Callable[[MetadataFilter | None], dict[str, Any] | None],
    ) -> None:
        self._collections = collections
        self._name = namespace_collection(prefix, set_name, key)
        self._metadata = {"memory_set": set_name, "key": key}
        self._where = where
        self._last_write: Future[None] | None = None

    @property
    def collection(self) -> str:
        """The name of the namespace's collection."""
        return self._name

    def get(self, item_id: str) -> StoredMemory | None:
        found = self._read(
            lambda c: c.get(ids=[item_id], include=["documents", "metadatas", "embeddings"])
        )
        if found is None or not found["ids"]:
            return None
        return StoredMemory(
            text=found["documents"][0] or "",
            metadata=dict(found["metadatas"][0] or {}),
            embedding=[float(x) for x in found["embeddings"][0]],
        )

    def count(self) -> int:
        counted = self._read(lambda c: c.count())
        return 0 if counted is None else int(counted)

    def search(self, vector: Vector, k: int, where: MetadataFilter | None) -> list[MemoryHit]:
        result = self._read(
            lambda c: c.query(
                query_embeddings=[vector],
                n_results=k,
                where=self._where(where),
                include=["documents", "metadatas", "distances"],
            )
        )
        if result is None:
            return []
        hits = [
            MemoryHit(id=item_id, text=text or "", metadata=dict(meta or {}), score=1 - distance)
            for item_id, text, meta, distance in zip(
                result["ids"][0],
                result["documents"][0],
                result["metadatas"][0],
                result["distances"][0],
                strict=True,
            )
        ]
        hits.sort(key=lambda hit: (-hit.score, hit.id))
        return hits

    def upsert(self, item_id: str, item: StoredMemory) -> Future[None]:
        return self._submit(
            lambda: self._write(
                lambda c: c.upsert(
                    ids=[item_id],
                    embeddings=[item.embedding],
                    documents=[item.text],
                    metadatas=[item.metadata or None],
                )
            )
        )

    def delete(self, item_id: str) -> Future[None]:
        def delete() -> None:
            if self._collections.existing(self._name) is not None:
                self._write(lambda c: c.delete(ids=[item_id]))

        return self._submit(delete)

    def clear(self) -> Future[None]:
        return self._submit(lambda: self._collections.dropped(self._name))

    def _submit(self, work: Callable[[], None]) -> Future[None]:
        self._last_write = future = self._collections.writers.submit(self._name, work)
        return future

    def _written(self) -> None:
        """Wait for the writes in flight (a read sees them); a failed one raises here too."""
        if self._last_write is not None:
            self._last_write.result()
            self._last_write = None

    def _read(self, call: Callable[[Any], T]) -> T | None:
        """``call`` on the collection; None when there is no collection (nothing written)."""
        self._written()
        for _ in range(2):
            handle = self._collections.existing(self._name)
            if handle is None:
                return None
            try:
                return call(handle)
            except NotFoundError:  # dropped since its handle was kept: ask again
                self._collections.forget(self._name)
        return None

    def _write(self, call: Callable[[Any], object]) -> None:
        try:
            call(self._collections.created(self._name, self._metadata))
        except NotFoundError:  # dropped since its handle was kept: create it again
            self._collections.forget(self._name)
            call(self._collections.created(self._name, self._metadata))
