"""Long-term memory on a vector store (docs/memory.md, "The Chroma backend"): a memory set
declared with ``backend="vector_store"`` keeps each key's items in a Chroma collection of its
own, written when the action writes; keys keep their type; ``delete_key`` drops the key's
collections; a restore from an older checkpoint leaves later writes (and deletes) in place; the
metrics count memory's work.

Chroma here is the real one, embedded (a folder per test): the same client calls as against a
server (tests/durable/test_chroma_memory_replay.py runs those, with the Kafka store).
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from examples.customer_memory import with_memory
from flink_agents.api import (
    Agent,
    InputEvent,
    LongTermMemorySetup,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents.api.long_term_memory import MemoryBackendError, StoredMemory, memory_backend
from flink_agents.durable.identity import canonical_json
from flink_agents.observability import EventLog, MetricsListener
from flink_agents.observability.sinks.metrics import (
    MEMORY_BYTES_WRITTEN,
    MEMORY_DELETES,
    MEMORY_ITEMS,
    MEMORY_SEARCHES,
    MEMORY_WRITES,
)
from flink_agents.plan import compile_agent
from flink_agents.plan.errors import PlanValidationError
from flink_agents.providers.memory_vector_store import InMemoryVectorStore
from flink_agents.runtime import Runtime
from flink_agents.runtime.engine import ActionError
from tests.memory_samples import DIMENSIONS, memory_plan, remember, run_keyed
from tests.observability.sinks.test_metrics import RecordingSink

chromadb = pytest.importorskip("chromadb")

from flink_agents.providers.chroma import ChromaVectorStore  # noqa: E402
from flink_agents.providers.chroma_memory import ChromaMemoryNamespace  # noqa: E402


def chroma(folder: Path) -> ResourceDescriptor:
    return ResourceDescriptor.of(ChromaVectorStore, collection="memory", path=str(folder))


def items(folder: Path, key: Any) -> dict[str, str]:
    """What Chroma holds of the ``facts`` set for ``key``: id -> text."""
    namespace = ChromaVectorStore(collection="memory", path=str(folder)).memory_namespace(
        "facts", canonical_json(key)
    )
    client = chromadb.PersistentClient(path=str(folder))
    try:
        found = client.get_collection(namespace.collection).get(include=["documents"])
    except chromadb.errors.NotFoundError:
        return {}
    return dict(zip(found["ids"], found["documents"], strict=True))


@action(InputEvent)
async def remember_and_recall(event: InputEvent, ctx: RunnerContext) -> None:
    """Add the input's ``facts``, then output the set's size and the best hit of ``ask``."""
    facts = ctx.long_term_memory["facts"]
    for text in event.input.get("facts", []):
        await facts.add(text, metadata={"n": len(text)})
    hits = await facts.search(event.input.get("ask", "anything"), k=1)
    ctx.send_event(OutputEvent(output={"count": len(facts), "best": [h.text for h in hits]}))


@action(InputEvent)
async def remember_or_forget(event: InputEvent, ctx: RunnerContext) -> None:
    """Delete the key's memory when the input says ``forget`` (outputs the set's size after),
    else remember its ``facts``."""
    if event.input.get("forget"):
        ctx.long_term_memory.delete_key()
        ctx.send_event(OutputEvent(output=len(ctx.long_term_memory["facts"])))
    else:
        await remember(event, ctx)


def test_a_set_on_chroma_keeps_each_keys_items_there_not_in_the_keys_state(
    tmp_path: Path,
) -> None:
    plan = memory_plan(remember_and_recall, store=chroma(tmp_path))

    results, states = run_keyed(
        plan,
        [
            (1, {"facts": ["int one likes tea"]}),
            ("1", {"facts": ["str one likes coffee", "str one has a cat"]}),
            (1, {"ask": "what does one drink?"}),
        ],
    )

    assert [r.output_values[0]["count"] for r in results] == [1, 2, 1]
    assert results[2].output_values[0]["best"] == ["int one likes tea"]  # not "1"'s coffee
    assert sorted(items(tmp_path, 1).values()) == ["int one likes tea"]
    assert sorted(items(tmp_path, "1").values()) == ["str one has a cat", "str one likes coffee"]
    assert all(state.long_term_memory == {} for state in states.values())


def test_a_replayed_write_replaces_its_item_in_chroma(tmp_path: Path) -> None:
    """A key restored from the checkpoint before its run (the run pending) runs it again: the
    same ids are written again, the set does not grow."""
    plan = memory_plan(remember, store=chroma(tmp_path))
    _, before = run_keyed(plan, [("ada", {"facts": ["first"]})])

    async def run_then_replay() -> list[Any]:
        outputs = []
        for _ in range(2):  # live, then from the same checkpoint: the second input pending
            engine = Runtime.build(plan).engine
            engine.restore_key("ada", before[canonical_json("ada")])
            engine.submit("ada", {"facts": ["second", "third"]})
            await engine.drain()
            outputs.extend(r.output_values[0] for r in engine.take_results())
            await engine.close()
        return outputs

    live, replayed = asyncio.run(run_then_replay())

    assert live == replayed
    assert sorted(items(tmp_path, "ada").values()) == ["first", "second", "third"]


def test_delete_key_drops_the_keys_items_in_chroma_and_a_restore_does_not_bring_them_back(
    tmp_path: Path,
) -> None:
    plan = memory_plan(remember_or_forget, store=chroma(tmp_path))
    _, older = run_keyed(plan, [("ada", {"facts": ["one", "two"]}), ("bob", {"facts": ["kept"]})])

    results, _ = run_keyed(plan, [("ada", {"forget": True})])
    assert results[0].output_values == [0]
    assert items(tmp_path, "ada") == {}
    assert list(items(tmp_path, "bob").values()) == ["kept"]

    # A restore from the checkpoint before the delete: the key's state comes back, but its
    # items were in Chroma, not in the state; they stay deleted.
    run_keyed(plan, [("ada", {"facts": []})], states=older)
    assert items(tmp_path, "ada") == {}


def test_a_restore_from_an_older_checkpoint_leaves_the_items_written_after_it(
    tmp_path: Path,
) -> None:
    """The items a run wrote after the checkpoint stay in Chroma (the restored key state does not
    hold them); the source reads that input again and its run writes the same ids: no
    duplicate."""
    plan = memory_plan(remember, store=chroma(tmp_path))
    _, checkpoint = run_keyed(plan, [("ada", {"facts": ["before"]})])
    run_keyed(plan, [("ada", {"facts": ["after the checkpoint"]})], states=checkpoint)
    written = items(tmp_path, "ada")

    run_keyed(plan, [("bob", {"facts": ["another key"]})], states=checkpoint)
    assert items(tmp_path, "ada") == written  # restored, the input not read again yet

    run_keyed(plan, [("ada", {"facts": ["after the checkpoint"]})], states=checkpoint)
    assert items(tmp_path, "ada") == written  # read again: the same ids, written again
    assert sorted(written.values()) == ["after the checkpoint", "before"]


@action(InputEvent)
async def note(event: InputEvent, ctx: RunnerContext) -> None:
    """Add a note to the ``notes`` set, then remember the input's facts."""
    await ctx.long_term_memory["notes"].add("a note in the key's state")
    await remember(event, ctx)


