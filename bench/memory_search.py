"""Long-term memory benchmark: the keyed-state backend's search latency against the items one key
holds, what that memory costs the key's state, and the cost per run of memory reads and writes.

Not a test. Items are synthetic texts (seeded words from a fixed vocabulary) with dense random
unit vectors of 256 dimensions (the size of a real embedding's in the key's state). For each
size, one key's committed memory is built and searched:

* ``first``: the first search of a committed set restored from the key's state (it builds the
  set's matrix of unit vectors), median over ``--repeats``;
* ``next run``: the first search after a run added one item to a searched set (the matrix is
  derived from the earlier one: what each run of a key that searches and writes pays);
* ``warm``: ``--queries`` searches (top 4) of the same committed set, p50/p99;
* ``filtered``: the same with a metadata filter that one item in ten matches;
* ``staged``: the same with 10 writes of the run staged over the set;
* ``state``: the key's saved state (the JSON the Flink operator writes when a run of the key
  finishes) in bytes, and the time to encode it.

Then ``--runs`` runs over 20 keys through ``run_local`` with the in-memory action-state store:
an agent that makes no call, one that makes two no-op durable calls (as many as memory makes
below) and one that searches and adds one item per run: runs/s of each.

With ``--chroma URL`` (a Chroma server: ``CHROMA_PORT=8500 scripts/chroma.sh start``), the same
sets on the Chroma backend, side by side: the key's collection is loaded in batches, then
searched through the backend (``warm`` and ``filtered``, p50/p99), ``write``: single upserts
through the backend as a run makes them (p50/p99), and ``--chroma-runs`` runs of the search-and-
add agent with the set on Chroma.

    .venv/bin/python -m bench.memory_search --write bench/results/memory_search.md
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from bench.retrieval import vocabulary
from bench.stats import percentile
from examples.customer_memory import with_memory
from flink_agents.api import (
    Agent,
    InputEvent,
    OutputEvent,
    ResourceDescriptor,
    RunnerContext,
    action,
)
from flink_agents.api.long_term_memory import MemoryWrite, StoredMemory
from flink_agents.durable.identity import canonical_json
from flink_agents.durable.store import InMemoryActionStateStore, InMemoryLog
from flink_agents.plan import compile_agent
from flink_agents.runtime import KeyState, run_local
from flink_agents.runtime.keyed import SavedKey, _saved_text
from flink_agents.runtime.keyed_memory import CommittedMemory, KeyedStateMemory

DIMENSIONS = 256
TOP_K = 4
WORDS_PER_ITEM = 12


def texts(count: int, words: list[str], seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(words, k=WORDS_PER_ITEM)) for _ in range(count)]


def dense_vector(rng: random.Random) -> list[float]:
    """A unit vector with every component set, as a real embedding model's (the hashing
    embedding's are mostly zeros, which would understate the state's size)."""
    vector = [rng.gauss(0.0, 1.0) for _ in range(DIMENSIONS)]
    norm = sum(x * x for x in vector) ** 0.5
    return [x / norm for x in vector]


def committed(size: int, words: list[str]) -> dict[str, dict[str, StoredMemory]]:
    rng = random.Random(size)
    return {
        "facts": {
            f"item-{index}": StoredMemory(
                text=text, metadata={"bucket": index % 10}, embedding=dense_vector(rng)
            )
            for index, text in enumerate(texts(size, words, size))
        }
    }


def timed_ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def measure_size(size: int, queries: int, repeats: int, words: list[str]) -> dict[str, float]:
    state = committed(size, words)
    rng = random.Random(-size)
    vectors = [dense_vector(rng) for _ in range(queries)]
    first = statistics.median(
        timed_ms(
            lambda: KeyedStateMemory(CommittedMemory.from_state(state)).search(
                "facts", vectors[0], TOP_K, None
            )
        )
        for _ in range(repeats)
    )
    memory = KeyedStateMemory(CommittedMemory.from_state(state))
    memory.search("facts", vectors[0], TOP_K, None)  # the matrix is built

    latest = [memory.commit()]  # each run starts from the memory the one before committed

    def next_run(index: int) -> None:
        run = KeyedStateMemory(latest[0])
        added = StoredMemory(text=f"new {index}", embedding=dense_vector(rng))
        run.apply(MemoryWrite(set="facts", id=f"new-{index}", item=added))
        latest[0] = run.commit()
        KeyedStateMemory(latest[0]).search("facts", vectors[0], TOP_K, None)

    after_write = statistics.median(timed_ms(lambda i=i: next_run(i)) for i in range(repeats))
    warm = sorted(timed_ms(lambda v=v: memory.search("facts", v, TOP_K, None)) for v in vectors)
    where = {"bucket": 3}
    filtered = sorted(
        timed_ms(lambda v=v: memory.search("facts", v, TOP_K, where)) for v in vectors
    )
    for index, text in enumerate(texts(10, words, 1)):
        item = StoredMemory(text=text, embedding=dense_vector(rng))
        memory.apply(MemoryWrite(set="facts", id=f"staged-{index}", item=item))
    staged = sorted(timed_ms(lambda v=v: memory.search("facts", v, TOP_K, None)) for v in vectors)
    saved = SavedKey(runs=KeyState(next_seq=1, long_term_memory=state))
    encoded = _saved_text(saved)
    encode_ms = statistics.median(timed_ms(lambda: _saved_text(saved)) for _ in range(repeats))
    return {
        "first": first,
        "next_run": after_write,
        "warm_p50": percentile(warm, 0.5),
        "warm_p99": percentile(warm, 0.99),
        "filtered_p50": percentile(filtered, 0.5),
        "filtered_p99": percentile(filtered, 0.99),
        "staged_p50": percentile(staged, 0.5),
        "staged_p99": percentile(staged, 0.99),
        "state_mb": len(encoded.encode()) / 1e6,
        "encode_ms": encode_ms,
    }


@action(InputEvent)
async def plain(event: InputEvent, ctx: RunnerContext) -> None:
    ctx.send_event(OutputEvent(output=event.input["text"]))


@action(InputEvent)
async def two_calls(event: InputEvent, ctx: RunnerContext) -> None:
    """As many durable calls as a search and an add make, doing nothing."""
    for _ in range(2):
        await ctx.durable_execute_async(_nothing, event.input["text"])
    ctx.send_event(OutputEvent(output=event.input["text"]))


async def _nothing(text: str) -> str:
    return text


@action(InputEvent)
async def with_reads_and_writes(event: InputEvent, ctx: RunnerContext) -> None:
    facts = ctx.long_term_memory["facts"]
    hits = await facts.search(event.input["text"], k=TOP_K)
    await facts.add(event.input["text"])
    ctx.send_event(OutputEvent(output=len(hits)))


def measure_chroma(url: str, size: int, queries: int, words: list[str]) -> dict[str, float]:
    """Search and write latencies of one key's set of ``size`` items on the Chroma backend."""
    import chromadb

    from flink_agents.providers.chroma import ChromaVectorStore

    store = ChromaVectorStore(collection=f"bench-{uuid.uuid4().hex[:8]}", url=url)
    namespace = store.memory_namespace("facts", canonical_json(f"key-{size}"))
    parts = urlsplit(url)
    client = chromadb.HttpClient(host=parts.hostname or "127.0.0.1", port=parts.port or 8000)
    collection = client.get_or_create_collection(
        namespace.collection, embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
    )
    items = list(committed(size, words)["facts"].items())
    for start in range(0, len(items), 1000):  # loaded in batches: the bench measures search
        batch = items[start : start + 1000]
        collection.upsert(
            ids=[item_id for item_id, _ in batch],
            embeddings=[item.embedding for _, item in batch],
            documents=[item.text for _, item in batch],
            metadatas=[dict(item.metadata) for _, item in batch],
        )
    rng = random.Random(-size)
    vectors = [dense_vector(rng) for _ in range(queries)]
    namespace.search(vectors[0], TOP_K, None)  # the first search loads the index
    warm = sorted(timed_ms(lambda v=v: namespace.search(v, TOP_K, None)) for v in vectors)
    where = {"bucket": 3}
    filtered = sorted(timed_ms(lambda v=v: namespace.search(v, TOP_K, where)) for v in vectors)
    writes = sorted(
        timed_ms(
            lambda i=i: namespace.upsert(
                f"new-{i}", StoredMemory(text=f"new {i}", embedding=dense_vector(rng))
            ).result()  # the write made (off the caller's thread) and answered
        )
        for i in range(min(queries, 100))
    )
    namespace.clear()
    return {
        "warm_p50": percentile(warm, 0.5),
        "warm_p99": percentile(warm, 0.99),
        "filtered_p50": percentile(filtered, 0.5),
        "filtered_p99": percentile(filtered, 0.99),
        "write_p50": percentile(writes, 0.5),
        "write_p99": percentile(writes, 0.99),
    }


