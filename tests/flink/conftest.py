"""Fixtures for tests that run agents on the PyFlink mini-cluster."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flink_agents.flink.job import JobSpec


def job_spec_settings(checkpoint_dir: Path, **fields: Any) -> dict[str, str]:
    """The Flink configuration a job spec with these fields gets (as ``flink-agents run`` sets
    it); the agent and source are placeholders, since tests build their pipelines themselves."""
    checkpointing = {"dir": str(checkpoint_dir), **fields.pop("checkpointing", {})}
    spec = JobSpec(
        name="test",
        agent="unused",
        source={"kind": "list", "path": "unused"},
        key="k",
        checkpointing=checkpointing,
        **fields,
    )
    return spec.flink_config()


@pytest.fixture()
def fresh_flink_env(flink_env):
    """The session's mini-cluster environment with this test's pipeline only.

    PyFlink keeps transformations on the environment until executed; clearing them lets tests
    share one JVM (start-up costs ~10 s) without running each other's pipelines.
    """
    transformations = flink_env._j_stream_execution_environment.getTransformations()
    if transformations.size() > 0:  # py4j's clear() fails on an empty list
        transformations.clear()
    return flink_env


@pytest.fixture()
def make_flink_env(flink_env) -> Callable[..., object]:
    """A new environment with extra settings, in the session's JVM (the default execution mode,
    loopback, runs Python functions in this process, so tests can read model counters)."""
    from pyflink.common import Configuration
    from pyflink.datastream import StreamExecutionEnvironment

    def make(**settings: str):
        config = Configuration()
        config.set_string("python.executable", sys.executable)
        config.set_string("python.client.executable", sys.executable)
        for name, value in settings.items():
            config.set_string(name, value)
        env = StreamExecutionEnvironment.get_execution_environment(config)
        env.set_parallelism(1)
        return env

    return make
