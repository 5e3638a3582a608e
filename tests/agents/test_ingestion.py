"""The ingestion step: chunking, stable chunk ids, and an ingestion run into a vector store."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from flink_agents.agents.ingestion import chunk_id, chunk_text
from flink_agents.providers.memory_vector_store import InMemoryVectorStore
from flink_agents.runtime import ActionError, run_local
from tests.agents.retrieval_samples import DOCS, ingestion_agent
from tests.durable.helpers import PROBE

COLLECTION = "ingestion-test"


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    PROBE.reset()
    InMemoryVectorStore.reset(COLLECTION)
    yield
    InMemoryVectorStore.reset(COLLECTION)


def records() -> dict[str, dict[str, object]]:
    stored = InMemoryVectorStore(collection=COLLECTION)._records
    return {rid: r.model_dump() for rid, r in stored.items()}


def test_paragraphs_are_packed_into_chunks_of_at_most_max_chars() -> None:
    text = "One short.\n\nTwo short.\n\n" + "A long sentence here. " * 10 + "\n\nEnd."

    chunks = chunk_text(text, 60)

    assert chunks[0].startswith("One short.\n\nTwo short.")
    assert all(0 < len(chunk) <= 60 for chunk in chunks)
    assert chunks[-1].endswith("End.")
    assert " ".join(" ".join(chunks).split()) == " ".join(text.split())


def test_a_word_longer_than_max_chars_is_cut_hard() -> None:
    assert chunk_text("x" * 120, 50) == ["x" * 50, "x" * 50, "x" * 20]


def test_chunk_ids_are_stable_and_depend_on_source_index_and_content() -> None:
    first = chunk_id("docs/a.md", 0, "text")

    assert first == chunk_id("docs/a.md", 0, "text")
    assert (
        len(
            {
                first,
                chunk_id("docs/b.md", 0, "text"),
                chunk_id("docs/a.md", 1, "text"),
                chunk_id("docs/a.md", 0, "text!"),
            }
        )
        == 4
    )


def test_documents_are_chunked_embedded_in_batches_and_upserted_with_their_source() -> None:
    results = run_local(ingestion_agent(COLLECTION, batch_size=1), DOCS, key="id")

    outputs = [result.output_values[0] for result in results]
    assert outputs == [
        {"source": "guide/kafka.md", "chunks": 2, "deleted": 0},
        {"source": "guide/flink.md", "chunks": 2, "deleted": 0},
        {"source": "guide/cooking.md", "chunks": 1, "deleted": 0},
    ]
    stored = records()
    assert len(stored) == 5
    assert PROBE.counts["embed"] == 5  # one call per batch of one chunk
    assert PROBE.counts["upsert"] == 3  # one per document
    flink = sorted(
        (r["metadata"]["chunk"], r["document"], r["metadata"].get("lang"))
        for r in stored.values()
        if r["metadata"]["source"] == "guide/flink.md"
    )
    assert flink == [
        (0, "Flink checkpoints keyed state to a durable folder.", "en"),
        (1, "After a failure the job restarts from the latest checkpoint.", "en"),
    ]


def test_a_documents_own_source_is_kept_in_its_chunks() -> None:
    document = {
        "id": "doc-17",
        "text": "Flink restarts.",
        "metadata": {"source": "https://x.test/a"},
    }
    [result] = run_local(ingestion_agent(COLLECTION), [document], key="id")
    assert result.output_values == [{"source": "doc-17", "chunks": 1, "deleted": 0}]
    [stored] = records().values()
    assert stored["metadata"] == {"source": "https://x.test/a", "chunk": 0}


def test_ingesting_the_same_document_again_writes_the_same_records() -> None:
    run_local(ingestion_agent(COLLECTION), DOCS, key="id")
    before = records()

    run_local(ingestion_agent(COLLECTION), DOCS, key="id")

    assert records() == before


def test_a_new_version_of_a_document_replaces_its_chunks() -> None:
    changed = {"id": "guide/kafka.md", "text": "Kafka topics hold records in partitions."}

    [_, second] = run_local(ingestion_agent(COLLECTION), [DOCS[0], changed], key="id")

    assert second.output_values == [{"source": "guide/kafka.md", "chunks": 1, "deleted": 1}]
    assert [r["document"] for r in records().values()] == [
        "Kafka topics hold records in partitions."
    ]


def test_an_input_that_is_not_a_document_fails_the_run() -> None:
    with pytest.raises(ActionError, match="text"):
        run_local(ingestion_agent(COLLECTION), [{"id": "x", "body": "no text field"}], key="id")
    assert asyncio.run(InMemoryVectorStore(collection=COLLECTION).count()) == 0
