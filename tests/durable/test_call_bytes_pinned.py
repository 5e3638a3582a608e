"""A live call's record, byte for byte: pinned against values computed before the call path
was made cheaper (bench/results/analysis.md, "The durable call's interpreter work per run").

Signatures (digest and recorded text of the arguments) and the envelope of a call's record
must not change by a byte: records of earlier versions replay against them.
"""

from __future__ import annotations

import hashlib

from flink_agents.api.chat import ChatMessage, ChatRequest, ToolCall
from flink_agents.durable.mismatch import CallSignature
from flink_agents.durable.store import ActionState, CallResult, RecordCodec, RunInput, RunKey
from tests.durable.store.payload_types import Point, Reply


def _chat(messages, request=None):  # the function a signature labels; never called
    raise AssertionError


MESSAGES = [
    ChatMessage(role="system", content="be brief"),
    ChatMessage(
        role="assistant",
        content='quote " ü 北京 \u2028',
        tool_calls=[ToolCall(id="t1", name="lookup", arguments={"b": [1, 2.5], "a": None})],
    ),
]
#: A model whose JSON dump holds non-finite floats: its digest maps them (`to_canonical`).
REQUEST = ChatRequest(messages=MESSAGES, temperature=float("inf"), extra={"z": float("nan")})

SIGNATURE_CASES = {
    "messages": ((MESSAGES,), {}),
    "request with non-finite floats": ((REQUEST,), {}),
    "models, dataclass, plain values, kwargs": (
        (Reply(text="hi", tokens=3), Point(1, 2), [1, "x", None], 1.5),
        {"k": {"b": 1, "a": [True]}, "m": Reply(text="é", tokens=-1)},
    ),
    "a non-finite float outside a model": (({"n": [float("-inf")]}, 3), {}),
}

#: sha256 of (digest, text) per case, computed on main at 0fb3399.
PINNED_SIGNATURES = {
    "messages": "ef0eb27794f79a3090348f02efd0aabb4bbabbcca73488f156cd908addd75d4c",
    "request with non-finite floats": (
        "bb7ceefa63d512abfb88da29975756e759e05e38804bf91f491c4cd9e5bc6078"
    ),
    "models, dataclass, plain values, kwargs": (
        "60e50a670e3377e12831d2eabaf4d8f038835b3595f24ce0f5df3b1b02bfc724"
    ),
    "a non-finite float outside a model": (
        "e09f69bdb74e5c9b24675cdf67e597f41ba566bae7800ec6821b1bc219143fa0"
    ),
}


def _fingerprint(signature: CallSignature) -> str:
    text = f"{signature.function}\n{signature.args_digest}\n{signature.arguments}"
    return hashlib.sha256(text.encode()).hexdigest()


def test_call_signatures_are_pinned():
    for name, (args, kwargs) in SIGNATURE_CASES.items():
        signature = CallSignature.of("chat", _chat, args, kwargs)
        assert _fingerprint(signature) == PINNED_SIGNATURES[name], name


def test_a_call_record_is_pinned_byte_for_byte():
    signature = CallSignature.of("chat", _chat, (MESSAGES,), {})
    started = CallResult.pending(
        "chat",
        function=signature.function,
        args_digest=signature.args_digest,
        arguments=signature.arguments,
        attempts=0,
        started_at=1700000000000.25,
    )
    reply = ChatMessage(role="assistant", content="ok", tool_calls=MESSAGES[1].tool_calls)
    done = started.succeed(reply, ChatMessage, finished_at=1700000000001.5)
    run = RunKey(agent="bench", key='{"k":1}', seq=3)
    state = ActionState(
        key=run.action("chat_action", "e" * 32),
        run_input=RunInput(value={"k": 1, "text": "q"}, admitted_at=1.5),
    )
    state.record_call(started)
    pending_bytes = RecordCodec().envelope(state, epoch=17)
    state.record_call(done)
    done_bytes = RecordCodec().envelope(state, epoch=17)
    assert done.value(ChatMessage) == reply
    assert hashlib.sha256(pending_bytes).hexdigest() == (
        "84b4780b622d83feaa35eac1e9c7d9309167bc4d5ee30d4225dc9ee88b2919cd"
    )
    assert hashlib.sha256(done_bytes).hexdigest() == (
        "45223dde78dc95364695634519aeb7b5a566d260b63413fa5cf977b8b39cae0f"
    )
    assert state.key.canonical() == (
        '{"action":"chat_action","agent":"bench","event_id":"' + "e" * 32 + '","key":"{\\"k\\":1}",'
        '"seq":3}'
    )
