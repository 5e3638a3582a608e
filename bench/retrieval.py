"""Retrieval benchmark: ingestion rate (chunks/s) and retrieval latency against collection size.

Not a test. Synthetic documents (deterministic: seeded words from a fixed vocabulary) are
ingested by the built-in ingestion agent (chunk -> hashing embedding -> upsert, run in-process
by ``run_local``: the engine's path without Flink or a store) into Chroma: embedded in a
temporary folder, or a server with ``--url``. Then ``--queries`` questions are each embedded and
searched (top 4), as the retrieval step does, and their latencies' p50/p99 recorded. Every
figure is the median over ``--repeats`` rounds (ingestion: one round above 10k chunks).

    .venv/bin/python -m bench.retrieval --sizes 1000,100000 --write bench/results/retrieval.md
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from bench.stats import percentile
from flink_agents.agents.ingestion import IngestionAgent
from flink_agents.api.embeddings import EmbeddingModelSetup
from flink_agents.api.resources import ResourceDescriptor
from flink_agents.providers.chroma import ChromaVectorStore
from flink_agents.providers.hashing_embeddings import (
    HashingEmbeddingModelConnection,
    hashed_vector,
)
from flink_agents.runtime import run_local

DIMENSIONS = 256
CHUNKS_PER_DOCUMENT = 25
WORDS_PER_CHUNK = 45
MAX_CHARS = 400
TOP_K = 4


def vocabulary(size: int = 5000) -> list[str]:
    rng = random.Random(7)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choices(letters, k=rng.randint(3, 9))) for _ in range(size)]


def documents(chunks: int, words: list[str]) -> list[dict[str, str]]:
    """Documents of ``CHUNKS_PER_DOCUMENT`` paragraphs, each one chunk of about 300 chars."""
    rng = random.Random(chunks)
    count = max(1, chunks // CHUNKS_PER_DOCUMENT)
    return [
        {
            "id": f"doc-{index}",
            "text": "\n\n".join(
                " ".join(rng.choices(words, k=WORDS_PER_CHUNK))[: MAX_CHARS - 10] + "."
                for _ in range(CHUNKS_PER_DOCUMENT)
            ),
        }
        for index in range(count)
    ]


def store_descriptor(collection: str, path: Path | None, url: str | None) -> ResourceDescriptor:
    location = {"url": url} if url else {"path": str(path)}
    return ResourceDescriptor.of(
        ChromaVectorStore, collection=collection, dimensions=DIMENSIONS, **location
    )


def ingest(docs: list[dict[str, str]], store: ResourceDescriptor) -> tuple[int, float]:
    """Chunks written and seconds taken."""
    agent = IngestionAgent(
        name="bench_ingest",
        embedding_connection=ResourceDescriptor.of(
            HashingEmbeddingModelConnection, dimensions=DIMENSIONS
        ),
        embedding_model=ResourceDescriptor.of(
            EmbeddingModelSetup, dimensions=DIMENSIONS, batch_size=64
        ),
        vector_store=store,
        max_chars=MAX_CHARS,
    )
    started = time.perf_counter()
    results = run_local(agent, docs, key="id", max_in_flight=32)
    seconds = time.perf_counter() - started
    return sum(r.output_values[0]["chunks"] for r in results), seconds


async def query_latencies(store: ChromaVectorStore, questions: list[str]) -> list[float]:
    """Milliseconds per question: embed it and search the top ``TOP_K``."""
    latencies = []
    for question in questions:
        started = time.perf_counter()
        await store.query(hashed_vector(question, DIMENSIONS), TOP_K)
        latencies.append((time.perf_counter() - started) * 1000)
    return sorted(latencies)


@dataclass
class SizeResult:
    chunks: int
    ingest_rate: float  # chunks/s, median of rounds
    p50_ms: float
    p99_ms: float
    ingest_rounds: int


def measure(size: int, args: argparse.Namespace, words: list[str]) -> SizeResult:
    docs = documents(size, words)
    rng = random.Random(size + 1)
    questions = [" ".join(rng.choices(words, k=8)) for _ in range(args.queries)]
    rounds = args.repeats if size <= 10_000 else 1
    rates, p50s, p99s, chunks = [], [], [], 0
    for _ in range(rounds):
        folder = Path(tempfile.mkdtemp(prefix="bench-retrieval-"))
        collection = f"bench-{uuid.uuid4().hex[:12]}"
        try:
            descriptor = store_descriptor(collection, folder, args.url)
            chunks, seconds = ingest(docs, descriptor)
            rates.append(chunks / seconds)
            store = ChromaVectorStore(**descriptor.arguments)
            for _ in range(args.repeats if rounds == 1 else 1):
                latencies = asyncio.run(query_latencies(store, questions))
                p50s.append(percentile(latencies, 0.50))
                p99s.append(percentile(latencies, 0.99))
            if args.url:
                store._client().delete_collection(collection)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return SizeResult(
        chunks,
        statistics.median(rates),
        statistics.median(p50s),
        statistics.median(p99s),
        rounds,
    )


def report(results: list[SizeResult], args: argparse.Namespace) -> str:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    import chromadb

    where = f"server {args.url}" if args.url else "embedded (a temporary folder)"
    lines = [
        "# Retrieval benchmark",
        "",
        "Command:",
        "",
        f"    .venv/bin/python -m bench.retrieval {' '.join(sys.argv[1:])}",
        "",
        f"Date {datetime.date.today().isoformat()}, commit {commit}; Python "
        f"{platform.python_version()}, chromadb {chromadb.__version__}, Chroma {where}; "
        f"hashing embedding, {DIMENSIONS} dims; chunks of ~{MAX_CHARS} chars, "
        f"{CHUNKS_PER_DOCUMENT} per document; ingestion through `run_local` (32 documents in "
        f"flight, batches of 64, no action-state store); {args.queries} queries per round, top "
        f"{TOP_K}. Machine: {platform.machine()}, shared with other jobs.",
        "",
        "| chunks | ingestion (chunks/s) | ingestion rounds | query p50 (ms) | query p99 (ms) |",
        "|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r.chunks:,} | {r.ingest_rate:,.0f} | {r.ingest_rounds} | {r.p50_ms:.2f} | "
        f"{r.p99_ms:.2f} |"
        for r in results
    ]
    lines += ["", f"Medians over {args.repeats} rounds (ingestion above 10k chunks: one round)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,100000", help="collection sizes, in chunks")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--url", help="a Chroma server (default: embedded, in a temp folder)")
    parser.add_argument("--write", type=Path, help="write the markdown report here")
    args = parser.parse_args(argv)
    words = vocabulary()
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        results.append(measure(size, args, words))
        print(results[-1], file=sys.stderr, flush=True)
    text = report(results, args)
    print(text)
    if args.write:
        args.write.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
