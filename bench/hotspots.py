"""Where the time goes at the headline point (workload 1, L = 500 ms, 10,000 keys, bound 1000).

Runs one such job in thread mode (as the suite does) and attaches py-spy to the mini-cluster
JVM, whose embedded interpreter (pemja) runs the operator and the engine thread; writes
``results/profile.md``: samples per thread, per code area, and the top functions by own time.

    .venv/bin/python -m bench.hotspots          # needs py-spy in the venv (make bench installs it)
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


def area(frame: str) -> str:
    return next((name for name, part in AREAS if part in frame), "other")


def summarize(raw: Path, stats: str) -> str:
    threads: collections.Counter[str] = collections.Counter()  # "Dummy-1": the operator
    areas: collections.Counter[str] = collections.Counter()
    leaves: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        frames, count = stack.split(";"), int(count_text)
        total += count
        threads[frames[0].split(": ", 1)[-1] if frames[0].startswith("thread") else "?"] += count
        leaves[frames[-1]] += count
        areas[area(frames[-1])] += count

    def share(counter: collections.Counter[str], n: int) -> str:
        return "\n".join(
            f"| {name} | {count / total:.1%} |" for name, count in counter.most_common(n)
        )

    return (
        "# Profile: workload 1, L = 500 ms, 10,000 keys, in-flight bound 1000\n\n"
        f"py-spy attached to the mini-cluster JVM (thread mode), on-CPU samples over the middle "
        f"of the job. Job: `{stats}`. {total:,} samples.\n\n"
        "| thread (Dummy-1: Flink's operator thread; flink-agents-engine: the engine loop) "
        f"| share |\n|---|---|\n{share(threads, 6)}\n\n"
        "| code area of the sampled frame | share |\n|---|---|\n"
        f"{share(areas, 12)}\n\n| top functions by own time | share |\n|---|---|\n"
        f"{share(leaves, 15)}\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--inputs", type=int, default=30_000)
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--seconds", type=int, default=6)
    args = parser.parse_args()
    if args.child:
        child(args.inputs)
        return
    raw = REPO / ".cache" / "bench-profile.txt"
    job = subprocess.Popen(
        [sys.executable, "-m", "bench.hotspots", "--child", "--inputs", str(args.inputs)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    jvm = wait_for_jvm(job.pid)
    time.sleep(args.warmup)  # JVM start, job submission, ramp-up
    spy = str(Path(sys.executable).parent / "py-spy")
    subprocess.run(
        [spy, "record", "--pid", str(jvm), "--duration", str(args.seconds), "--rate", "100",
         "--nonblocking", "--threads", "--format", "raw", "-o", str(raw)],
        check=True, capture_output=True,
    )  # fmt: skip
    stdout, _ = job.communicate()
    stats = next(line for line in stdout.splitlines() if line.startswith("{"))
    out = REPO / "bench" / "results" / "profile.md"
    out.write_text(summarize(raw, stats))
    print(f"wrote {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
