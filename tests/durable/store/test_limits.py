"""The record limit (``max_record_bytes``): every store refuses a larger record before writing
it, the memory store as the Kafka store (the ``stores`` fixture: the real broker), and the
configuration refuses a limit the producer could not send."""

from __future__ import annotations

import os

import pytest

from flink_agents.durable.store import (
    DEFAULT_MAX_RECORD_BYTES,
    ActionState,
    CallResult,
    OutcomeTooLargeError,
    RecordTooLargeError,
    RunKey,
    check_outcome_fits,
)
from flink_agents.durable.store.store_config import StoreConfig
from flink_agents.testing import Stores

KEY = RunKey(agent="a", key='"k"', seq=0).action("act", "e1")


def _state(payload: str) -> ActionState:
    state = ActionState.opened(KEY)
    started = CallResult.pending("c", function="m.f", started_at=1.0)  # fixed: a fixed size
    state.record_call(started.succeed(payload, finished_at=2.0))
    return state


def test_the_default_limit_fits_the_default_producer_and_broker() -> None:
    config = StoreConfig(kind="kafka", bootstrap_servers="127.0.0.1:9092")
    assert config.max_record_bytes == DEFAULT_MAX_RECORD_BYTES == 960 * 1024
    assert config.message_max_bytes == 1_000_000  # librdkafka's default message.max.bytes
    assert DEFAULT_MAX_RECORD_BYTES < 1_048_588  # the broker's default message.max.bytes


def test_a_limit_the_producer_cannot_send_is_refused_naming_both() -> None:
    with pytest.raises(ValueError, match=r"max_record_bytes \(999,000\).*message_max_bytes"):
        StoreConfig(max_record_bytes=999_000)
    raised = StoreConfig(max_record_bytes=2_000_000, message_max_bytes=2_100_000)
    assert raised.build().max_record_bytes == 2_000_000  # a memory store takes it too


def test_every_store_refuses_a_record_over_the_limit_before_writing(stores: Stores) -> None:
    store = stores.first
    fits = _state("x" * 1000)
    store.put(fits)
    size = store.record_size(fits)
    assert 1000 < size < 2000

    too_large = _state("x" * (3 * 1024 * 1024))
    with pytest.raises(RecordTooLargeError) as caught:
        store.put(too_large)
    error = caught.value
    assert error.limit == DEFAULT_MAX_RECORD_BYTES
    assert error.size == store.record_size(too_large) > 3 * 1024 * 1024
    assert KEY.canonical() in str(error) and f"{error.limit:,}" in str(error)
    store.flush()
    # Nothing of the refused write reached the log; the earlier state is the latest.
    restored = stores.restored()
    state = restored.get(KEY)
    assert state is not None and state.calls[0].value() == "x" * 1000


def test_an_outcome_over_the_limit_is_named_with_its_size_and_the_limit(stores: Stores) -> None:
    state = ActionState.opened(KEY)
    started = CallResult.pending("tool:c1", function="tools.dump")
    with pytest.raises(OutcomeTooLargeError) as caught:
        check_outcome_fits(stores.first, state, started.succeed("y" * (2 * 1024 * 1024)))
    message = str(caught.value)
    assert "'tool:c1' (tools.dump)" in message
    assert f"{DEFAULT_MAX_RECORD_BYTES:,}" in message and "max_record_bytes" in message
    assert not isinstance(caught.value, RecordTooLargeError)  # the call's failure, not infra


def test_a_record_of_exactly_the_default_limit_is_written_and_read_back(stores: Stores) -> None:
    store = stores.first
    filler = os.urandom(DEFAULT_MAX_RECORD_BYTES).hex()  # incompressible
    base = store.record_size(_state(""))
    exact = _state(filler[: DEFAULT_MAX_RECORD_BYTES - base])
    assert store.record_size(exact) == DEFAULT_MAX_RECORD_BYTES
    store.put(exact)
    store.flush()  # the real broker, with its default message.max.bytes, takes it
    state = stores.restored().get(KEY)
    assert state is not None and state.calls[0].value() == exact.calls[0].value()
    with pytest.raises(RecordTooLargeError):
        store.put(_state(filler[: DEFAULT_MAX_RECORD_BYTES - base + 1]))
