"""The mini-cluster configuration every job of this project's side runs with."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from flink_agents.flink.job import JobSpec


@dataclass(frozen=True)
class JobSettings:
    """How the mini-cluster runs one job."""

    mode: str = "thread"  # PyFlink Python execution mode; "process" = loopback locally
    checkpoint_ms: int = 1000
    restart_delay_ms: int = 1000


def flink_config(settings: JobSettings):
    """A ``configure`` for :func:`bench.flink_job.run_job`: the project's job configuration
    (from a JobSpec, as ``flink-agents run`` would set it) with checkpoints in the work folder."""

    def configure(work: Path) -> dict[str, str]:
        spec = JobSpec(
            name="bench",
            agent="unused",
            source={"kind": "list", "path": "unused"},
            key="k",
            execution_mode=settings.mode,
            accept_slow_process_mode=True,  # the bench measures process mode on purpose
            checkpointing={"interval_ms": settings.checkpoint_ms, "dir": str(work / "ckpt")},
            restart_strategy={"delay_ms": settings.restart_delay_ms},
        )
        return spec.flink_config()

    return configure
