"""Long-term memory as an action uses it: named sets per key with add / upsert / get / search /
delete / delete_key, ids from the run's durable identity, writes committed with the run."""

from __future__ import annotations

import pytest

from flink_agents.api import InputEvent, OutputEvent, RunnerContext, action
from flink_agents.api.long_term_memory import MemorySetFullError
from flink_agents.durable.identity import canonical_json
from flink_agents.runtime.engine import ActionError
from tests.memory_samples import memory_plan, remember, run_keyed


@action(InputEvent)
async def recall(event: InputEvent, ctx: RunnerContext) -> None:
    facts = ctx.long_term_memory["facts"]
    hits = await facts.search(event.input["query"], k=2, filter=event.input.get("filter"))
    ctx.send_event(OutputEvent(output={"hits": [hit.text for hit in hits], "count": len(facts)}))


@action(InputEvent)
async def edit(event: InputEvent, ctx: RunnerContext) -> None:
    facts = ctx.long_term_memory["facts"]
    added = await facts.add("the printer is on floor two", metadata={"topic": "office"})
    same = await facts.upsert("fixed", "the wifi password changed")
    replaced = await facts.upsert("fixed", "the wifi password changed again")
    item = facts.get("fixed")
    ctx.send_event(
        OutputEvent(
            output={
                "added": added,
                "expected_id": ctx.durable_call_key("memory:facts:add:0"),
                "upserted": [same, replaced],
                "text": item.text if item else None,
                "deleted": [facts.delete(added), facts.delete(added)],
                "missing": facts.get(added),
                "count": len(facts),
            }
        )
    )


@action(InputEvent)
async def forget(event: InputEvent, ctx: RunnerContext) -> None:
    ctx.long_term_memory.delete_key()
    ctx.send_event(OutputEvent(output=len(ctx.long_term_memory["facts"])))


@action(InputEvent)
async def remember_then_fail(event: InputEvent, ctx: RunnerContext) -> None:
    await ctx.long_term_memory["facts"].add("never committed")
    raise RuntimeError("the action fails after writing")


@action(InputEvent)
async def ask_undeclared(event: InputEvent, ctx: RunnerContext) -> None:
    ctx.long_term_memory["nowhere"]


def test_an_added_items_id_is_its_writes_durable_identity_and_upsert_replaces() -> None:
    [result], _ = run_keyed(memory_plan(edit), [("k", {})])
    [out] = result.output_values
    assert out["added"] == out["expected_id"]
    assert out["upserted"] == ["fixed", "fixed"]
    assert out["text"] == "the wifi password changed again"
    assert out["deleted"] == [True, False]
    assert (out["missing"], out["count"]) == (None, 1)


def test_the_keys_next_run_finds_the_facts_nearest_first_and_filtered() -> None:
    facts = ["the router is an XR-500", "the customer prefers e-mail", "the router firmware 2.1"]
    _, states = run_keyed(memory_plan(remember), [("ada", {"facts": facts})])
    found, _ = run_keyed(
        memory_plan(recall),
        [
            ("ada", {"query": "which router firmware"}),
            ("ada", {"query": "router", "filter": {"topic": "office"}}),
            ("bob", {"query": "which router firmware"}),
        ],
        states,
    )
    assert [result.output_values for result in found] == [
        [{"hits": ["the router firmware 2.1", "the router is an XR-500"], "count": 3}],
        [{"hits": [], "count": 3}],
        [{"hits": [], "count": 0}],
    ]


def test_keys_keep_their_type_one_and_the_string_one_have_two_memories() -> None:
    _, states = run_keyed(
        memory_plan(remember), [(1, {"facts": ["int key fact"]}), ("1", {"facts": ["str"]})]
    )
    assert set(states) == {canonical_json(1), canonical_json("1")}
    texts = {
        key: [item.text for item in state.long_term_memory["facts"].values()]
        for key, state in states.items()
    }
    assert texts == {"1": ["int key fact"], '"1"': ["str"]}


def test_delete_key_removes_every_item_of_the_key_only() -> None:
    _, states = run_keyed(
        memory_plan(remember), [("a", {"facts": ["x", "y"]}), ("b", {"facts": ["z"]})]
    )
    [result], states = run_keyed(memory_plan(forget), [("a", {})], states)
    assert result.output_values == [0]
    assert states[canonical_json("a")].long_term_memory == {}
    assert len(states[canonical_json("b")].long_term_memory["facts"]) == 1


def test_a_failed_runs_writes_are_dropped() -> None:
    plan = memory_plan(remember_then_fail, error_policy="emit")
    [result], states = run_keyed(plan, [("k", {})])
    assert result.error is not None
    assert states[canonical_json("k")].long_term_memory == {}


def test_a_set_holds_at_most_max_items_per_key() -> None:
    plan = memory_plan(remember, max_items=2)
    _, states = run_keyed(plan, [("k", {"facts": ["one", "two"]}), ("other", {"facts": ["x"]})])
    with pytest.raises(ActionError) as failed:
        run_keyed(plan, [("k", {"facts": ["three"]})], states)
    assert isinstance(failed.value.__cause__, MemorySetFullError)


def test_a_set_must_be_declared() -> None:
    with pytest.raises(ActionError) as failed:
        run_keyed(memory_plan(ask_undeclared), [("k", {})])
    assert "no resource named 'nowhere'" in str(failed.value.__cause__)
