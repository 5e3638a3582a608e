"""The vector store contract, for the in-memory store and Chroma (embedded, a local folder)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from flink_agents.api.vector_stores import VectorRecord, VectorStore
from flink_agents.providers.memory_vector_store import InMemoryVectorStore

chromadb = pytest.importorskip("chromadb")

from flink_agents.providers.chroma import ChromaVectorStore, chroma_where  # noqa: E402

RECORDS = [
    VectorRecord(id="a", document="alpha", embedding=[1.0, 0.0, 0.0], metadata={"doc": "x"}),
    VectorRecord(id="b", document="beta", embedding=[0.8, 0.6, 0.0], metadata={"doc": "x"}),
    VectorRecord(id="c", document="gamma", embedding=[0.0, 1.0, 0.0], metadata={"doc": "y"}),
    VectorRecord(id="d", document="delta", embedding=[0.0, 0.0, 1.0], metadata={"doc": "y"}),
]


@pytest.fixture(params=["memory", "chroma"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorStore]:
    if request.param == "memory":
        InMemoryVectorStore.reset("contract")
        opened: VectorStore = InMemoryVectorStore(collection="contract", dimensions=3)
    else:
        opened = ChromaVectorStore(collection="contract", path=str(tmp_path), dimensions=3)
    opened.open()
    asyncio.run(opened.upsert(RECORDS))
    yield opened


def ids(matches: list) -> list[str]:  # type: ignore[type-arg]
    return [m.id for m in matches]


def test_query_returns_the_top_k_nearest_first_with_cosine_scores(store: VectorStore) -> None:
    matches = asyncio.run(store.query([1.0, 0.1, 0.0], top_k=2))

    assert ids(matches) == ["a", "b"]
    assert matches[0].document == "alpha"
    assert matches[0].metadata == {"doc": "x"}
    assert matches[0].score == pytest.approx(0.995, abs=1e-3)
    assert matches[0].score > matches[1].score


def test_query_filters_on_metadata(store: VectorStore) -> None:
    assert ids(asyncio.run(store.query([0.0, 1.0, 0.5], top_k=4, where={"doc": "y"}))) == [
        "c",
        "d",
    ]
    matches = asyncio.run(store.query([1.0, 0.0, 0.0], top_k=4, where={"doc": {"$ne": "y"}}))
    assert ids(matches) == ["a", "b"]


def test_upsert_replaces_by_id_and_is_idempotent(store: VectorStore) -> None:
    asyncio.run(store.upsert(RECORDS))
    changed = RECORDS[3].model_copy(update={"document": "DELTA", "embedding": [1.0, 0.0, 0.0]})
    asyncio.run(store.upsert([changed]))

    assert asyncio.run(store.count()) == 4
    top = asyncio.run(store.query([1.0, 0.0, 0.0], top_k=4, where={"doc": "y"}))[0]
    assert (top.id, top.document) == ("d", "DELTA")


def test_delete_removes_by_id_and_ignores_unknown_ids(store: VectorStore) -> None:
    asyncio.run(store.delete(["a", "nope"]))

    assert asyncio.run(store.count()) == 3
    assert "a" not in ids(asyncio.run(store.query([1.0, 0.0, 0.0], top_k=4)))


def test_a_vector_of_the_wrong_dimension_is_refused(store: VectorStore) -> None:
    with pytest.raises(ValueError, match="dimension 2"):
        asyncio.run(store.query([1.0, 0.0]))
    with pytest.raises(ValueError, match="dimension 2"):
        asyncio.run(store.upsert([VectorRecord(id="e", document="e", embedding=[1.0, 0.0])]))


def test_in_memory_stores_of_one_collection_share_their_records() -> None:
    InMemoryVectorStore.reset("shared")
    asyncio.run(InMemoryVectorStore(collection="shared").upsert(RECORDS))

    assert asyncio.run(InMemoryVectorStore(collection="shared").count()) == 4
    assert asyncio.run(InMemoryVectorStore(collection="other").count()) == 0


def test_chroma_keeps_the_collection_in_its_folder(tmp_path: Path) -> None:
    first = ChromaVectorStore(collection="kept", path=str(tmp_path))
    asyncio.run(first.upsert(RECORDS))

    again = ChromaVectorStore(collection="kept", path=str(tmp_path))

    assert asyncio.run(again.count()) == 4


def test_chroma_never_runs_its_default_embedding_function(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chromadb.api import types
    from chromadb.utils import embedding_functions

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("Chroma's default embedding function was invoked")

    for cls in (types.DefaultEmbeddingFunction, embedding_functions.ONNXMiniLM_L6_V2):
        monkeypatch.setattr(cls, "__call__", refuse)
        monkeypatch.setattr(cls, "__init__", refuse)
    store = ChromaVectorStore(collection="no-default-ef", path=str(tmp_path))
    store.open()

    asyncio.run(store.upsert(RECORDS))
    assert ids(asyncio.run(store.query([1.0, 0.0, 0.0], top_k=1))) == ["a"]
    assert store._handle()._embedding_function is None


def test_chroma_where_combines_several_fields_with_and() -> None:
    assert chroma_where(None) is None
    assert chroma_where({"doc": "x"}) == {"doc": {"$eq": "x"}}
    assert chroma_where({"doc": "x", "n": {"$gt": 1}}) == {
        "$and": [{"doc": {"$eq": "x"}}, {"n": {"$gt": 1}}]
    }


def test_chroma_takes_a_server_or_a_folder_not_both() -> None:
    with pytest.raises(ValueError, match="not both"):
        ChromaVectorStore(collection="both", path="/tmp/x", url="http://127.0.0.1:8000")
