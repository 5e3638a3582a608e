"""Where the time goes at the headline point (workload 1, L = 500 ms, 10,000 keys, bound 1000).

Runs one such job in thread mode (as the suite does) and attaches py-spy to the mini-cluster
JVM, whose embedded interpreter (pemja) runs the operator and the engine thread; writes
``results/profile.md``: samples per thread, per code area, and the top functions by own time.

    .venv/bin/python -m bench.hotspots          # needs py-spy in the venv (make bench installs it)

``--operator ARGS`` profiles a ``bench.operator_throughput ARGS`` job instead (any latency, keys,
bound, store) and prints the summary rather than writing ``profile.md``:

    .venv/bin/python -m bench.hotspots --operator "--latency 0 --store kafka" --warmup 15
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import time
from pathlib import Path

from bench.procs import wait_for_jvm

REPO = Path(__file__).resolve().parents[1]
AREAS = [  # first match wins: (area, substring of the leaf frame's file)
    ("action-state store (flink_agents/durable)", "flink_agents/durable"),
    ("librdkafka client (confluent_kafka)", "confluent_kafka"),
    ("store / pydantic", "pydantic"),
    ("agent engine (flink_agents/runtime)", "flink_agents/runtime"),
    ("agent API (flink_agents/api, integrations)", "flink_agents/"),
    ("asyncio event loop", "asyncio"),
    ("PyFlink operator runtime", "pyflink"),
    ("json", "json"),
    ("threading / locks", "threading"),
]


def child(inputs: int) -> None:
    from bench.cluster import JobSettings, flink_config
    from bench.flink_job import run_job
    from bench.ours import agent_pipeline

    output = run_job(
        "profile",
        agent_pipeline("one_call", 0.5, 1000),
        inputs=inputs,
        keys=10_000,
        configure=flink_config(JobSettings()),
    )
    print(json.dumps(output.stats().__dict__))


def wait_for_interpreter(jvm: int, timeout: float = 180) -> None:
    """Wait until the JVM has loaded libpython (pemja starts it with the first Python task):
    py-spy cannot attach before, and on a loaded machine that takes tens of seconds."""
    maps = Path(f"/proc/{jvm}/maps")
    deadline = time.monotonic() + timeout
    while "libpython" not in maps.read_text():
        if time.monotonic() > deadline:
            raise RuntimeError(f"JVM {jvm} loaded no Python interpreter within {timeout} s")
        time.sleep(0.5)


def area(frame: str) -> str:
    return next((name for name, part in AREAS if part in frame), "other")


def summarize(raw: Path, stats: str, title: str) -> str:
    threads: collections.Counter[str] = collections.Counter()  # "Dummy-1": the operator
    areas: collections.Counter[str] = collections.Counter()
    leaves: collections.Counter[str] = collections.Counter()
    durable: collections.Counter[str] = collections.Counter()  # inclusive, per function
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        frames, count = stack.split(";"), int(count_text)
        total += count
        threads[frames[0].split(": ", 1)[-1] if frames[0].startswith("thread") else "?"] += count
        leaves[frames[-1]] += count
        areas[area(frames[-1])] += count
        for frame in {f for f in frames if "flink_agents/durable" in f}:
            durable[frame.split(" (")[0]] += count

    def share(counter: collections.Counter[str], n: int) -> str:
        return "\n".join(
            f"| {name} | {count / total:.1%} |" for name, count in counter.most_common(n)
        )

    return (
        f"# Profile: {title}\n\n"
        f"py-spy attached to the mini-cluster JVM (thread mode), on-CPU samples over the middle "
        f"of the job. Job: `{stats}`. {total:,} samples.\n\n"
        "| thread (Dummy-1: Flink's operator thread; flink-agents-engine: the engine loop) "
        f"| share |\n|---|---|\n{share(threads, 6)}\n\n"
        "| code area of the sampled frame | share |\n|---|---|\n"
        f"{share(areas, 12)}\n\n| top functions by own time | share |\n|---|---|\n"
        f"{share(leaves, 15)}\n\n"
        "| action-state store functions, inclusive (own time and callees) | share |\n"
        f"|---|---|\n{share(durable, 12)}\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--inputs", type=int, default=30_000)
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--seconds", type=int, default=6)
    parser.add_argument("--operator", help="profile `bench.operator_throughput` with these args")
    args = parser.parse_args()
    if args.child:
        child(args.inputs)
        return
    raw = REPO / ".cache" / "bench-profile.txt"
    if args.operator is None:
        command = ["-m", "bench.hotspots", "--child", "--inputs", str(args.inputs)]
        title = "workload 1, L = 500 ms, 10,000 keys, in-flight bound 1000"
    else:
        command = ["-m", "bench.operator_throughput", *args.operator.split()]
        title = f"bench.operator_throughput {args.operator}"
    job = subprocess.Popen(
        [sys.executable, *command],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    jvm = wait_for_jvm(job.pid)
    wait_for_interpreter(jvm)
    time.sleep(args.warmup)  # job submission, ramp-up
    spy = str(Path(sys.executable).parent / "py-spy")
    subprocess.run(
        [spy, "record", "--pid", str(jvm), "--duration", str(args.seconds), "--rate", "100",
         "--nonblocking", "--threads", "--format", "raw", "-o", str(raw)],
        check=True, capture_output=True,
    )  # fmt: skip
    stdout, _ = job.communicate()
    stats = next(line for line in stdout.splitlines() if line.startswith("{"))
    summary = summarize(raw, stats, title)
    if args.operator is not None:
        print(summary)
        return
    out = REPO / "bench" / "results" / "profile.md"
    out.write_text(summary)
    print(f"wrote {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
