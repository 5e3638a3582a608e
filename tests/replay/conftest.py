"""Each replay test starts from the agent as recorded and fresh call counters."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.replay import agents


@pytest.fixture(autouse=True)
def recorded_behaviour() -> Iterator[None]:
    agents.NOW = agents.Behaviour()
    agents.CALLS.clear()
    yield
    agents.NOW = agents.Behaviour()
