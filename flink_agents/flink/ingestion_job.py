"""The ingestion job: documents -> chunks -> vectors -> a vector store, as a Flink job.

The job is an ordinary job spec (:mod:`flink_agents.flink.job`) whose agent ingests documents
(:mod:`flink_agents.agents.ingestion`, e.g. ``examples/docs_qa.yaml``'s ``docs_ingest``), keyed
by document id, so each document's embedding and upsert calls are durable and replay-safe. Its
source is a JSON-lines file of documents (``{"id", "text", "metadata"}``) or a Kafka topic of
them. For a folder of text files, this module writes that JSON-lines file first:

    python -m flink_agents.flink.ingestion_job JOB.yaml --documents docs --glob '*.md'

writes one record per file (id: the file's path relative to the folder's parent, e.g.
``docs/api.md``) to the job's list source path, then runs the job on the local mini-cluster.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from flink_agents.agents.ingestion import SourceDocument
from flink_agents.flink.job import JobSpec, ListSourceSpec, load_job
from flink_agents.flink.job_runner import run


def folder_documents(folder: Path, pattern: str = "*.md") -> list[SourceDocument]:
    """The files of ``folder`` matching ``pattern``, sorted by path, as documents."""
    root = folder.resolve()
    return [
        SourceDocument(
            id=path.relative_to(root.parent).as_posix(),
            text=path.read_text(encoding="utf-8"),
        )
        for path in sorted(root.glob(pattern))
        if path.is_file()
    ]


def write_documents(documents: list[SourceDocument], path: Path) -> Path:
    """``documents`` as a JSON-lines file (the list source of an ingestion job)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = (json.dumps(d.model_dump(mode="json"), ensure_ascii=False) for d in documents)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def prepare_folder_source(spec: JobSpec, folder: Path, pattern: str = "*.md") -> Path:
    """Write ``folder``'s documents where the job's list source reads them; returns that path."""
    if not isinstance(spec.source, ListSourceSpec):
        raise ValueError(f"job {spec.name!r} reads {spec.source.kind}, not a list file")
    return write_documents(folder_documents(folder, pattern), spec.resolve(spec.source.path))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m flink_agents.flink.ingestion_job", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("job", help="the ingestion job spec (YAML)")
    parser.add_argument("--documents", type=Path, help="a folder of text files to ingest")
    parser.add_argument("--glob", default="*.md", help="which files of the folder (default *.md)")
    args = parser.parse_args(argv)
    spec = load_job(args.job)
    if args.documents is not None:
        written = prepare_folder_source(spec, args.documents, args.glob)
        print(f"wrote the documents of {args.documents} to {written}", file=sys.stderr)
    run(spec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
