"""Durable calls like for like: ours and Apache flink-agents, each without and with its Kafka
action-state store, side by side in one invocation (issue #20, "Fair peers").

    FLINK_AGENTS_CACHE=... python -m bench.peer_durable --rounds 3 --bootstrap 127.0.0.1:9292

Workload (1), one chat call per input on a sleeping model, at two points: 200 ms over 100 keys
(our in-flight bound 100) and 0 ms over 1,000 keys (bound 1,000); the peer's pool
(``num-async-threads``) is 100 at both. Every job runs in a process of its own (a fresh
mini-cluster JVM for each side); the order of the four variants is reversed every other round.
After a job with a store, the records in its topic (unique per job) are counted -- the proof
the store was on -- and the topic is deleted. One JSON row per job goes to ``--out``; the table
of medians over the rounds is printed at the end (and rebuilt with ``--report-only``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.analysis import Row, ratio
from bench.peer import PEER, PeerRelease, StoreTopic, run_cases
from bench.plan import FULL, inputs_for
from bench.report import fmt, ms, table

REPO = Path(__file__).resolve().parents[1]
OURS = "ours"
STORES = ("none", "kafka")
PARTITIONS = 4  # our store's default; the peer's (64) is set to the same for like for like
PEER_THREADS = 100


@dataclass(frozen=True)
class Point:
    """One measured setting; ``rates`` guess each variant's runs/s, only to size its job."""

    latency: float
    keys: int
    bound: int
    rates: dict[tuple[str, str], float]


def points(peer: str) -> list[Point]:
    return [
        Point(0.2, 100, 100, {(OURS, "none"): 500.0, (OURS, "kafka"): 360.0,
                              (peer, "none"): 400.0, (peer, "kafka"): 40.0}),
        Point(0.0, 1000, 1000, {(OURS, "none"): 1200.0, (OURS, "kafka"): 470.0,
                                (peer, "none"): 400.0, (peer, "kafka"): 60.0}),
    ]  # fmt: skip


def variants(peer: str, round_index: int) -> list[tuple[str, str]]:
    """The four jobs of a point, in this round's order (reversed every other round)."""
    order = [(side, store) for side in (OURS, peer) for store in STORES]
    return order if round_index % 2 == 0 else order[::-1]


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def count_records(bootstrap: str, topic: str) -> int:
    """Every record in ``topic``, read from the beginning of each partition to its end."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"bench-count-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False, "enable.partition.eof": True,
    })  # fmt: skip
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        remaining, count = set(partitions), 0
        while remaining:
            message = consumer.poll(10)
            if message is None:
                raise TimeoutError(f"no end of {topic} within 10 s")
            error = message.error()
            if error is None:
                count += 1
            elif error.code() == KafkaError._PARTITION_EOF:
                remaining.discard(message.partition())
            else:
                raise RuntimeError(f"reading {topic}: {error}")
        return count
    finally:
        consumer.close()


def delete_topic(bootstrap: str, topic: str) -> None:
    """Keep the broker small: the peer's store lists every topic with a 100 ms limit."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive its futures
    for future in admin.delete_topics([topic]).values():
        future.result(timeout=30)


def ours_job(case: dict[str, Any]) -> Row:
    """One job of our operator (in this process); ``case["store"]`` a topic or None."""
    from bench.cluster import JobSettings, flink_config
    from bench.flink_job import run_job
    from bench.ours import agent_pipeline
    from flink_agents.durable.store.store_config import StoreConfig

    store = None
    if topic := case["store"]:
        store = StoreConfig(
            kind="kafka", bootstrap_servers=topic["bootstrap"], topic=topic["topic"],
            partitions=topic["partitions"],
        )  # fmt: skip
    output = run_job(
        "durable-ours", agent_pipeline("one_call", case["latency"], case["bound"], store),
        inputs=case["inputs"], keys=case["keys"], configure=flink_config(JobSettings()),
    )  # fmt: skip
    return {**asdict(output.stats()), "wall_s": output.wall_s}


def run_ours(case: dict[str, Any]) -> Row:
    """:func:`ours_job` in a fresh process, as the peer's jobs are (no warm JVM for one side)."""
    command = [sys.executable, "-m", "bench.peer_durable", "--ours-job", json.dumps(case)]
    done = subprocess.run(command, cwd=REPO, stdout=subprocess.PIPE, text=True, check=True)
    return json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])


def run_peer(release: PeerRelease, case: dict[str, Any]) -> Row:
    (row,) = run_cases(release, [{**case, "threads": PEER_THREADS}])
    return {k: row[k] for k in ("outputs", "errors", "runs_per_s", "p50_ms", "p99_ms", "wall_s")}


def measure(rounds: int, bootstrap: str, release: PeerRelease) -> Iterator[Row]:
    """All jobs of all rounds, one row each, in the order they ran."""
    peer = f"flink-agents {release.version}"
    for round_index in range(rounds):
        for point in points(peer):
            for side, store_name in variants(peer, round_index):
                # The admission-window floor (3 x 2 x bound) is about our operator only.
                window = point.bound if side == OURS else 0
                inputs = inputs_for(FULL, point.rates[(side, store_name)], window)
                store = None
                if store_name == "kafka":
                    who = "ours" if side == OURS else "peer"
                    topic = f"bench-fair-{who}-{uuid.uuid4().hex[:8]}"
                    store = asdict(StoreTopic(bootstrap, topic, PARTITIONS))
                case = {"latency": point.latency, "keys": point.keys, "bound": point.bound,
                        "inputs": inputs, "store": store}  # fmt: skip
                load_before = load()
                result = run_ours(case) if side == OURS else run_peer(release, case)
                records = None
                if store is not None:
                    records = count_records(bootstrap, store["topic"])
                    delete_topic(bootstrap, store["topic"])
                yield {
                    "round": round_index, "side": side, "store": store_name,
                    "latency": point.latency, "keys": point.keys, "bound": point.bound,
                    "inputs": inputs, "threads": None if side == OURS else PEER_THREADS,
                    **result, "store_records": records, "load_before": load_before,
                }  # fmt: skip


