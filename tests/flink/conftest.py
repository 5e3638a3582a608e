"""Fixtures for tests that run agents on the PyFlink mini-cluster."""

from __future__ import annotations

import pytest


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
