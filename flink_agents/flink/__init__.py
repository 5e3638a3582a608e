"""The PyFlink adapter: a keyed operator that runs the engine, the execution environment, and
job specs (``jobs/*.yaml``) and how they are built and run.

This is the only package that imports pyflink; the engine below it knows nothing of Flink.
:func:`build_job` and :func:`job_environment` (the job runner's ``build`` and ``environment``)
load on first use: the runner is also the ``python -m flink_agents.flink.job_runner`` entry point
a cluster executes, which must not be imported before it runs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from flink_agents.flink.environment import AgentInput, AgentsExecutionEnvironment, ExactlyOnce
from flink_agents.flink.job import (
    CheckpointingSpec,
    DeadLetterSpec,
    FileSinkSpec,
    JobSpec,
    KafkaSinkSpec,
    KafkaSourceSpec,
    ListSourceSpec,
    RestartStrategySpec,
    StageSpec,
    StdoutSinkSpec,
    load_job,
)
from flink_agents.flink.sql_spec import SqlSinkSpec, SqlSourceSpec
from flink_agents.runtime.options import OperatorOptions

if TYPE_CHECKING:
    from flink_agents.flink.job_runner import build as build_job
    from flink_agents.flink.job_runner import environment as job_environment

__all__ = [
    "AgentInput",
    "AgentsExecutionEnvironment",
    "CheckpointingSpec",
    "DeadLetterSpec",
    "ExactlyOnce",
    "FileSinkSpec",
    "JobSpec",
    "KafkaSinkSpec",
    "KafkaSourceSpec",
    "ListSourceSpec",
    "OperatorOptions",
    "RestartStrategySpec",
    "SqlSinkSpec",
    "SqlSourceSpec",
    "StageSpec",
    "StdoutSinkSpec",
    "build_job",
    "job_environment",
    "load_job",
]

_RUNNER = {"build_job": "build", "job_environment": "environment"}
"""The job runner's functions this face exports, by the name they have here."""


def __getattr__(name: str) -> Any:
    attribute = _RUNNER.get(name)
    if attribute is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module("flink_agents.flink.job_runner"), attribute)