def test_keyed_state_and_chroma_sets_live_side_by_side(tmp_path: Path) -> None:
    agent = with_memory(Agent(name="memory"), DIMENSIONS, store=chroma(tmp_path))
    agent.add_resource(
        "notes",
        ResourceType.LONG_TERM_MEMORY,
        ResourceDescriptor.of(LongTermMemorySetup, embedding_model="embedding_model"),
    )
    agent.add_action(note)

    _, states = run_keyed(compile_agent(agent), [("ada", {"facts": ["a fact in chroma"]})])

    assert list(items(tmp_path, "ada").values()) == ["a fact in chroma"]
    state = states[canonical_json("ada")].long_term_memory
    assert list(state) == ["notes"]
    assert [item.text for item in state["notes"].values()] == ["a note in the key's state"]


def test_memory_work_is_counted_in_the_metrics(tmp_path: Path) -> None:
    plan = memory_plan(remember_and_recall, store=chroma(tmp_path))
    metrics, sink = MetricsListener(), RecordingSink()

    async def scenario() -> None:
        engine = Runtime.build(plan, event_log=EventLog([metrics])).engine
        engine.submit("ada", {"facts": ["one", "two"]})
        engine.submit("bob", {"facts": ["three"]})
        engine.submit("ada", {"facts": ["four"]})
        await engine.drain()
        await engine.close()

    asyncio.run(scenario())
    metrics.publish(sink)

    assert sink.counters[MEMORY_SEARCHES] == 3
    assert sink.counters[MEMORY_WRITES] == 4
    assert sink.counters[MEMORY_DELETES] == 0
    assert sink.counters[MEMORY_BYTES_WRITTEN] > 4 * DIMENSIONS * 8  # at least the vectors
    assert sorted(sink.samples[MEMORY_ITEMS]) == [1, 2, 3]  # the key's set after each run


