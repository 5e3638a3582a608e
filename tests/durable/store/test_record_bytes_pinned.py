"""Records of every shape, byte for byte: envelopes and record keys pinned against values
computed on main at fb00321, before records were built and written more cheaply
(bench/results/analysis.md, "The store's records, cheaper to build and write").

Each case is a state as the runtime makes it (`RunKey.action`, `ActionState(...)`,
`CallResult.pending`, `succeed`, `fail`, `write_action`) holding values whose JSON form is an
edge: non-finite floats, integers beyond 64 bits, non-ASCII and escaped text, datetimes,
tuples, enums, dataclasses, models, str subclasses, a pickled payload, a failed call.
"""

from __future__ import annotations

import datetime as dt
import enum
import hashlib
import math

from flink_agents.api.chat import ChatMessage
from flink_agents.api.events import OutputEvent
from flink_agents.durable.journal import MemoryUpdate, RecordedAction
from flink_agents.durable.journal_codec import write_action
from flink_agents.durable.store import (
    ActionState,
    CallError,
    CallResult,
    RecordCodec,
    RunInput,
    RunKey,
)
from flink_agents.durable.store import _codec as codec_module
from tests.durable.store.payload_types import Opaque, Point, Reading, Reply

RUN = RunKey(agent="agent ü", key='{"k":[1,"\\u2028"]}', seq=12)
WHEN = dt.datetime(2026, 12, 1, 10, 0, 30, 250000)


class Colour(str, enum.Enum):
    RED = "red"


class Tag(str):
    """A subclass of str: pydantic and orjson write such values their own ways."""


def _pending(call_id: str) -> CallResult:
    return CallResult.pending(
        call_id,
        function="f.g",
        args_digest="d" * 64,
        arguments='{\n "args": []\n}',
        attempts=2,
        started_at=1700000000000.125,
    )


def _states() -> dict[str, ActionState]:
    fresh = ActionState(key=RUN.action("start", "e" * 32), run_input=RunInput(value=None))
    fresh.run_input = RunInput(value={"k": 1, "text": 'é 北京 \u2028 "q"\n'}, admitted_at=0.5)
    whole = ActionState(key=RUN.action("whole"))
    completed = ActionState(key=RUN.action("done", "f" * 32))
    events = [
        OutputEvent(id="o1", output={"big": 2**70, "neg": -(2**65), "u": "\ud7ff\ue000 🙂"}),
        Reading(id="r1", at=WHEN, values=[math.nan, -math.inf, 1e-7, 1e16, -0.0], pair=(1, 2)),
        OutputEvent(id="o2", output=[Colour.RED, Tag("tag"), (1, 2.5), Point(3, 4)]),
    ]
    updates = [
        MemoryUpdate(scope="short_term", key="m", value={"a": [1, math.inf], "t": (True,)}),
        MemoryUpdate(scope="sensory", key="p", value=Point(1, 2)),
        MemoryUpdate(scope="short_term", key="r", value=Reply(text="ä", tokens=2**64)),
        MemoryUpdate(scope="sensory", key="gone", delete=True),
    ]
    write_action(completed, RecordedAction(events, updates))
    calls = ActionState(key=RUN.action("calls", "a" * 32))
    calls.record_call(_pending("p"))
    calls.record_call(
        _pending("s").succeed(
            ChatMessage(role="assistant", content="ok \u2028"), ChatMessage, finished_at=2.0
        )
    )
    calls.record_call(_pending("plain").succeed({"x": [math.nan, 2**80]}, finished_at=3.0))
    calls.record_call(_pending("tuple").succeed((1, Colour.RED, WHEN), finished_at=4.5))
    calls.record_call(_pending("model").succeed(Reply(text="r", tokens=1), finished_at=5.0))
    calls.record_call(_pending("failed").fail(CallError(type="E", message="m\n"), finished_at=5.5))
    # An int where a float is declared (`finished_at` is not validated): pydantic writes 8.0.
    calls.record_call(_pending("int time").succeed(1, finished_at=8))
    calls.record_call(_pending("raised").fail(ValueError("bad ü"), finished_at=6.0))
    write_action(calls, RecordedAction([OutputEvent(id="o3", output=None)]))
    pickled = ActionState(key=RUN.action("pickled", "b" * 32))
    pickled.record_call(_pending("pickle").succeed(Opaque(1), finished_at=7.0))
    # The values of these two orjson writes itself (no int beyond 64 bits, no declared field
    # holding another type): the cases above send such records to pydantic as a whole.
    finished = ActionState(key=RUN.action("finished", "c" * 32))
    finished.record_call(_pending("q"))
    finished.record_call(
        _pending("s").succeed(
            ChatMessage(role="assistant", content="é \u2028 \x00"), ChatMessage, finished_at=2.5
        )
    )
    finished.record_call(
        _pending("plain").succeed(
            {"f": [math.nan, math.inf, 1e-7, 1e16, -0.0, 5e-324], "b": [True, None], "i": -(2**63)},
            finished_at=3.0,
        )
    )
    finished.record_call(_pending("text").succeed(Tag("tagged"), finished_at=4.0))
    finished.record_call(
        _pending("failed").fail(CallError(type="E", message="m\n"), finished_at=5.5)
    )
    write_action(
        finished,
        RecordedAction(
            [OutputEvent(id="o4", output={"n": 2**63 - 1})],
            [MemoryUpdate(scope="short_term", key="k", value=[Colour.RED, Tag("t"), 2.5])],
        ),
    )
    started = ActionState(key=RUN.action("started", "d" * 32))
    started.run_input = RunInput(value={"c": Colour.RED, "t": Tag("t"), "f": 1.5}, admitted_at=1.25)
    started.record_call(_pending("pickle").succeed(Opaque(2), finished_at=7.0))
    return {
        "fresh": fresh,
        "whole": whole,
        "completed": completed,
        "calls": calls,
        "pickled": pickled,
        "finished": finished,
        "started": started,
    }


