"""Completed actions in the store: their events and memory writes, written and read back."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from flink_agents.api.chat import ChatMessage
from flink_agents.api.events import (
    ChatRequestEvent,
    Event,
    OutputEvent,
    ToolResponseEvent,
    ToolResult,
)
from flink_agents.api.waits import ScheduledInput
from flink_agents.durable.journal import MemoryUpdate, RecordedAction
from flink_agents.durable.journal_codec import read_action, write_action
from flink_agents.durable.store import ActionState, InMemoryActionStateStore, RecordCodec, RunKey
from tests.durable.store.payload_types import Reading

KEY = RunKey(agent="a", key='"k"', seq=0).action("act", "e" * 32)

WHEN = dt.datetime(2026, 12, 1, 10, 0)
EVENTS: list[Event] = [
    ChatRequestEvent(id="1", model="m", messages=[ChatMessage(role="user", content="é 🙂 \u2028")]),
    Reading(id="2", at=WHEN, values=[1.5, -0.0], pair=(1, 2)),
    ToolResponseEvent(
        id="3",
        request_id="1",
        model="m",
        results=[ToolResult(tool_call_id="c", name="n", content="")],
    ),
]


def completed_state(action: RecordedAction) -> ActionState:
    state = ActionState(key=KEY)
    write_action(state, action)
    return state


def test_a_completed_action_is_written_as_its_events_json_form_byte_for_byte():
    # The record as it was written when each event was dumped to JSON-mode dicts first.
    events = [*EVENTS, Reading(id="4", at=WHEN, values=[math.nan, -math.inf], pair=(0, 0))]
    state = completed_state(RecordedAction(events))
    dumped = state.model_copy(
        update={
            "events": [
                {"value": event.model_dump(mode="json"), "value_type": item["value_type"]}
                for event, item in zip(events, state.events, strict=True)
            ]
        }
    )
    codec = RecordCodec(None)
    assert codec.envelope(state, epoch=7) == codec.envelope(dumped, epoch=7)


def test_events_and_memory_writes_come_back_with_their_classes():
    updates = [
        MemoryUpdate(scope="short_term", key="kept", value={"a": [1]}),
        MemoryUpdate(scope="sensory", key="gone", delete=True),
        MemoryUpdate(scope="short_term", key="brief", value=1, expires_at=1_000_000.0),
        MemoryUpdate(
            scope="scheduled", key="f1", value=ScheduledInput(schedule_id="f1", at_ms=5, input=[1])
        ),
    ]
    store = InMemoryActionStateStore()
    store.put(completed_state(RecordedAction(list(EVENTS), updates)))
    stored = store.get(KEY)
    assert stored is not None and stored.completed
    back = read_action(stored)
    assert [type(event) for event in back.events] == [type(event) for event in EVENTS]
    assert back.events == EVENTS
    assert back.memory_updates == updates


def test_a_write_that_does_not_expire_is_journaled_without_an_expiry():
    state = completed_state(RecordedAction([], [MemoryUpdate(scope="short_term", key="k")]))
    assert "expires_at" not in state.memory_updates[0]


def test_an_event_is_snapshotted_when_the_state_is_put():
    event = OutputEvent(id="1", output={"n": 1})
    store = InMemoryActionStateStore()
    state = completed_state(RecordedAction([event]))
    store.put(state)
    event.output["n"] = 2  # the action's event, changed after its completion was put
    stored = store.get(KEY)
    assert stored is not None
    assert read_action(stored).events[0].output == {"n": 1}


def test_a_memory_value_with_no_json_form_is_refused():
    with pytest.raises(Exception, match="no JSON form"):
        completed_state(
            RecordedAction([], [MemoryUpdate(scope="sensory", key="s", value=object())])
        )
