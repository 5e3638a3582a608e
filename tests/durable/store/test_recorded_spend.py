"""The spend recorded with a metered call: kept by the codec on both of its paths, summed by
``store inspect`` (docs/budgets.md)."""

from __future__ import annotations

import pydantic_core

from flink_agents.api.budgets import CallSpend
from flink_agents.durable.store import (
    ActionState,
    CallResult,
    InMemoryActionStateStore,
    RecordCodec,
    RunKey,
)
from flink_agents.durable.store._codec import _body
from flink_agents.durable.store.inspect import key_states, recorded_spend, render_states

SPEND = CallSpend(
    input_tokens=60,
    output_tokens=40,
    model="big",
    cost=0.00014,
    price_version="v1",
    day="2026-12-02",
)


def _spent(call_id: str, spend: CallSpend | None = SPEND) -> CallResult:
    pending = CallResult.pending(call_id, function="m:chat", kind="model")
    if spend is not None:
        pending = pending.model_copy(update={"spend": spend})
    return pending.succeed("answer")


def _state(*calls: CallResult, seq: int = 0) -> ActionState:
    state = ActionState(key=RunKey(agent="a", key='"k"', seq=seq).action("ask", "ev"))
    for call in calls:
        state.record_call(call)
    return state


def test_a_calls_spend_round_trips_and_encodes_as_pydantic_does() -> None:
    state = _state(_spent("chat"))
    codec = RecordCodec(b"secret")
    key = state.key.canonical().encode()
    back = codec.decode(key, codec.encode(key, state), topic="t", partition=0, offset=0)
    assert back == state
    assert _body(state) == pydantic_core.to_json(state, inf_nan_mode="null")


def test_a_call_without_spend_is_written_as_before() -> None:
    state = _state(_spent("chat", spend=None))
    assert b"spend" not in _body(state)
    assert _body(state) == pydantic_core.to_json(state, inf_nan_mode="null")


def test_inspect_sums_a_keys_recorded_spend() -> None:
    store = InMemoryActionStateStore()
    for seq in range(3):
        store.put(_state(_spent("chat"), _spent("tool", spend=None), seq=seq))
    store.flush()
    states = key_states(store, "k")
    spend = recorded_spend(states)
    assert (spend.calls, spend.tokens, spend.input_tokens) == (3, 300, 180)
    lines = list(render_states(states))
    assert "spent 100 tokens" in lines[1]
    assert lines[-1] == (
        "spend  3 metered calls  300 tokens (180 in, 120 out)  cost 0.00042 (prices v1)"
    )