def runs_per_second(
    fn: object, runs: int, words: list[str], store: ResourceDescriptor | None = None
) -> float:
    agent = with_memory(Agent(name="bench_memory"), store=store)
    agent.add_action(fn)
    plan = compile_agent(agent)
    inputs = [{"key": f"k{i % 20}", "text": t} for i, t in enumerate(texts(runs, words, 3))]
    store = InMemoryActionStateStore(InMemoryLog())
    start = time.perf_counter()
    run_local(plan, inputs, key="key", store=store)
    elapsed = time.perf_counter() - start
    store.close()
    return runs / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--write", type=Path, default=None)
    parser.add_argument("--chroma", default=None, help="a Chroma server's URL: bench it too")
    parser.add_argument("--chroma-runs", type=int, default=200)
    args = parser.parse_args()
    words = vocabulary()
    sizes = [int(s) for s in args.sizes.split(",")]
    lines = [
        "| items per key | first search ms | next run ms | warm p50 / p99 ms "
        "| filtered p50 / p99 ms | 10 staged p50 / p99 ms | key state MB | state encode ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    keyed: dict[int, dict[str, float]] = {}
    for size in sizes:
        r = keyed[size] = measure_size(size, args.queries, args.repeats, words)
        lines.append(
            f"| {size:,} | {r['first']:.1f} | {r['next_run']:.1f} "
            f"| {r['warm_p50']:.2f} / {r['warm_p99']:.2f} "
            f"| {r['filtered_p50']:.2f} / {r['filtered_p99']:.2f} "
            f"| {r['staged_p50']:.2f} / {r['staged_p99']:.2f} "
            f"| {r['state_mb']:.1f} | {r['encode_ms']:.0f} |"
        )
    chroma_line: list[str] = []
    if args.chroma is not None:
        from flink_agents.providers.chroma import ChromaVectorStore

        lines += [
            "",
            "| items per key | keyed state warm p50 / p99 ms | Chroma warm p50 / p99 ms "
            "| keyed state filtered p50 / p99 ms | Chroma filtered p50 / p99 ms "
            "| Chroma write p50 / p99 ms |",
            "|---|---|---|---|---|---|",
        ]
        for size in sizes:
            k, c = keyed[size], measure_chroma(args.chroma, size, args.queries, words)
            lines.append(
                f"| {size:,} | {k['warm_p50']:.2f} / {k['warm_p99']:.2f} "
                f"| {c['warm_p50']:.2f} / {c['warm_p99']:.2f} "
                f"| {k['filtered_p50']:.2f} / {k['filtered_p99']:.2f} "
                f"| {c['filtered_p50']:.2f} / {c['filtered_p99']:.2f} "
                f"| {c['write_p50']:.2f} / {c['write_p99']:.2f} |"
            )
        chroma = ResourceDescriptor.of(
            ChromaVectorStore, collection=f"bench-runs-{uuid.uuid4().hex[:8]}", url=args.chroma
        )
        chroma_rate = runs_per_second(with_reads_and_writes, args.chroma_runs, words, chroma)
        chroma_line = [
            "",
            f"runs/s over 20 keys ({args.chroma_runs:,} runs, in-memory store), one search and "
            f"one add with the set on Chroma: {chroma_rate:,.1f}",
        ]
    plain_rate = runs_per_second(plain, args.runs, words)
    calls_rate = runs_per_second(two_calls, args.runs, words)
    memory_rate = runs_per_second(with_reads_and_writes, args.runs, words)
    lines += [
        "",
        f"runs/s over 20 keys ({args.runs:,} runs, in-memory store): no call "
        f"{plain_rate:,.0f}; two no-op durable calls {calls_rate:,.0f}; one search and one "
        f"add (two durable calls, embedding included) {memory_rate:,.0f}",
        *chroma_line,
        "",
        f"python {platform.python_version()}, {platform.machine()}, "
        f"{DIMENSIONS} dimensions, top {TOP_K}, {args.queries} queries",
    ]
    text = "\n".join(lines)
    print(text)
    if args.write is not None:
        args.write.write_text(text + "\n")


if __name__ == "__main__":
    main()
