import dataclasses
import datetime as dt
import enum
import json
import subprocess
import sys

import pytest

from flink_agents.durable.identity import CallIdentity, RunId, digest, event_id
from flink_agents.durable.store import (
    ArgumentDigestError,
    canonical_arguments,
    canonical_arguments_and_digest,
    canonical_json,
    digest_arguments,
)
from flink_agents.durable.store._canonical import digest_canonical
from tests.durable.store.payload_types import Point, Reading, Reply


class Color(enum.Enum):
    RED = "red"


def test_digest_ignores_dict_order_and_distinguishes_values():
    a = digest_arguments((1,), {"x": {"b": 1, "a": 2}})
    b = digest_arguments((1,), {"x": {"a": 2, "b": 1}})
    assert a == b
    assert a != digest_arguments((1,), {"x": {"a": 2, "b": 2}})
    assert digest_arguments((1, 2), {}) != digest_arguments((2, 1), {})


def test_models_dataclasses_and_rich_values_are_normalized():
    args = (Reply(text="hi", tokens=3), Point(1, 2), Color.RED, b"\x00", dt.date(2024, 1, 2))
    assert digest_arguments(args, {}) == digest_arguments(
        ({"text": "hi", "tokens": 3}, {"x": 1, "y": 2}, "red", b"\x00", "2024-01-02"), {}
    )


def test_default_repr_is_rejected_and_documented_repr_fallback_is_used():
    with pytest.raises(ArgumentDigestError, match="object address"):
        digest_arguments((object(),), {})

    class Named:
        def __repr__(self) -> str:
            return "Named(1)"

    assert digest_arguments((Named(),), {}) == digest_arguments((Named(),), {})


def test_canonical_json_rejects_nan_and_sorts_keys():
    assert canonical_json({"b": 1, "a": [1, "é"]}) == '{"a":[1,"é"],"b":1}'
    with pytest.raises(ValueError):
        canonical_json(float("nan"))


def test_digest_is_stable_across_processes_with_hash_randomisation():
    code = (
        "from flink_agents.durable.store import digest_arguments;"
        "print(digest_arguments(({'q', 'w', 'e', 'r', 't', 'y'},), {'k': frozenset('abcdef')}))"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={"PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2", "3")
    }
    assert len(digests) == 1


def test_dataclass_type_itself_is_not_treated_as_instance():
    @dataclasses.dataclass
    class D:
        x: int

    # A class object has no stable JSON form: its repr carries no address, so it falls back.
    assert digest_arguments((D,), {}) == digest_arguments((D,), {})


def test_digest_is_pinned_so_records_of_earlier_versions_still_replay():
    from flink_agents.api.chat import ChatMessage, ChatRequest

    request = ChatRequest(messages=[ChatMessage(role="user", content="héllo")])
    args = (request, {"n": [1, 2.5, float("inf")], 3: None, "b": b"\x00"})
    assert digest_arguments(args, {"k": {"z": [True], "a": "x"}}) == (
        "11f12fa4019c83f4f32ad5b271c1507695dfa78d16ee6050258a271898cb0717"
    )


CANONICAL_CASES = [
    ["event", ["agent ä", {"user": "ü 北京", "n": [1, 2.5, True, None]}, 7], None, None, 0],
    {"b": {"d": [], "c": {}}, "a": 'quote " backslash \\ nul \x00 ls \u2028 🙂'},
    [1e300, -0.0, 0.1, 10**30, -(2**63), False],
    "just text",
    3,
    None,
]


@pytest.mark.parametrize("value", CANONICAL_CASES)
def test_canonical_json_is_the_text_of_the_standard_encoder(value):
    # Every identity, record key and digest ever written is this text: not a byte may change.
    reference = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    assert canonical_json(value) == reference


def test_canonical_json_errors_leave_the_next_call_unaffected():
    circular: list[object] = []
    circular.append(circular)
    with pytest.raises(ValueError, match="Circular"):
        canonical_json(circular)
    with pytest.raises(TypeError):
        canonical_json([{"a": object()}])
    with pytest.raises(ValueError):
        canonical_json({"x": [float("inf")]})
    shared = [1]
    assert canonical_json([shared, shared]) == "[[1],[1]]"  # shared is not circular


