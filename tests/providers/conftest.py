"""Fixtures of the provider tests: a fake model server per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.providers.fake_servers import FakeModelServer


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as fake:
        yield fake
