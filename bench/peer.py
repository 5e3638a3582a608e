"""Peer (b): Apache flink-agents on workload (1), each release in its own virtual environment.

A release's venv lives in ``<cache>/peers/flink-agents-<version>`` (the cache is
``$FLINK_AGENTS_CACHE``, else ``.cache``; ignored by git) and is created on first use with ONE
pip command: installing apache-flink separately lets the peer's protobuf pin break Beam's. The
driver (``bench/peers/fa_peer_run.py``) runs there and prints one JSON row per job.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.plan import Plan, inputs_for

REPO = Path(__file__).resolve().parents[1]
# The project's cache (jars, venvs); a worktree points it at the main checkout's.
CACHE = Path(os.environ.get("FLINK_AGENTS_CACHE", REPO / ".cache"))
DRIVER = REPO / "bench" / "peers" / "fa_peer_run.py"
FLINK = "apache-flink==2.2.1"
PEER_CPU_RATE = 400.0  # runs/s at L = 0 seen here; only sizes the jobs


@dataclass(frozen=True)
class PeerRelease:
    """One installable Apache flink-agents release and the venv it runs in."""

    version: str

    @property
    def venv(self) -> Path:
        return CACHE / "peers" / f"flink-agents-{self.version}"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def requirements(self) -> list[str]:
        return [f"flink-agents=={self.version}", FLINK]

    def ensure_installed(self) -> None:
        """Create the venv once; a stamp file marks a complete install."""
        stamp = self.venv / ".installed"
        if stamp.exists():
            return
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(self.venv)], check=True)
        install = [str(self.python), "-m", "pip", "install", "-q", *self.requirements]
        subprocess.run(install, check=True)
        stamp.touch()


PEER = PeerRelease("0.2.0")
"""The release of the suite's peer section."""


@dataclass(frozen=True)
class StoreTopic:
    """Where one job's Kafka action-state store writes (the peer's: ``actionStateStoreBackend:
    kafka``, with these as its ``kafkaBootstrapServers`` and topic options)."""

    bootstrap: str
    topic: str
    partitions: int


def default_threads() -> int:
    """The peer's default ``num-async-threads``: twice the CPU count."""
    return 2 * (os.cpu_count() or 1)


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


def run_cases(release: PeerRelease, jobs: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Run ``jobs`` (driver cases) on ``release``, one mini-cluster job each, in one process.

    A case may carry ``store`` (a :class:`StoreTopic` as a dict) to turn the peer's Kafka
    action-state store on for that job.
    """
    release.ensure_installed()
    # Not the repo as cwd or on PYTHONPATH: our package is also called flink_agents.
    env = {**os.environ, "PYTHONPATH": str(DRIVER.parent)}
    process = subprocess.Popen(
        [str(release.python), "-u", str(DRIVER), json.dumps(jobs)],
        cwd=release.venv.parent, env=env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("{"):
            yield json.loads(line)
    if process.wait() != 0:
        raise RuntimeError(
            f"peer driver (flink-agents {release.version}) failed with exit code "
            f"{process.returncode}"
        )


def run(plan: Plan) -> Iterator[dict[str, Any]]:
    """The suite's peer section: :data:`PEER` without its store, default and larger pool."""
    for row in run_cases(PEER, cases(plan)):
        pool = row["threads"] or default_threads()
        yield {"section": "peer", "workload": "one_call", "bound": pool, **row}