def test_a_vector_store_that_cannot_keep_memory_is_named() -> None:
    plan = memory_plan(remember, store=ResourceDescriptor.of(InMemoryVectorStore, dimensions=64))

    with pytest.raises(TypeError, match="vector store 'memory_store' \\(InMemoryVectorStore\\)"):
        run_keyed(plan, [("ada", {"facts": ["one"]})])


def test_a_vector_store_backend_needs_its_store() -> None:
    with pytest.raises(MemoryBackendError, match="needs a vector_store resource"):
        memory_backend({"embedding_model": "e", "backend": "vector_store"}, {})
    with pytest.raises(ValueError, match="not 'keyed_state'"):
        LongTermMemorySetup(embedding_model="e", backend="keyed_state", vector_store="s")


def agent_with_default_backend(folder: Path, **config: Any) -> Agent:
    """An agent with ``facts`` (no backend of its own) and ``notes`` (``keyed_state``), whose
    config names the default backend; ``memory_store`` is a Chroma store in ``folder``."""
    agent = with_memory(Agent(name="memory", config=config), DIMENSIONS)
    agent.add_resource("memory_store", ResourceType.VECTOR_STORE, chroma(folder))
    agent.add_resource(
        "notes",
        ResourceType.LONG_TERM_MEMORY,
        ResourceDescriptor.of(
            LongTermMemorySetup, embedding_model="embedding_model", backend="keyed_state"
        ),
    )
    agent.add_action(note)
    return agent


def test_the_agents_default_backend_keeps_the_sets_that_name_none(tmp_path: Path) -> None:
    agent = agent_with_default_backend(
        tmp_path,
        long_term_memory_backend="vector_store",
        long_term_memory_vector_store="memory_store",
    )

    _, states = run_keyed(compile_agent(agent), [("ada", {"facts": ["a fact in chroma"]})])

    assert list(items(tmp_path, "ada").values()) == ["a fact in chroma"]  # facts: the default
    assert list(states[canonical_json("ada")].long_term_memory) == ["notes"]  # its own backend


@pytest.mark.parametrize(
    ("config", "pointer", "message"),
    [
        ({"long_term_memory_backend": "redis"}, "/config/long_term_memory_backend", "'redis'"),
        (
            {"long_term_memory_backend": "vector_store"},
            "/resources/facts/arguments",
            "needs a vector_store resource",
        ),
        (
            {"long_term_memory_backend": "vector_store", "long_term_memory_vector_store": "x"},
            "/config/long_term_memory_vector_store",
            "no resource named 'x'",
        ),
    ],
)
def test_a_bad_default_backend_is_refused_at_compile(
    tmp_path: Path, config: dict[str, str], pointer: str, message: str
) -> None:
    with pytest.raises(PlanValidationError) as error:
        compile_agent(agent_with_default_backend(tmp_path, **config))
    assert any(
        issue.path == pointer and message in issue.message for issue in error.value.issues
    ), error.value.issues


def test_an_unknown_backend_is_named_when_the_engine_is_built() -> None:
    """A plan that skipped the compiler's checks (built by hand) is refused by the engine."""
    plan = memory_plan(remember)
    plan = plan.model_copy(update={"config": {"long_term_memory_backend": "redis"}})
    with pytest.raises(MemoryBackendError, match="unknown long-term memory backend 'redis'"):
        Runtime.build(plan)


