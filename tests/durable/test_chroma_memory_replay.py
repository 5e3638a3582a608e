"""Long-term memory on a Chroma server through the real store path (the ``stores`` fixture: in
memory and on Kafka): with the process killed at seeded moments, 100 runs over 10 keys write 300
facts and Chroma holds exactly 300 items, each under the id its write's identity gives; a replay
shows the model the search results the live run saw, however the set grew since.

The write happens at the call, before the key's state is checkpointed: a crash between the two
leaves the item in Chroma and the run pending, and the replay writes the same id again (docs/
memory.md, "The Chroma backend").

Each seed takes tens of seconds (300 writes to the server, then the replay's): seed 0 runs with
the services' tests, all five with ``FLINK_AGENTS_SLOW_MEMORY=1``."""

from __future__ import annotations

import os
import random
import uuid
from typing import Any

import pytest

from flink_agents.api import ResourceDescriptor
from flink_agents.durable.identity import CallIdentity, canonical_json
from flink_agents.testing import Stores, crash_and_replay
from tests.durable.test_long_term_memory_replay import FACTS_PER_RUN, KEYS, RUNS, tickets
from tests.memory_samples import memory_plan, remember

chromadb = pytest.importorskip("chromadb")

from flink_agents.providers.chroma import ChromaVectorStore  # noqa: E402

pytestmark = pytest.mark.kafka  # needs a Chroma server too: with the services, not the unit run
SEEDS = range(5) if os.environ.get("FLINK_AGENTS_SLOW_MEMORY") == "1" else range(1)


def held(store: ChromaVectorStore, key: Any) -> dict[str, str]:
    """What the server holds of ``key``'s ``facts``: id -> text."""
    namespace = store.memory_namespace("facts", canonical_json(key))
    client = chromadb.HttpClient(host="127.0.0.1", port=int(str(store.url).rsplit(":", 1)[1]))
    try:
        found = client.get_collection(namespace.collection).get(include=["documents"])
    except chromadb.errors.NotFoundError:
        return {}
    return dict(zip(found["ids"], found["documents"], strict=True))


@pytest.mark.parametrize("seed", SEEDS)
def test_crashes_at_seeded_moments_leave_exactly_one_item_per_fact_in_chroma(
    stores: Stores, chroma_url: str, seed: int
) -> None:
    prefix = f"replay-{uuid.uuid4().hex[:12]}"  # this test's collections only
    store = ResourceDescriptor.of(ChromaVectorStore, collection=prefix, url=chroma_url)
    plan = memory_plan(remember, store=store)
    crash_at = random.Random(seed).randint(1, RUNS * FACTS_PER_RUN)  # the n-th embedding call
    inputs = tickets()

    result = crash_and_replay(plan, inputs, key="customer", crash_at=crash_at, stores=stores)

    assert result.crashed
    assert result.reinvoked() == set()
    reader = ChromaVectorStore(collection=prefix, url=chroma_url)
    stored = {
        item_id: text for key in range(KEYS) for item_id, text in held(reader, f"c{key}").items()
    }
    written = [item_id for run in result.results for item_id in run.output_values[0]]
    assert len(stored) == len(written) == RUNS * FACTS_PER_RUN  # none twice
    assert set(stored) == {
        CallIdentity(
            run.run_id, run.run_id.input_event_id, "remember", f"memory:facts:add:{n}"
        ).digest()
        for run in result.results
        for n in range(FACTS_PER_RUN)
    }
    assert sorted(stored.values()) == sorted(text for run in inputs for text in run["facts"])
    for key in range(KEYS):  # each customer's facts in its own namespace
        texts = held(reader, f"c{key}").values()
        assert len(texts) == RUNS // KEYS * FACTS_PER_RUN
        assert all(text.startswith(f"customer c{key} ") for text in texts)
    assert all(state.long_term_memory == {} for state in result.key_states.values())
