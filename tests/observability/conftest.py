from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.observability.otlp import Receiver, receiving


@pytest.fixture
def otlp_receiver() -> Iterator[Receiver]:
    """A local OTLP/HTTP receiver (see tests/observability/otlp.py)."""
    with receiving() as receiver:
        yield receiver