def _fingerprint(key: bytes, value: bytes) -> str:
    return hashlib.sha256(key + b"\n" + value).hexdigest()


def _without_traces(state: ActionState) -> ActionState:
    # A raised exception's trace names this file's lines: pinned without it.
    for call in state.calls:
        if call.error is not None and call.error.trace is not None:
            call.error = call.error.model_copy(update={"trace": "(trace)"})
    return state


#: sha256 of record key + newline + record value per case, computed on main at fb00321.
PINNED = {
    "fresh": "7d3ae9ea63d78c41a9061cc12317a7d6747d09281bfb903ac1fffb0c7f80e296",
    "whole": "ae30370c60e353111a1d268038d17d35649905142587bc73e0d12564d976d7ff",
    "completed": "12ec892dbf515c07095c3bb323b5694e09cccf6370a71e5229df5269fce6c85b",
    "calls": "2f61672c7bb780992bbd3f8b5b6a85533a1c7221f135c829dfb4f9e4b6c7090f",
    "pickled": "c1ccb404ff46800f54d5661907ed409d5ae69f51e2ceef29d42ebf66c381bcb2",
    "finished": "14e84a6d471a2b5a9eef903d8c82409567a0ff54c2ff2060fbab2e3b5c67761b",
    "started": "67ff1a5816f3457f034e41d5af271fd6175f308a49f4ed3719206739849521ea",
}


def test_records_are_pinned_byte_for_byte():
    codec = RecordCodec(b"secret")
    for name, state in _states().items():
        state = _without_traces(state)
        key = state.key.canonical().encode("utf-8")
        value = codec.seal(key, codec.envelope(state, epoch=1796154032143572809))
        assert _fingerprint(key, value) == PINNED[name], name


def test_records_the_runtime_makes_are_written_by_orjson_the_others_by_pydantic(monkeypatch):
    # Which path wrote a body: pydantic is handed the whole record only when orjson is not.
    handed: list[type] = []
    to_json = codec_module.pydantic_core.to_json

    def spy(value, **options):
        handed.append(type(value))
        return to_json(value, **options)

    monkeypatch.setattr(codec_module.pydantic_core, "to_json", spy)
    codec = RecordCodec(b"secret")
    by_pydantic = set()
    for name, state in _states().items():
        handed.clear()
        codec.envelope(_without_traces(state))
        if ActionState in handed:
            by_pydantic.add(name)
    # "calls": a payload holds an int beyond 64 bits, a `finished_at` an int. The events and
    # models of "completed" (ints beyond 64 bits inside) are written by pydantic, in place.
    assert by_pydantic == {"calls"}
