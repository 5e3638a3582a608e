"""The ingestion job's folder source: one document per file, written where the job reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flink_agents.flink.ingestion_job import folder_documents, prepare_folder_source
from flink_agents.flink.job import load_job


def test_a_folder_becomes_documents_named_by_their_path(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "b.md").write_text("Bee.")
    (folder / "a.md").write_text("Ay.")
    (folder / "skip.txt").write_text("not markdown")
    (folder / "sub" / "c.md").write_text("Sea.")

    assert [(d.id, d.text) for d in folder_documents(folder)] == [
        ("notes/a.md", "Ay."),
        ("notes/b.md", "Bee."),
    ]
    assert [d.id for d in folder_documents(folder, "**/*.md")] == [
        "notes/a.md",
        "notes/b.md",
        "notes/sub/c.md",
    ]


def test_the_documents_are_written_to_the_jobs_list_source(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "x.md").write_text("Ex.")
    job = tmp_path / "job.yaml"
    job.write_text(
        "name: ingest\nagent: agents.yaml\nsource: {kind: list, path: data/docs.jsonl}\nkey: id\n"
    )

    written = prepare_folder_source(load_job(job), tmp_path / "docs")

    assert written == tmp_path / "data" / "docs.jsonl"
    assert [json.loads(line) for line in written.read_text().splitlines()] == [
        {"id": "docs/x.md", "text": "Ex.", "metadata": {}}
    ]


def test_a_kafka_sourced_job_takes_no_folder(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("name: ingest\nagent: a.yaml\nsource: {kind: kafka, topic: docs}\nkey: id\n")

    with pytest.raises(ValueError, match="kafka"):
        prepare_folder_source(load_job(job), tmp_path)