def test_identity_digests_are_pinned():
    run = RunId("agent ä", {"user": "ü 北京", "n": [1, 2.5, True, None]}, 7)
    assert event_id(run, None, None, 0) == "d0c099e56ecd80ab0692fdf602e8cc4b"
    assert CallIdentity(run, "e" * 32, "act", "#0").digest() == "b1f235dd7b2500d2d6f8f7ef4f22060d"
    args = ([{"role": "user", "content": 'q"0\\ \u2028'}], 1.0, -0.0, 10**20)
    assert digest_arguments(args, {"k": {"b": 1, "a": [None]}}) == (
        "6732903f7f294c4d5def06245fca28b9b3b8476c099173768816f112a2e95cad"
    )


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        (
            (Reply(text="hi", tokens=3), [Reply(text="ü", tokens=0)]),
            {"r": Reply(text="", tokens=1)},
        ),
        ((Point(1, 2), {3: Reply(text="x", tokens=2)}, (1.5, None)), {}),
        ((Reading(at=dt.datetime(2024, 1, 2), values=[1.0, float("nan")], pair=(1, 2)),), {}),
        (
            ({"n": float("inf")},),
            {"m": Reading(at=dt.datetime(2024, 1, 2), values=[-0.0], pair=(3, 4))},
        ),
    ],
)
def test_arguments_and_digest_without_walking_dumps_are_those_of_the_walk(args, kwargs):
    arguments = canonical_arguments(args, kwargs)
    assert canonical_arguments_and_digest(args, kwargs) == (arguments, digest_canonical(arguments))


def test_a_runs_input_event_id_is_the_event_id_it_always_was():
    run = RunId("agent ä", {"user": "ü 北京", "n": [1, 2.5, True, None]}, 7)
    assert run.input_event_id == "d0c099e56ecd80ab0692fdf602e8cc4b"  # as pinned above
    assert event_id(run, None, None, 0) == run.input_event_id
    assert event_id(run, None, None, "0") != run.input_event_id
    assert event_id(run, None, None, False) != run.input_event_id  # type: ignore[arg-type]
    same = RunId("agent ä", {"user": "ü 北京", "n": [1, 2.5, True, None]}, 7)
    assert same == run and str(same) == str(run)  # the cached id is no field


@pytest.mark.parametrize(
    ("run", "upstream_id", "action", "ordinal", "pinned"),
    [  # digests computed before event ids were written around the run's cached text
        (
            RunId("agent", {"k": 1, "a": ["é", None]}, 3),
            "e" * 32,
            "react_start",
            0,
            "ab421ecb5ce2803f36578908eda9c258",
        ),
        (RunId("agent", 7, 0), "e" * 32, "chat_action", 2, "830629835bcf087469d50383b491d2c3"),
        (
            RunId('a"gent', "κλειδί\n", 12),
            "f" * 32,
            "act\u2028ion",
            "error",
            "5048b595d2ca4e08bc3c8a0a0a9cb7e6",
        ),
        (
            RunId("agent", [1, 2.5, True], 1),
            None,
            "scope:child",
            0,
            "d685a33ed70c3ceb67a8d9a8ded4bbad",
        ),
        (RunId("agent", "k", 0), None, None, 1, "4739c8f9e24b27041ad68f830454677f"),
        (RunId("agent", "k", 0), "u", None, 0, "b2e9cfba9dbccfda51c2e2526a9c850a"),
    ],
)
def test_sent_event_ids_are_pinned(run, upstream_id, action, ordinal, pinned):
    assert event_id(run, upstream_id, action, ordinal) == pinned
    as_digested = digest(["event", run.as_list(), upstream_id, action, ordinal])
    assert as_digested == pinned


def test_event_ids_of_other_value_types_are_the_digest_of_their_list():
    class Name(str):
        pass

    run = RunId("agent", "k", 0)
    assert event_id(run, Name("u"), "a", 1) == event_id(run, "u", "a", 1)
    assert event_id(run, "u", "a", True) == digest(["event", run.as_list(), "u", "a", True])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        event_id(RunId("agent", object(), 0), "u", "a", 1)
