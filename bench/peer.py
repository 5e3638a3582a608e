"""Peer (b): Apache flink-agents 0.2.0 on workload (1), in its own virtual environment.

The venv lives in ``.cache/peers/flink-agents-0.2.0`` (ignored by git) and is created on first
use with ONE pip command: installing apache-flink separately lets the peer's protobuf pin break
Beam's. The driver (``bench/peers/fa_peer_run.py``) runs there and prints one JSON row per job.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.plan import Plan, inputs_for

REPO = Path(__file__).resolve().parents[1]
VENV = REPO / ".cache" / "peers" / "flink-agents-0.2.0"
PYTHON = VENV / "bin" / "python"
REQUIREMENTS = ["flink-agents==0.2.0", "apache-flink==2.2.1"]
PEER_CPU_RATE = 400.0  # runs/s at L = 0 seen here; only sizes the jobs


def default_threads() -> int:
    """The peer's default ``num-async-threads``: twice the CPU count."""
    return 2 * (os.cpu_count() or 1)


def ensure_installed() -> None:
    stamp = VENV / ".installed"
    if stamp.exists():
        return
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
    subprocess.run([str(PYTHON), "-m", "pip", "install", "-q", *REQUIREMENTS], check=True)
    stamp.touch()


def cases(plan: Plan) -> list[dict[str, Any]]:
    rows = []
    for latency in plan.peer_latencies:
        for keys in plan.peer_keys:
            for threads in plan.peer_threads:
                pool = threads or default_threads()
                rate = min(pool / latency, PEER_CPU_RATE) if latency else PEER_CPU_RATE
                inputs = inputs_for(plan, rate)
                rows.append(
                    {"latency": latency, "keys": keys, "threads": threads, "inputs": inputs}
                )
    return rows


def run(plan: Plan) -> Iterator[dict[str, Any]]:
    ensure_installed()
    driver = REPO / "bench" / "peers" / "fa_peer_run.py"
    work = VENV.parent
    # Not the repo as cwd or on PYTHONPATH: our package is also called flink_agents.
    env = {**os.environ, "PYTHONPATH": str(driver.parent)}
    process = subprocess.Popen(
        [str(PYTHON), "-u", str(driver), json.dumps(cases(plan))],
        cwd=work, env=env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("{"):
            row = json.loads(line)
            pool = row["threads"] or default_threads()
            yield {"section": "peer", "workload": "one_call", "bound": pool, **row}
    if process.wait() != 0:
        raise RuntimeError(f"peer driver failed with exit code {process.returncode}")