def test_an_engine_for_offline_replay_keeps_vector_store_sets_in_the_keys_state(
    tmp_path: Path,
) -> None:
    """The offline replayer's engine (``vector_store_memory=False``) never writes to the job's
    Chroma: the replayed runs' items are kept in the key's state."""
    plan = memory_plan(remember_or_forget, store=chroma(tmp_path))
    run_keyed(plan, [("ada", {"facts": ["live"]})])

    async def replayed() -> Any:
        engine = Runtime.build(plan, vector_store_memory=False).engine
        engine.submit("ada", {"facts": ["replayed"]})
        engine.submit("ada", {"forget": True})
        engine.submit("ada", {"facts": ["after"]})
        await engine.drain()
        state = engine.snapshot_key("ada")
        await engine.close()
        return state

    state = asyncio.run(replayed())

    assert list(items(tmp_path, "ada").values()) == ["live"]  # untouched, not deleted
    assert [item.text for item in state.long_term_memory["facts"].values()] == ["after"]


def test_chroma_writes_are_made_off_the_engines_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writing_threads: set[int] = set()
    write = ChromaMemoryNamespace._write

    def noting(self: ChromaMemoryNamespace, call: Any) -> None:
        writing_threads.add(threading.get_ident())
        write(self, call)

    monkeypatch.setattr(ChromaMemoryNamespace, "_write", noting)
    results, _ = run_keyed(
        memory_plan(remember_and_recall, store=chroma(tmp_path)),
        [("ada", {"facts": ["one", "two"]}), ("ada", {"ask": "one"})],
    )

    assert writing_threads and threading.get_ident() not in writing_threads  # the loop's
    assert [r.output_values[0]["count"] for r in results] == [2, 2]  # its own writes read


def test_other_keys_runs_go_on_while_a_keys_chroma_write_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    released = threading.Event()
    write = ChromaMemoryNamespace._write

    def slow_for_ada(self: ChromaMemoryNamespace, call: Any) -> None:
        if self._metadata["key"] == canonical_json("ada"):
            assert released.wait(30)
        write(self, call)

    monkeypatch.setattr(ChromaMemoryNamespace, "_write", slow_for_ada)
    plan = memory_plan(remember, store=chroma(tmp_path))

    async def scenario() -> tuple[list[Any], list[Any]]:
        engine = Runtime.build(plan).engine
        engine.submit("ada", {"facts": ["held up"]})
        engine.submit("bob", {"facts": ["goes through"]})
        first: list[Any] = []
        while not first:  # bob's run finishes while ada's write is held
            first += [r.key for r in await engine.wait_for_results(timeout=30)]
        released.set()
        await engine.drain()
        rest = [r.key for r in engine.take_results()]
        await engine.close()
        return first, rest

    first, rest = asyncio.run(scenario())
    assert (first, rest) == (["bob"], ["ada"])
    assert list(items(tmp_path, "ada").values()) == ["held up"]


def test_a_keys_chroma_writes_are_made_in_the_order_of_its_run(tmp_path: Path) -> None:
    namespace = ChromaVectorStore(collection="memory", path=str(tmp_path)).memory_namespace(
        "facts", canonical_json("ada")
    )
    vector = [1.0] + [0.0] * (DIMENSIONS - 1)
    for n in range(20):  # none waited for: each write queued behind the one before
        namespace.upsert("a", StoredMemory(text=f"version {n}", embedding=vector))
        if n % 3 == 0:
            namespace.delete("a")
    found = namespace.get("a")  # a read waits for the writes in flight
    assert found is not None and found.text == "version 19"


@pytest.mark.parametrize("policy", ["emit", "fail"])
def test_a_failed_chroma_write_is_the_error_of_the_action_that_made_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: str
) -> None:
    def down(self: ChromaMemoryNamespace, call: Any) -> None:
        raise ConnectionError("chroma is down")

    monkeypatch.setattr(ChromaMemoryNamespace, "_write", down)
    plan = memory_plan(remember, store=chroma(tmp_path), error_policy=policy)

    if policy == "fail":
        with pytest.raises(ActionError, match="chroma is down"):
            run_keyed(plan, [("ada", {"facts": ["lost?"]})])
        return
    [result], _ = run_keyed(plan, [("ada", {"facts": ["lost?"]})])
    assert result.error is not None
    assert (result.error.action, result.error.error_type) == ("remember", "ConnectionError")
    assert "chroma is down" in result.error.message