def medians(rows: list[Row], **match: Any) -> dict[str, float]:
    """Median runs/s, p50, p99 and store records per input of the rows matching ``match``."""
    chosen = [r for r in rows if all(r[k] == v for k, v in match.items())]
    if not chosen:
        return {}

    def median(values: Callable[[Row], float | None]) -> float:
        present = [v for v in map(values, chosen) if v is not None]
        return statistics.median(present) if present else float("nan")

    return {
        "runs_per_s": median(lambda r: r["runs_per_s"]),
        "p50_ms": median(lambda r: r["p50_ms"]),
        "p99_ms": median(lambda r: r["p99_ms"]),
        "records_per_input": median(
            lambda r: r["store_records"] / r["inputs"] if r["store_records"] is not None else None
        ),
        "n": len(chosen),
    }


def report(rows: list[Row]) -> str:
    """Medians over the rounds: ours / theirs without and with the stores, and what each
    store costs its own side (Kafka / none)."""
    peer = next(r["side"] for r in rows if r["side"] != OURS)
    settings = sorted({(r["latency"], r["keys"], r["bound"]) for r in rows}, reverse=True)
    rates, latencies = [], []
    for latency, keys, bound in settings:
        at = {"latency": latency, "keys": keys}
        m = {(side, store): medians(rows, side=side, store=store, **at)
             for side in (OURS, peer) for store in STORES}  # fmt: skip
        ours_none, ours_kafka = m[(OURS, "none")], m[(OURS, "kafka")]
        fa_none, fa_kafka = m[(peer, "none")], m[(peer, "kafka")]

        def rate(x: dict[str, float]) -> float:
            return x.get("runs_per_s", float("nan"))

        rates.append([
            ms(latency), fmt(keys), fmt(bound), fmt(max(v.get("n", 0) for v in m.values())),
            fmt(rate(ours_none), 1), fmt(rate(ours_kafka), 1),
            fmt(rate(fa_none), 1), fmt(rate(fa_kafka), 1),
            fmt(ratio(rate(ours_none), rate(fa_none)), 2),
            fmt(ratio(rate(ours_kafka), rate(fa_kafka)), 2),
            fmt(ratio(rate(ours_kafka), rate(ours_none)), 2),
            fmt(ratio(rate(fa_kafka), rate(fa_none)), 2),
        ])  # fmt: skip
        for (side, store), x in m.items():
            latencies.append([
                ms(latency), fmt(keys), side, store, fmt(x.get("p50_ms")), fmt(x.get("p99_ms")),
                fmt(x.get("records_per_input"), 2) if store == "kafka" else "-",
            ])  # fmt: skip
    return "\n\n".join([
        table(["L", "keys", "bound", "rounds", "ours none runs/s", "ours Kafka runs/s",
               f"{peer} none runs/s", f"{peer} Kafka runs/s", "ours / theirs none",
               "ours / theirs Kafka", "ours Kafka / none", "theirs Kafka / none"], rates),
        table(["L", "keys", "side", "store", "p50 ms", "p99 ms", "store records / input"],
              latencies),
        rounds_table(rows),
    ])  # fmt: skip


def rounds_table(rows: list[Row]) -> str:
    """Every job's runs/s with the 1-minute load average when it started, round by round."""
    rounds = sorted({r["round"] for r in rows})
    jobs: dict[tuple[float, str, str], dict[int, Row]] = {}
    for r in rows:
        jobs.setdefault((r["latency"], r["side"], r["store"]), {})[r["round"]] = r
    lines = [
        [ms(latency), side, store, *(
            f"{fmt(by_round[i]['runs_per_s'], 1)} ({by_round[i]['load_before'].split()[0]})"
            if i in by_round else "-" for i in rounds
        )]
        for (latency, side, store), by_round in sorted(jobs.items(), key=lambda j: -j[0][0])
    ]  # fmt: skip
    return table(["L", "side", "store", *(f"round {i} runs/s (load)" for i in rounds)], lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--out", type=Path, default=REPO / ".cache" / "peer-durable.jsonl")
    parser.add_argument("--report-only", action="store_true", help="the table from --out")
    parser.add_argument("--ours-job", help=argparse.SUPPRESS)  # one job, run by run_ours
    args = parser.parse_args()
    if args.ours_job:
        print(json.dumps(ours_job(json.loads(args.ours_job))), flush=True)
        return
    if not args.report_only:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("")
        started, load_start = time.time(), load()
        with args.out.open("a") as out:
            for row in measure(args.rounds, args.bootstrap, PEER):
                print(json.dumps(row), file=out, flush=True)
                print(json.dumps(row), flush=True)
        print(f"wall {(time.time() - started) / 60:.1f} min; load {load_start} -> {load()}")
    rows = [json.loads(line) for line in args.out.read_text().splitlines() if line.strip()]
    print(report(rows))


if __name__ == "__main__":
    main()
