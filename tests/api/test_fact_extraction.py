"""Extraction: ``remember(text)`` asks the set's chat model for facts (a JSON list of strings) in
one durable call and writes each under an id derived from the run's identity and its position."""

from __future__ import annotations

import json

import pytest

from flink_agents.api import InputEvent, MemoryExtractionError, OutputEvent, RunnerContext, action
from flink_agents.api.fact_extraction import DEFAULT_EXTRACTION_INSTRUCTIONS, facts_of
from flink_agents.durable.identity import canonical_json
from flink_agents.providers import ScriptedChatModelConnection
from flink_agents.runtime.engine import ActionError
from tests.memory_samples import EXTRACTOR, extract, memory_plan, run_keyed
from tests.sample_agents import RecordingChatConnection

FACTS = ["the router is an XR-500", "the customer prefers e-mail"]


@pytest.mark.parametrize(
    "reply",
    [
        json.dumps(FACTS),
        "```json\n" + json.dumps(FACTS, indent=2) + "\n```",
        json.dumps({"facts": FACTS}),
        json.dumps([" the router is an XR-500 ", "", "the customer prefers e-mail", FACTS[0]]),
    ],
    ids=["list", "fenced", "object", "untidy"],
)
def test_a_reply_gives_its_facts_stripped_in_order_without_empties_or_repeats(reply: str) -> None:
    assert facts_of(reply, "here") == FACTS


@pytest.mark.parametrize(
    "reply", ["The customer has an XR-500.", '["one", 2]', '{"items": ["one"]}', '"one"']
)
def test_a_reply_that_is_no_list_of_strings_is_an_error_naming_where(reply: str) -> None:
    with pytest.raises(MemoryExtractionError, match=r"^run of key 'k', call c: the model's reply"):
        facts_of(reply, "run of key 'k', call c")


@action(InputEvent)
async def extract_and_expect(event: InputEvent, ctx: RunnerContext) -> None:
    ids = await ctx.long_term_memory["facts"].remember(event.input["text"])
    expected = [ctx.durable_call_key(f"memory:facts:fact:0:{n}") for n in range(len(ids))]
    ctx.send_event(OutputEvent(output={"ids": ids, "expected": expected}))


def test_each_fact_is_an_item_under_the_id_of_the_runs_identity_and_its_position() -> None:
    ScriptedChatModelConnection.reset_stats(EXTRACTOR)
    plan = memory_plan(extract_and_expect, extraction=True)
    [result], states = run_keyed(plan, [("ada", {"text": json.dumps(FACTS)})])
    [out] = result.output_values
    assert out["ids"] == out["expected"] and len(out["ids"]) == 2
    items = states[canonical_json("ada")].long_term_memory["facts"]
    assert {item_id: item.text for item_id, item in items.items()} == dict(
        zip(out["ids"], FACTS, strict=True)
    )
    assert ScriptedChatModelConnection.stats(EXTRACTOR).total == 1


def test_the_extraction_call_sends_the_instructions_and_the_text_alone() -> None:
    RecordingChatConnection.requests.clear()
    plan = memory_plan(extract, extraction=True, extractor=RecordingChatConnection)
    _, states = run_keyed(plan, [("ada", {"text": json.dumps(FACTS)})])
    [request] = RecordingChatConnection.requests
    RecordingChatConnection.requests.clear()
    assert [(m.role, m.content) for m in request.messages] == [
        ("system", DEFAULT_EXTRACTION_INSTRUCTIONS),
        ("user", json.dumps(FACTS)),
    ]
    assert request.tools == []
    metadata = [item.metadata for item in states['"ada"'].long_term_memory["facts"].values()]
    assert metadata == [{"source": "run"}, {"source": "run"}]


def test_a_reply_without_facts_writes_nothing() -> None:
    [result], states = run_keyed(memory_plan(extract, extraction=True), [("k", {"text": "[]"})])
    assert result.output_values == [[]]
    assert states[canonical_json("k")].long_term_memory == {}


def test_a_malformed_reply_fails_the_run_naming_its_key_and_call() -> None:
    plan = memory_plan(extract, extraction=True)
    with pytest.raises(ActionError) as failed:
        run_keyed(plan, [("ada", {"text": "The customer has an XR-500."})])
    error = failed.value.__cause__
    assert isinstance(error, MemoryExtractionError)
    assert str(error).startswith(
        'the run of key "ada", call memory:facts:extract:0: the model\'s reply is not a JSON '
        "list of strings"
    )


def test_remember_needs_extraction_settings() -> None:
    with pytest.raises(ActionError) as failed:
        run_keyed(memory_plan(extract), [("k", {"text": "[]"})])
    assert "memory set 'facts' has no extraction settings" in str(failed.value.__cause__)
