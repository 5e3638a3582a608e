"""What the suite measures, full or quick: the matrix and how many inputs each job gets."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Plan:
    latencies: tuple[float, ...]
    keys: tuple[int, ...]
    bounds: tuple[int, ...]
    deep_workloads: tuple[str, ...]  # workloads (2) and (3), swept at the largest key count
    deep_latencies: tuple[float, ...]
    baseline_latencies: tuple[float, ...]
    durability_latencies: tuple[float, ...]
    peer_latencies: tuple[float, ...]
    peer_keys: tuple[int, ...]
    peer_threads: tuple[int, ...]  # 0: the peer's default pool
    recovery_inputs: int
    rebuild_older: tuple[int, ...]
    target_s: float  # measured seconds per job, about
    max_inputs: int


FULL = Plan(
    latencies=(0.0, 0.05, 0.5),
    keys=(100, 10_000),
    bounds=(10, 100, 1000),
    deep_workloads=("react_tools", "subagents"),
    deep_latencies=(0.0, 0.05, 0.5),
    baseline_latencies=(0.0, 0.05, 0.5),
    durability_latencies=(0.0, 0.05, 0.5),
    peer_latencies=(0.0, 0.05, 0.5),
    peer_keys=(100, 10_000),
    peer_threads=(0, 64),
    recovery_inputs=3000,
    rebuild_older=(10_000, 1_000_000),
    target_s=8.0,
    max_inputs=12_000,
)

QUICK = Plan(
    latencies=(0.0, 0.5),
    keys=(10_000,),
    bounds=(100, 1000),
    deep_workloads=("react_tools", "subagents"),
    deep_latencies=(0.0, 0.05),
    baseline_latencies=(0.0, 0.05),
    durability_latencies=(0.0,),
    peer_latencies=(0.05,),
    peer_keys=(10_000,),
    peer_threads=(0, 64),
    recovery_inputs=1500,
    rebuild_older=(10_000, 100_000),
    target_s=3.0,
    max_inputs=3000,
)

MIN_INPUTS = 40


def inputs_for(plan: Plan, expected_rate: float, bound: int = 0) -> int:
    """Enough inputs for about ``target_s`` of steady state at ``expected_rate`` runs/s, and
    at least three times the operator's admission window (2 x ``bound``).

    Why the window: once a bounded source has handed over all its inputs, the final watermark
    fires each key's end-of-input timer, which waits for that key's runs and emits in bursts;
    with fewer inputs than the window the whole job would be that drain, not a steady state.
    """
    wanted = max(MIN_INPUTS, expected_rate * plan.target_s, 3 * 2 * bound)
    return int(min(plan.max_inputs, wanted))


def expected_rate(bound: int, keys: int, depth: int, latency: float, cpu_rate: float) -> float:
    """The ceiling a job can reach: in-flight runs over a run's duration, or the CPU rate.

    At most one run per key is in flight, so the effective bound is ``min(bound, keys)``.
    """
    if latency <= 0:
        return cpu_rate
    return min(min(bound, keys) / (depth * latency), cpu_rate)
