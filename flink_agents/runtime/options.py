"""Settings of the keyed agent logic, and so of the Flink operator that hosts it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class OperatorOptions(BaseModel):
    """How the keyed operator runs the engine.

    The defaults suit one slot on a small machine: up to 1,000 runs in flight (model calls are
    I/O-bound, so the window, not the CPU, limits throughput at high latency).
    """

    model_config = ConfigDict(extra="forbid")

    max_in_flight: int = Field(
        default=1000, ge=1, description="Runs executing at once in one operator instance."
    )
    max_unfinished: int | None = Field(
        default=None,
        ge=1,
        description="Inputs accepted but not finished before the operator applies back-pressure "
        "(default: 2 x max_in_flight).",
    )
    poll_interval_ms: int = Field(
        default=10,
        ge=1,
        description="Shortest wait between visits of a key with a run in flight.",
    )
    max_poll_ms: int = Field(
        default=100,
        ge=1,
        description="Longest wait between visits of a key whose run is overdue (still going "
        "past its expected end).",
    )
    max_first_poll_ms: int = Field(
        default=2000,
        ge=0,
        description="Cap on the wait for a running input's expected end (its start plus the "
        "learned run duration).",
    )

    marker_interval_ms: int = Field(
        default=1000,
        ge=10,
        description="How often the action-state store's recovery marker is refreshed.",
    )
    marker_wait_ms: int = Field(
        default=2000,
        ge=0,
        description="After a restart, how long inputs of new keys (no recovery marker in their "
        "state) wait for a key that carries one before the store reads its whole topic.",
    )
    started_from_savepoint: bool = Field(
        default=False,
        description="Set when the job starts from a savepoint or a retained checkpoint: Flink "
        "does not tell Python functions that their state was restored, and without this a first "
        "attempt whose first key is new skips restoring the action-state store (calls of runs "
        "in flight at the savepoint would be made again).",
    )
    prune_after_ms: int = Field(
        default=60_000,
        ge=0,
        description="States of runs that ended longer ago than this are pruned (tombstoned). "
        "Restoring a checkpoint older than this may call those runs' calls again.",
    )
    idle_key_ms: int = Field(
        default=60_000,
        ge=0,
        description="How long a key with nothing in flight stays in the engine's memory after "
        "it was last busy; then only its Flink state holds it, and its next input or timer "
        "restores it from there. Bounds the operator's memory by the keys busy lately, not "
        "every key the job has seen.",
    )
    metrics: bool = Field(
        default=True,
        description="Publish the runtime's metrics (group flink_agents: runs, calls, tokens, "
        "runs in flight, latencies; docs/operations.md) to Flink. Off, no metric group is "
        "registered and nothing is counted.",
    )
    python_log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO",
        description="Level of the Python worker's root logger. PyFlink's thread mode sets it to "
        "DEBUG and hands every record to the JVM, so a library that logs on a hot path costs "
        "CPU (kafka-python's per-write DEBUG records took a third of the worker's).",
    )
    heartbeat_timeout_ms: int = Field(
        default=50_000,
        ge=1,
        description="The cluster's ``heartbeat.timeout`` (Flink's default 50 s). With "
        "``heartbeat_interval_ms`` it sets the freeze fence: a process frozen for longer than "
        "their difference may have been declared lost, so its engine sends no more calls "
        "(flink_agents/durable/freeze_fence.py).",
    )
    heartbeat_interval_ms: int = Field(
        default=10_000,
        ge=0,
        description="The cluster's ``heartbeat.interval`` (Flink's default 10 s).",
    )

    kill_points: str | None = Field(
        default=None,
        description="Test only: fail the job at these kill points, ``point@n[,point@n...]`` "
        "(flink_agents/durable/faults.py; docs/reliability.md). Never set in production.",
    )
    kill_markers_dir: str | None = Field(
        default=None,
        description="Test only: folder where each kill point that fired leaves a marker file, "
        "so a restarted worker does not fire it again.",
    )

    @model_validator(mode="after")
    def _heartbeat_leaves_a_fence(self) -> OperatorOptions:
        if self.heartbeat_interval_ms >= self.heartbeat_timeout_ms:
            raise ValueError("heartbeat_interval_ms must be below heartbeat_timeout_ms")
        return self

    @property
    def unfinished_bound(self) -> int:
        return self.max_unfinished or 2 * self.max_in_flight

    @property
    def freeze_fence_s(self) -> float:
        """The longest freeze the engine survives: one after which the JobManager, which
        counts ``heartbeat.timeout`` from the last heartbeat it heard (up to an interval before
        the freeze), may have declared this TaskManager lost."""
        return (self.heartbeat_timeout_ms - self.heartbeat_interval_ms) / 1000
