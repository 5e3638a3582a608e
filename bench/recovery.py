"""Recovery after an injected failure on the mini-cluster, with and without the Kafka store.

A map chained after the agent operator raises once, after ``fail_after`` outputs, while runs
are in flight; Flink restarts the job from its last checkpoint (restart delay as configured).
We report the time from the failure to the next output and how many model calls were made
beyond the calls the inputs need (calls re-invoked by the replay). Loopback ("process") mode,
so the scripted model's call counters live in this process.

This is an injected task failure, not a TaskManager kill: the mini-cluster keeps its JVM and
this Python process, so the restart is cheaper than a real TaskManager loss.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from pyflink.common import Types
from pyflink.datastream import MapFunction

from bench.cluster import JobSettings, flink_config
from bench.flink_job import run_job
from bench.ours import agent_pipeline
from bench.workloads import MODEL_CALLS, model_calls_in_flight, model_calls_made
from flink_agents.durable.store.store_config import StoreConfig


class FailOnce(MapFunction):
    """Raises once, at the ``after``-th record, and writes to ``flag`` the time and how many
    model calls were in flight then (loopback mode: the model's counters are in this process;
    those calls may be sent again, as their results were not recorded)."""

    def __init__(self, after: int, flag: str) -> None:
        self._after = after
        self._flag = flag

    def open(self, runtime_context) -> None:
        self._seen = 0

    def map(self, value: str) -> str:
        self._seen += 1
        flag = Path(self._flag)
        if self._seen >= self._after and not flag.exists():
            flag.write_text(f"{time.time():.6f} {model_calls_in_flight()}")
            raise RuntimeError("bench: injected failure")
        return value


@dataclass(frozen=True)
class RecoveryResult:
    store: str
    inputs: int
    outputs: int
    failure_to_next_output_s: float
    calls_needed: int
    calls_reinvoked: int
    calls_in_flight_at_failure: int


def measure(
    store: StoreConfig | None, *, inputs: int, keys: int, latency: float, fail_after: int
) -> RecoveryResult:
    flag = Path(f"/tmp/bench-fail-{uuid.uuid4().hex[:8]}")
    before = model_calls_made()
    settings = JobSettings(mode="process", checkpoint_ms=1000, restart_delay_ms=200)
    output = run_job(
        "recovery",
        agent_pipeline("one_call", latency, max_in_flight=1000, store=store),
        inputs=inputs,
        keys=keys,
        configure=flink_config(settings),
        after=lambda s: s.map(FailOnce(fail_after, str(flag)), output_type=Types.STRING()),
        stamp_inputs=False,
    )
    failed_text, in_flight_text = flag.read_text().split()
    failed_at = float(failed_text)
    flag.unlink()
    later = [t_out for _, t_out in output.pairs if t_out > failed_at]
    needed = inputs * MODEL_CALLS["one_call"]
    return RecoveryResult(
        store="Kafka" if store else "none",
        inputs=inputs,
        outputs=len(output.pairs),
        failure_to_next_output_s=min(later) - failed_at if later else float("nan"),
        calls_needed=needed,
        calls_reinvoked=model_calls_made() - before - needed,
        calls_in_flight_at_failure=int(in_flight_text),
    )
