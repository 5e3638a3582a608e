"""The benchmark suite: every section in its own process, then the table and the plots.

    make bench                      # full suite, ~30 min on 2 cores
    make bench BENCH_ARGS=--quick   # smoke run, a few minutes

Writes ``bench/results/raw.jsonl`` (one row per job), ``results.md`` and PNG plots. Each
section runs in a fresh process with its own mini-cluster; a failing section is reported in
the table and the others still run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

from bench.sections import SECTIONS

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
ORDER = ["ours", "baseline", "peer", "durability", "recovery", "rebuild"]


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def machine() -> dict[str, Any]:
    cpu = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")), platform.processor(),
    )  # fmt: skip
    mem_kb = int(Path("/proc/meminfo").read_text().split()[1])
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    return {
        "machine": f"{os.cpu_count()} CPUs ({cpu}), {mem_kb / 1024 / 1024:.0f} GiB RAM",
        "versions": f"Python {platform.python_version()}, apache-flink {version('apache-flink')}, "
        f"confluent-kafka {version('confluent-kafka')} (the store's client), "
        "peer flink-agents 0.2.0 (own venv)",
        "commit": commit,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small matrix, for smoke use")
    parser.add_argument("--sections", nargs="+", choices=ORDER, default=ORDER)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--report-only", action="store_true", help="redraw from raw.jsonl")
    args = parser.parse_args()
    assert set(ORDER) == set(SECTIONS)

    RESULTS.mkdir(parents=True, exist_ok=True)
    raw = RESULTS / "raw.jsonl"
    meta: dict[str, Any] = {}
    started = time.time()
    if not args.report_only:
        meta_file = RESULTS / "meta.json"
        raw.unlink(missing_ok=True)
        load_before = load()
        failed = []
        for section in args.sections:
            command = [sys.executable, "-m", "bench.sections", section, "--out", str(raw)]
            command += ["--bootstrap", args.bootstrap, *(["--quick"] if args.quick else [])]
            print(f"== {section}", flush=True)
            t0 = time.time()
            if subprocess.run(command, cwd=REPO).returncode != 0:
                failed.append(section)
            print(f"== {section}: {time.time() - t0:.0f} s", flush=True)
        if not args.quick and args.sections == ORDER:
            # Where the time goes at the headline point (results/profile.md); needs py-spy.
            spy = [sys.executable, "-m", "pip", "install", "-q", "py-spy"]
            if (
                subprocess.run(spy, cwd=REPO).returncode != 0
                or subprocess.run([sys.executable, "-m", "bench.hotspots"], cwd=REPO).returncode
            ):
                failed.append("profile")
        argv = " ".join(sys.argv[1:])
        meta = {
            "command": f"`make bench{' BENCH_ARGS=' + repr(argv) if argv else ''}` "
            f"(= `.venv/bin/python -m bench.suite {argv}`)",
            "mode": "quick" if args.quick else "full",
            "date": time.strftime("%Y-%m-%d %H:%M %Z"),
            **machine(),
            "wall time": f"{(time.time() - started) / 60:.1f} min",
            "load average (1, 5, 15 min) before / after": f"{load_before} / {load()} "
            "(2 cores shared with other sessions' tests)",
            "failed_sections": failed,
        }
        meta_file.write_text(json.dumps(meta, indent=1))
    else:
        meta = json.loads((RESULTS / "meta.json").read_text())
    rows = [json.loads(line) for line in raw.read_text().splitlines() if line.strip()]
    from bench.report import write

    for path in write(rows, meta, RESULTS):
        print(f"wrote {path.relative_to(REPO)}")


if __name__ == "__main__":
    main()
