"""The keyed-state backend of long-term memory: a key's memory sets kept in its state.

A key's committed memory (:class:`CommittedMemory`: set -> item id -> item with its vector) is
saved with the key's :class:`~flink_agents.runtime.state.KeyState`, so it is checkpointed with
the key's runs, restored with them and moved with the key's key group on a rescale; there is no
service to run. It is never changed in place: a run sees it through :class:`KeyedStateMemory`,
which stages the run's writes over it, and the engine commits a successful run by building new
maps for the sets it wrote (a failed run's writes are dropped).

Search is exhaustive cosine similarity with numpy (installed with apache-flink), over a matrix
of unit vectors built once per committed set, on its first search: at the sizes one key holds
(thousands of items) it takes about a millisecond (bench/results/memory_search.md).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from flink_agents.api.embeddings import Vector
from flink_agents.api.long_term_memory import MemoryHit, MemoryWrite, StoredMemory
from flink_agents.api.vector_stores import MetadataFilter, matches_filter

MemorySets = dict[str, dict[str, StoredMemory]]
"""A key's long-term memory in the form its state saves: set -> item id -> item."""

_Matrix = npt.NDArray[np.float64]


class CommittedSet:
    """The committed items of one set of one key, and their unit vectors for search.

    A set committed over an earlier one that was searched (``base``, with the run's
    ``changes``) derives its vectors from the earlier ones: a run that only adds appends its
    rows (in place, in room left in the earlier version's buffer), instead of converting every
    vector again. Only a searched base is kept, and only until the vectors are derived, so no
    chain of older versions is held.
    """

    __slots__ = ("_base", "_changes", "_rows", "items")

    def __init__(
        self,
        items: dict[str, StoredMemory],
        base: CommittedSet | None = None,
        changes: Mapping[str, StoredMemory | None] | None = None,
    ) -> None:
        self.items = items
        searched = base is not None and base._rows is not None
        self._base = base if searched else None
        self._changes = changes if searched else None
        self._rows: _Rows | None = None

    def vectors(self) -> tuple[list[str], _Matrix]:
        """Item ids and a matrix of their unit vectors, row ``i`` the vector of ``ids[i]``
        (``ids`` may run on past the last row: read it by row). Built on first use, then kept:
        the items never change."""
        if self._rows is None:
            base, changes = self._base, self._changes
            if base is not None and changes is not None:
                self._rows = _derived(base, changes)
            else:
                ids = sorted(self.items)
                self._rows = _Rows.of(ids, _matrix_of([self.items[i] for i in ids]))
            self._base = self._changes = None
        return self._rows.ids, self._rows.matrix()

    def rows(self) -> _Rows:
        self.vectors()
        assert self._rows is not None
        return self._rows


class _Rows:
    """Unit vectors in a buffer with room to grow, which successive versions of a set share:
    each sees its first ``count`` rows (and ids), and only the newest appends in place."""

    __slots__ = ("buffer", "count", "extended", "ids")

    def __init__(self, buffer: _Matrix, ids: list[str], count: int) -> None:
        self.buffer = buffer
        self.ids = ids
        self.count = count
        self.extended = False  # a later version appended after our rows

    @classmethod
    def of(cls, ids: list[str], matrix: _Matrix) -> _Rows:
        buffer = np.empty((max(64, 2 * len(ids)), matrix.shape[1]), dtype=np.float64)
        buffer[: len(ids)] = matrix
        return cls(buffer, ids, len(ids))

    def matrix(self) -> _Matrix:
        return self.buffer[: self.count]

    def appended(self, ids: list[str], matrix: _Matrix) -> _Rows:
        """These rows and ``matrix``'s after them (for ``ids``)."""
        end = self.count + len(ids)
        if self.extended or end > len(self.buffer) or matrix.shape[1] != self.buffer.shape[1]:
            return _Rows.of(self.ids[: self.count] + ids, np.vstack([self.matrix(), matrix]))
        self.buffer[self.count : end] = matrix
        self.ids.extend(ids)  # past our count: not read through this version
        self.extended = True
        return _Rows(self.buffer, self.ids, end)


class CommittedMemory:
    """A key's long-term memory as its last successful run committed it."""

    __slots__ = ("sets",)

    def __init__(self, sets: Mapping[str, CommittedSet] | None = None) -> None:
        self.sets: Mapping[str, CommittedSet] = sets or {}

    @classmethod
    def from_state(cls, state: MemorySets) -> CommittedMemory:
        """The memory a key state saved (its maps are copied: a host may reuse them)."""
        return cls({name: CommittedSet(dict(items)) for name, items in state.items() if items})

    def to_state(self) -> MemorySets:
        """The form a key state saves: the committed maps themselves (never changed)."""
        return {name: committed.items for name, committed in self.sets.items()}


EMPTY = CommittedMemory()


