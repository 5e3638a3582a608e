"""The batching operator between two agents: lists of ``every`` answers per key, the rest at
the input's end, the answers kept as JSON and handed on as objects of the answer type."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from flink_agents.flink.batches import BatchKey, CountBatches, in_batches
from flink_agents.flink.operator import END_OF_INPUT
from flink_agents.runtime.json_records import object_key_selector
from flink_agents.runtime.typed_outputs import JsonOutputs, PythonOutputType


class Analysis(BaseModel):
    product: str
    score: int


class _ListState:
    def __init__(self) -> None:
        self.items: list[str] = []

    def get(self) -> list[str]:
        return list(self.items)

    def add(self, item: str) -> None:
        self.items.append(item)

    def clear(self) -> None:
        self.items = []


class _Context:
    def __init__(self) -> None:
        self.event_timers: list[int] = []

    def timer_service(self) -> _Context:
        return self

    def register_event_time_timer(self, at: int) -> None:
        self.event_timers.append(at)


def _batches(every: int, answer_type: Any) -> tuple[CountBatches, _ListState, _Context]:
    function = CountBatches(every, answer_type)
    state = _ListState()
    function._waiting = state  # what open() takes from the runtime context
    return function, state, _Context()


def test_a_list_leaves_once_every_answers_are_in_in_the_order_they_came() -> None:
    function, state, ctx = _batches(2, PythonOutputType(Analysis))
    first = list(function.process_element(Analysis(product="kettle", score=5), ctx))
    second = list(function.process_element(Analysis(product="kettle", score=1), ctx))
    assert first == []
    assert second == [[Analysis(product="kettle", score=5), Analysis(product="kettle", score=1)]]
    assert state.items == []
    # The first answer of a list asks to be visited when a bounded input ends.
    assert ctx.event_timers == [END_OF_INPUT]


def test_the_answers_wait_as_json_and_the_input_end_hands_on_the_rest() -> None:
    function, state, ctx = _batches(3, PythonOutputType(Analysis))
    list(function.process_element(Analysis(product="kettle", score=3), ctx))
    assert state.items == ['{"product":"kettle","score":3}']
    assert list(function.on_timer(END_OF_INPUT, ctx)) == [[Analysis(product="kettle", score=3)]]
    assert list(function.on_timer(END_OF_INPUT, ctx)) == []  # nothing left: no empty list


def test_untyped_answers_are_handed_on_as_json_values() -> None:
    function, _, ctx = _batches(1, JsonOutputs())
    assert list(function.process_element({"product": "kettle"}, ctx)) == [[{"product": "kettle"}]]


def test_a_list_is_keyed_by_its_first_answer() -> None:
    batch = [Analysis(product="kettle", score=5), Analysis(product="kettle", score=1)]
    assert BatchKey("product")(batch) == "kettle"
    assert BatchKey(lambda analysis: analysis.product.upper())(batch) == "KETTLE"


@pytest.mark.parametrize("every", [0, -1, 2.5, True])
def test_every_is_a_whole_number_of_answers(every: Any) -> None:
    with pytest.raises(ValueError, match="every must be a whole number"):
        in_batches(None, "product", every, JsonOutputs(), "batches:x")  # type: ignore[arg-type]


def test_a_list_of_answers_without_the_key_is_keyed_null_which_the_next_agent_refuses() -> None:
    # The agent operator reports an input keyed "null" as a BadRecord dead letter.
    assert object_key_selector(BatchKey("product"))([{"sentiment": "positive"}]) == "null"
