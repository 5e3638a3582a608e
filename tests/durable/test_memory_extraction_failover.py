"""Extraction through the real store path (``DurableCalls`` over the in-memory store and over
Kafka, the ``stores`` fixture): the model's facts are a recorded call, so a crash between the
extraction and the writes after it (or at any seeded call) never asks the model again and
never writes an item twice."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from flink_agents.durable.identity import CallIdentity
from flink_agents.providers import ScriptedChatModelConnection
from flink_agents.testing import CrashReplayResult, Stores, crash_and_replay
from tests.memory_samples import EXTRACTOR, extract, memory_plan, stored_facts

KEYS = 5
RUNS = 30
FACTS_PER_RUN = 3
CALLS_PER_RUN = 1 + FACTS_PER_RUN  # the extraction, then one embedding per fact


def runs() -> list[dict[str, Any]]:
    """30 runs over 5 customers, each text stating three facts (90 distinct facts)."""
    return [
        {
            "customer": f"c{run % KEYS}",
            "text": json.dumps(
                [f"customer c{run % KEYS} fact {run}-{n}" for n in range(FACTS_PER_RUN)]
            ),
        }
        for run in range(RUNS)
    ]


def _is_extraction(identity: CallIdentity) -> bool:
    return identity.call_id.startswith("memory:facts:extract:")


def _assert_each_fact_once_under_its_id(result: CrashReplayResult) -> None:
    assert result.crashed
    assert result.reinvoked() == set()
    stored = stored_facts(result.key_states)
    # Every id is the one the run's identity and the fact's position give, live or replayed.
    assert set(stored) == {
        CallIdentity(
            run.run_id, run.run_id.input_event_id, "extract", f"memory:facts:fact:0:{n}"
        ).digest()
        for run in result.results
        for n in range(FACTS_PER_RUN)
    }
    assert sorted(stored.values()) == sorted(
        fact for run in runs() for fact in json.loads(run["text"])
    )
    for key, state in result.key_states.items():  # each customer's facts with its key
        texts = [item.text for item in state.long_term_memory["facts"].values()]
        assert len(texts) == RUNS // KEYS * FACTS_PER_RUN
        assert all(text.startswith(f"customer {json.loads(key)} ") for text in texts)
    # Each run's outputs name its items once: the replayed run's are the live run's ids.
    written = [item_id for run in result.results for item_id in run.output_values[0]]
    assert sorted(written) == sorted(stored)


@pytest.fixture(autouse=True)
def fresh_extractor() -> None:
    ScriptedChatModelConnection.reset_stats(EXTRACTOR)


def test_a_crash_between_the_extraction_and_its_writes_asks_the_model_once(
    stores: Stores,
) -> None:
    # The crash: the first fact's embedding starts, the extraction's facts are recorded.
    result = crash_and_replay(
        memory_plan(extract, extraction=True),
        runs(),
        key="customer",
        crash_at=lambda call: call.identity.call_id == "memory:facts:embed:0",
        stores=stores,
    )

    _assert_each_fact_once_under_its_id(result)
    crashed_run = [
        identity
        for identity in result.live.invoked
        if identity.call_id == "memory:facts:embed:0" and identity not in result.live.returned
    ]
    assert len(crashed_run) == 1
    [extraction] = [
        identity
        for identity in result.live.completed
        if _is_extraction(identity) and identity.run == crashed_run[0].run
    ]
    assert result.replay.invoked[extraction] == 0  # its facts handed back from the record
    # One model call per run: the crashed run's was never made again.
    assert ScriptedChatModelConnection.stats(EXTRACTOR).total == RUNS + len(
        {i for i in result.resent() if _is_extraction(i)}
    )


@pytest.mark.parametrize("seed", range(5))
def test_crashes_at_seeded_calls_leave_exactly_one_item_per_fact(stores: Stores, seed: int) -> None:
    crash_at = random.Random(seed).randint(1, RUNS * CALLS_PER_RUN)

    result = crash_and_replay(
        memory_plan(extract, extraction=True),
        runs(),
        key="customer",
        crash_at=crash_at,
        stores=stores,
    )

    _assert_each_fact_once_under_its_id(result)
    made_again = {
        identity
        for identity in result.replay.invoked
        if _is_extraction(identity) and identity in result.live.completed
    }
    assert made_again == set()
