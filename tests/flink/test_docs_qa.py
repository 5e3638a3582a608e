"""The docs question-answering example end to end on the mini-cluster: the ingestion job puts
a folder of docs into a real Chroma server (started by scripts/chroma.sh), then the QA job
answers.

The folder is a small frozen corpus (``tests/flink/data/docs``, files named like the project's
docs) rather than docs/ itself: which passage ranks first under the hashing embedding is what
the answers pin, and it must not move whenever the documentation is edited."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from flink_agents.flink.ingestion_job import folder_documents, prepare_folder_source
from flink_agents.flink.job import load_job

pytest.importorskip("chromadb")

REPO = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).parent / "data" / "docs"


def _job(tmp_path: Path, name: str, source: str, out: Path) -> Path:
    job = tmp_path / f"{name}.yaml"
    job.write_text(
        f"name: {name}\nagent: {REPO}/examples/docs_qa.yaml\nagent_name: {name}\n"
        f"source: {{kind: list, path: {source}}}\nkey: id\nsink: {{kind: file, path: {out}}}\n"
    )
    return job


def _outputs(folder: Path) -> dict[str, Any]:
    lines = [
        json.loads(line)
        for part in folder.rglob("*")
        if part.is_file() and not part.name.startswith(".")
        for line in part.read_text().splitlines()
    ]
    return {line["key"]: line["output"] for line in lines}


@pytest.mark.flink
def test_ingest_the_docs_then_answer_from_them(
    tmp_path: Path, fresh_flink_env: Any, chroma_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flink_agents.flink.job_runner import build
    from flink_agents.providers.chroma import ChromaVectorStore

    monkeypatch.setenv("CHROMA_URL", chroma_url)
    ingest = load_job(_job(tmp_path, "docs_ingest", str(tmp_path / "docs.jsonl"), tmp_path / "in"))
    prepare_folder_source(ingest, CORPUS)
    build(ingest, fresh_flink_env)
    fresh_flink_env.execute("docs_ingest")

    ingested = _outputs(tmp_path / "in")
    documents = folder_documents(CORPUS)
    assert sorted(ingested) == sorted(d.id for d in documents)
    chunks = sum(output["chunks"] for output in ingested.values())
    store = ChromaVectorStore(collection="project-docs", url=chroma_url)
    assert asyncio.run(store.count()) >= chunks > len(documents)

    questions = REPO / "jobs" / "data" / "docs_questions.jsonl"
    build(load_job(_job(tmp_path, "docs_qa", str(questions), tmp_path / "qa")), fresh_flink_env)
    fresh_flink_env.execute("docs_qa")

    assert _outputs(tmp_path / "qa") == {
        "q1": "A recorded call is handed back on replay, never made again "
        "(docs/durable-execution.md).",
        "q2": "Declare the prompt under prompts: with {placeholders} (docs/yaml.md).",
        "q3": "The action-state store is a Kafka topic (docs/state-store.md).",
        "q4": "The documentation does not answer that.",
    }