class KeyedStateMemory:
    """One run's view of its key's long-term memory: the committed sets with the run's writes
    staged over them (a :class:`~flink_agents.api.long_term_memory.KeyMemory`)."""

    def __init__(self, committed: CommittedMemory = EMPTY) -> None:
        self._committed = committed
        self._writes: list[MemoryWrite] = []
        self._cleared = False  # delete_key: the committed sets no longer count
        self._staged: dict[str, dict[str, StoredMemory | None]] = {}  # None: deleted

    @property
    def writes(self) -> list[MemoryWrite]:
        return self._writes

    def apply(self, write: MemoryWrite) -> None:
        self._writes.append(write)
        if not write.set:
            self._cleared = True
            self._staged = {}
            return
        self._staged.setdefault(write.set, {})[write.id] = write.item

    def get(self, set_name: str, item_id: str) -> StoredMemory | None:
        staged = self._staged.get(set_name, {})
        if item_id in staged:
            return staged[item_id]
        committed = self._committed_set(set_name)
        return None if committed is None else committed.items.get(item_id)

    def count(self, set_name: str) -> int:
        committed = self._committed_set(set_name)
        items = {} if committed is None else committed.items
        count = len(items)
        for item_id, item in self._staged.get(set_name, {}).items():
            count += (item is not None) - (item_id in items)
        return count

    def committed_count(self, set_name: str) -> int:
        """How many items ``set_name`` held when the run started (its writes not counted)."""
        committed = self._committed.sets.get(set_name)
        return 0 if committed is None else len(committed.items)

    def listed(self, set_name: str) -> list[tuple[str, StoredMemory]]:
        """The items of ``set_name`` in the order they were first written (an item replaced
        keeps its place), the run's writes included."""
        committed = self._committed_set(set_name)
        return list(_applied(committed, self._staged.get(set_name, {})).items())

    def search(
        self, set_name: str, vector: Vector, k: int, where: MetadataFilter | None
    ) -> list[MemoryHit]:
        query = np.asarray(vector, dtype=np.float64)
        norm = float(np.linalg.norm(query))
        if norm:
            query = query / norm
        staged = self._staged.get(set_name, {})
        hits: list[MemoryHit] = []
        committed = self._committed_set(set_name)
        if committed is not None and committed.items:
            ids, matrix = committed.vectors()
            scores = matrix @ query
            for index in _best_first(scores, None if where else k + len(staged)):
                item_id = ids[index]
                if item_id in staged:
                    continue  # replaced or deleted by this run: scored below, or gone
                item = committed.items[item_id]
                if matches_filter(item.metadata, where):
                    hits.append(_hit(item_id, item, float(scores[index])))
                    if len(hits) == k:
                        break
        for item_id, maybe in staged.items():
            if maybe is not None and matches_filter(maybe.metadata, where):
                hits.append(_hit(item_id, maybe, float(_matrix_of([maybe])[0] @ query)))
        hits.sort(key=lambda hit: (-hit.score, hit.id))
        return hits[:k]

    def commit(self) -> CommittedMemory:
        """The key's memory once this run's writes are applied (new maps for the sets written;
        the others are shared with the memory the run started from)."""
        if not self._writes:
            return self._committed
        sets = dict(self._committed.sets) if not self._cleared else {}
        for name, staged in self._staged.items():
            base = sets.get(name)
            items = _applied(base, staged)
            if items:
                sets[name] = CommittedSet(items, base, staged)
            else:
                sets.pop(name, None)
        return CommittedMemory(sets)

    def _committed_set(self, set_name: str) -> CommittedSet | None:
        return None if self._cleared else self._committed.sets.get(set_name)


def _applied(
    base: CommittedSet | None, staged: Mapping[str, StoredMemory | None]
) -> dict[str, StoredMemory]:
    """A new map of ``base``'s items with ``staged`` applied (None: deleted): a replaced item
    keeps its place, a new one comes last."""
    items = dict(base.items) if base is not None else {}
    for item_id, item in staged.items():
        if item is None:
            items.pop(item_id, None)
        else:
            items[item_id] = item
    return items


def _best_first(scores: _Matrix, enough: int | None) -> list[int]:
    """Row indices by descending score (equal scores in row order); only the ``enough`` best
    when that many are all a search can use (no filter)."""
    if enough is not None and enough < len(scores):
        best = np.argpartition(-scores, enough - 1)[:enough]
        return sorted(best.tolist(), key=lambda index: (-scores[index], index))
    return list(np.argsort(-scores, kind="stable").tolist())


def _derived(base_set: CommittedSet, changes: Mapping[str, StoredMemory | None]) -> _Rows:
    """The rows of ``base_set`` with ``changes`` applied: the rows of the items kept, then one
    row per item written (appended in place when nothing of the base was replaced or
    deleted)."""
    base = base_set.rows()
    written = [(item_id, item) for item_id, item in changes.items() if item is not None]
    new_ids = [item_id for item_id, _ in written]
    new_rows = _matrix_of([item for _, item in written])
    if not any(item_id in base_set.items for item_id in changes):
        return base.appended(new_ids, new_rows) if written else base
    base_ids = base.ids[: base.count]
    kept = [row for row, item_id in enumerate(base_ids) if item_id not in changes]
    ids = [base_ids[row] for row in kept] + new_ids
    matrix = base.matrix()[kept]
    return _Rows.of(ids, np.vstack([matrix, new_rows]) if written else matrix)


def _matrix_of(items: list[StoredMemory]) -> _Matrix:
    """The unit vectors of ``items``, one row each."""
    matrix = np.array([item.embedding for item in items], dtype=np.float64)
    return _unit_rows(matrix) if items else matrix


def _unit_rows(matrix: _Matrix) -> _Matrix:
    """``matrix`` with each row scaled to length 1 (an all-zero row stays zero)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0.0, 1.0, norms)


def _hit(item_id: str, item: StoredMemory, score: float) -> MemoryHit:
    return MemoryHit(id=item_id, text=item.text, metadata=dict(item.metadata), score=score)
