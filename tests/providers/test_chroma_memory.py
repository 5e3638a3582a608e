"""A Chroma store's memory namespaces (embedded Chroma, a folder per test): one collection per
memory set and key, read, searched, written and dropped; a handle whose collection was dropped
elsewhere (by the key's new owner after a rescale) is fetched again."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from flink_agents.api.long_term_memory import StoredMemory

pytest.importorskip("chromadb")

from flink_agents.providers.chroma import ChromaVectorStore
from flink_agents.providers.chroma_memory import OrderedWriters, namespace_collection


def item(text: str, vector: list[float], **metadata: str | int) -> StoredMemory:
    return StoredMemory(text=text, metadata=metadata, embedding=vector)


def test_a_namespace_is_written_read_and_searched(tmp_path: Path) -> None:
    namespace = ChromaVectorStore(collection="mem", path=str(tmp_path)).memory_namespace(
        "facts", '"ada"'
    )
    assert (namespace.count(), namespace.get("a"), namespace.search([1, 0], 2, None)) == (
        0,
        None,
        [],
    )

    namespace.upsert("a", item("east", [1.0, 0.0], topic="map"))
    namespace.upsert("b", item("north", [0.0, 1.0]))
    namespace.upsert("a", item("east again", [1.0, 0.0], topic="map"))  # replaced, not added

    assert namespace.count() == 2
    found = namespace.get("a")
    assert found is not None and (found.text, found.metadata) == ("east again", {"topic": "map"})
    assert found.embedding == [1.0, 0.0]
    assert [hit.id for hit in namespace.search([1.0, 0.1], 2, None)] == ["a", "b"]
    assert [hit.id for hit in namespace.search([0.0, 1.0], 2, {"topic": "map"})] == ["a"]
    namespace.delete("a")
    namespace.delete("missing")
    assert namespace.count() == 1
    namespace.clear()
    assert namespace.count() == 0


def test_keys_of_other_types_and_sets_are_other_collections() -> None:
    names = {
        namespace_collection("mem", set_name, key)
        for set_name in ("facts", "notes")
        for key in ("1", '"1"')
    }
    assert len(names) == 4
    assert all(name.startswith("mem-") and len(name) == 36 for name in names)


def test_a_collection_dropped_elsewhere_is_fetched_again(tmp_path: Path) -> None:
    store = ChromaVectorStore(collection="mem", path=str(tmp_path))
    mine = store.memory_namespace("facts", "1")
    mine.upsert("a", item("one", [1.0, 0.0]))
    other_owner = ChromaVectorStore(collection="mem", path=str(tmp_path))
    other_owner.memory_namespace("facts", "1").clear().result()

    assert mine.count() == 0
    mine.upsert("b", item("two", [0.0, 1.0]))
    assert mine.count() == 1


def test_writes_under_one_name_run_in_order_and_other_names_beside_them() -> None:
    writers = OrderedWriters(threads=2)
    held, done = threading.Event(), []

    def first_of_a() -> None:
        assert held.wait(30)
        done.append("a1")

    a1 = writers.submit("a", first_of_a)
    a2 = writers.submit("a", lambda: done.append("a2"))
    writers.submit("b", lambda: done.append("b")).result(timeout=30)  # not behind "a"
    assert done == ["b"] and not a2.done()
    held.set()
    a2.result(timeout=30)
    assert a1.done() and done == ["b", "a1", "a2"]
    failing = writers.submit("a", lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failing.result(timeout=30)
    writers.close()
