"""How a :class:`RecordedAction` is written into an :class:`ActionState` and read back.

Events and memory values keep their class through the store's payload encoding (a pydantic
model or dataclass is stored with its ``module:qualname``). Fields typed ``Any`` inside an event
come back in their JSON form, and values without any JSON form are refused: keep event payloads
and memory JSON-like (as Flink state requires anyway).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from flink_agents.api.events import Event
from flink_agents.durable.journal import MemoryUpdate, RecordedAction
from flink_agents.durable.store import (
    PICKLE_TAG,
    ActionState,
    PayloadError,
    decode_payload,
    encode_payload,
    type_tag,
)


def write_action(state: ActionState, action: RecordedAction) -> None:
    """Mark ``state`` completed with the events and memory writes of ``action``. An event stays
    its model in ``state`` until the store encodes the state (a state read back from the store
    holds each event's JSON form)."""
    state.complete()
    # Filled in place: assigning a field runs pydantic's `__setattr__` in Python, per field.
    state.events[:] = [_encode(event, "event") for event in action.events]
    state.memory_updates[:] = [
        {**update.model_dump(exclude={"value"}), **_encode(update.value, update.key)}
        for update in action.memory_updates
    ]


def unwrite_action(state: ActionState) -> None:
    """Undo :func:`write_action`: ``state`` holds its calls only and is not completed (for a
    completion too large for the store's record: the action runs again on a replay, with its
    calls handed back, as after a completion lost in a crash)."""
    state.__dict__["completed"] = False
    state.events.clear()
    state.memory_updates.clear()


def read_action(state: ActionState) -> RecordedAction:
    """The :class:`RecordedAction` of a completed ``state``."""
    events = [_decode(item) for item in state.events]
    if not all(isinstance(event, Event) for event in events):
        raise PayloadError(f"action state {state.key.canonical()} holds an event of another type")
    updates = [
        MemoryUpdate(
            scope=item["scope"],
            key=item["key"],
            delete=item["delete"],
            value=_decode(item),
            expires_at=item.get("expires_at"),
        )
        for item in state.memory_updates
    ]
    return RecordedAction(events, updates)


def _encode(value: Any, what: str) -> dict[str, Any]:
    if isinstance(value, BaseModel):
        # Kept as the model until the state is encoded: the store's serializer writes the
        # JSON form `encode_payload` would dump it to, in the same pass (a dump to dicts
        # first, serialized again, cost as much once more for every event).
        return {"value": value, "value_type": type_tag(type(value))}
    payload, tag = encode_payload(value)
    if tag == PICKLE_TAG:
        raise PayloadError(
            f"{what}: a {type(value).__name__} has no JSON form; the action journal keeps "
            "events and memory as JSON (use JSON values, pydantic models or dataclasses)"
        )
    return {"value": payload, "value_type": tag}


def _decode(item: dict[str, Any]) -> Any:
    return decode_payload(item["value"], item["value_type"])
