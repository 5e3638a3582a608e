"""`flink-agents store inspect`: a key's action states and call results from the store topic
(real broker), summarized without payloads, payloads on request with secret fields redacted."""

from __future__ import annotations

import json
import uuid

import pytest

from flink_agents.cli import main
from flink_agents.durable.store import ActionState, CallResult, InMemoryActionStateStore, RunKey
from flink_agents.durable.store.inspect import key_states, render_states
from flink_agents.durable.store.store_config import StoreConfig
from flink_agents.observability.payloads import PayloadWriter
from flink_agents.testing import agent_plan, run_live
from tests.durable import helpers as h
from tests.durable.helpers import PROBE

SECRET = "sk-inspect-9d8c7b6a"


def _state(key: str, action: str, *calls: CallResult, seq: int = 0) -> ActionState:
    state = ActionState(key=RunKey(agent="a", key=key, seq=seq).action(action, "ev-123456789"))
    for call in calls:
        state.record_call(call)
    return state


def _store() -> InMemoryActionStateStore:
    store = InMemoryActionStateStore()
    store.put(
        _state(
            '"Oslo"',
            "ask",
            CallResult.pending("chat", function="m:chat").succeed(
                {"text": "hi", "api_key": SECRET}
            ),
        )
    )
    again = CallResult.pending("again", attempts=3, failed_attempts=2).fail(ValueError("nope"))
    store.put(_state('"Oslo"', "ask", again, seq=1))
    store.put(_state('"Lisbon"', "ask", CallResult.pending("chat").succeed("other")))
    store.flush()
    return store


def test_a_keys_states_list_status_attempts_payload_type_and_size_but_no_payload():
    lines = list(render_states(key_states(_store(), "Oslo")))
    assert lines[0].startswith('state a "Oslo" #0 ask on ev-12345  in progress  events 0')
    size = len(json.dumps({"text": "hi", "api_key": SECRET}, separators=(",", ":")))
    assert lines[1] == f"  call chat  succeeded  attempts 1  payload json {size} B  m:chat"
    assert lines[2].startswith('state a "Oslo" #1 ask')
    assert lines[3] == "  call again  failed  attempts 3 (2 failed)  error builtins.ValueError"
    assert SECRET not in "\n".join(lines) and len(lines) == 4
    store = _store()
    assert key_states(store, '"Oslo"') == key_states(store, "Oslo")  # JSON works too
    assert key_states(store, "Oslo", agent="b") == []


def test_payloads_are_shown_on_request_with_secret_fields_redacted_and_cut():
    lines = list(render_states(key_states(_store(), "Oslo"), payloads=PayloadWriter(2000)))
    assert lines[2] == '    payload {"text": "hi", "api_key": "<redacted>"}'
    assert lines[5] == '    payload "nope"'
    short = list(render_states(key_states(_store(), "Lisbon"), payloads=PayloadWriter(3)))
    assert short[2] == '    payload {"truncated": "\\"ot", "chars": 7}'


@pytest.mark.kafka
def test_the_command_reads_the_states_a_run_left_on_the_topic(kafka_bootstrap, capsys):
    PROBE.reset()
    topic = f"test-inspect-{uuid.uuid4().hex[:12]}"
    config = StoreConfig(kind="kafka", bootstrap_servers=kafka_bootstrap, topic=topic, partitions=2)
    store = config.build()
    try:
        run_live(agent_plan(h.typed_and_failed), store, {"n": 1}, key="k1")
        run_live(agent_plan(h.three_calls), store, {"n": 5}, key="k2")
        store.flush()
    finally:
        store.close()
        PROBE.reset()

    args = ["store", "inspect", "--topic", topic, "--key", "k1", "--bootstrap", kafka_bootstrap]
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith('state durable "k1" #0 typed_and_failed on ')
    assert "  completed  " in lines[0]
    calls = [line.split("  ")[1:4] for line in lines[1:]]
    assert [c[1] for c in calls] == ["succeeded", "succeeded", "failed", "succeeded"]
    assert "payload " in lines[1] and "payload" not in lines[3]
    assert "error builtins.ValueError" in lines[3]

    assert main([*args, "--payloads"]) == 0
    shown = capsys.readouterr().out
    assert '    payload {"text": "hi"}' in shown
    assert '    payload "boom"' in shown

    missing = [*args[:3], f"{topic}-none", *args[4:]]
    assert main(missing) == 1
    assert "no such topic" in capsys.readouterr().err
