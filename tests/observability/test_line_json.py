"""A record's line is pydantic's bytes whichever serializer wrote it: orjson where the two
write the same, pydantic wherever they could differ (observability/lines.py)."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import enum
import json
from typing import Any

import pytest
from pydantic_core import PydanticSerializationError, to_json

from flink_agents.api.chat import TokenUsage
from flink_agents.observability import lines
from flink_agents.observability.lines import fields_json, payload_pairs, render_line
from flink_agents.observability.log_records import CallFinished, construct, record_json


class Color(enum.Enum):
    RED = "red"


class Name(str):
    """A subclass of str: orjson writes it itself, unless told to hand it over."""


class Seconds(float):
    """A subclass of float: orjson hands it to ``default``."""


@dataclasses.dataclass
class Point:
    x: float


def call_fields(**changed: Any) -> dict[str, Any]:
    fields = {
        "time": 1764600000.123456,
        "agent": "a",
        "key": 7,
        "seq": 3,
        "kind": "call",
        "event_id": "e1",
        "action": "act",
        "call_id": "c0",
        "call_kind": "model",
        "function": "m:f",
        "target": "gpt",
        "provider": None,
        "outcome": "live",
        "attempts": 1,
        "latency_ms": 3.25,
        "usage": TokenUsage(input_tokens=5, output_tokens=2),
        "error": None,
    }
    return fields | changed


# Values orjson and pydantic write alike (floats in any exponent range, every escape).
SAME_BYTES: list[Any] = [
    1e-07,
    1e16,
    -0.0,
    5e-324,
    1.7976931348623157e308,
    0.1,
    2**63 - 1,
    -(2**63),
    "h\u00e9llo \u2713 \U0001f600",
    'quote " backslash \\ controls \x00\x1f\x7f\n\t\u2028',
    "".join(chr(c) for c in range(0x800)),
]

# Values orjson would write otherwise, refuses, or hands over: pydantic writes them.
PYDANTICS: list[Any] = [
    2**64,  # orjson: beyond 64 bits, refused
    -(2**63) - 1,
    datetime.datetime(2026, 12, 1, 16, 0, tzinfo=datetime.timezone.utc),
    datetime.date(2026, 12, 1),
    Point(1.5),
    Name("n"),
    Seconds("inf"),  # a non-finite float orjson does not write itself: pydantic's Infinity
    Color.RED,  # an enum: orjson writes its value, as pydantic does
]

# Run keys that orjson is never handed: a list or dict could hold a non-finite float, which
# orjson writes as null, pydantic as Infinity or NaN. (A record's other floats are clock
# readings and latencies: finite.)
KEYS: list[Any] = [
    float("inf"),
    float("nan"),
    {"user": 7},
    [1, {"b": None}],
    {"x": [float("inf"), float("nan"), -0.0]},
    {1: "an int as a key"},  # orjson refuses keys that are not strings
    1.5,
    True,
    None,
    2**70,
    "k\u00e9y",
]


@pytest.mark.parametrize("value", SAME_BYTES + PYDANTICS)
@pytest.mark.parametrize("field", ["error", "latency_ms", "attempts", "target"])
def test_any_value_in_a_field_is_written_as_pydantic_writes_it(field, value):
    fields = call_fields(**{field: value})
    assert fields_json(fields) == to_json(fields)


@pytest.mark.parametrize("key", KEYS + SAME_BYTES + PYDANTICS)
def test_any_run_key_is_written_as_pydantic_writes_it(key):
    fields = call_fields(key=key)
    assert fields_json(fields) == to_json(fields)


@pytest.mark.parametrize("changed", [{}, {"key": {"user": [7, 1.5]}}, {"attempts": 2**64}])
def test_a_call_line_with_its_payloads_is_its_records_line(changed):
    fields = call_fields(**changed)
    payloads = {"arguments": {"args": [1.5, None]}, "result": "r\u00e9"}
    record = construct(CallFinished, **fields, **payloads)
    assert render_line(fields, to_json, *payload_pairs(payloads)) == record_json(record).encode()


def test_a_lone_surrogate_is_written_as_its_escape_where_pydantic_refuses_it():
    fields = call_fields(error="\ud800")
    with pytest.raises(PydanticSerializationError):
        to_json(fields)
    line = fields_json(fields)
    assert b'"error":"\\ud800"' in line
    assert json.loads(line) == json.loads(to_json(call_fields(error="x"))) | {"error": "\ud800"}


class Spy:
    """``to_json`` counting what it is handed (the pydantic path)."""

    def __init__(self) -> None:
        self.values: list[Any] = []

    def __call__(self, value: Any) -> bytes:
        self.values.append(value)
        return to_json(value)


@pytest.fixture
def pydantic_path(monkeypatch: pytest.MonkeyPatch) -> Spy:
    spy = Spy()
    monkeypatch.setattr(lines, "json_bytes", spy)
    return spy


def test_plain_fields_are_written_by_orjson_a_model_among_them_by_pydantic(pydantic_path):
    usage = TokenUsage(input_tokens=5, output_tokens=2)
    fields_json(call_fields(usage=usage))
    assert pydantic_path.values == [usage]  # the model alone
    fields_json(call_fields(usage=None, key="k"))
    assert pydantic_path.values == [usage]


@pytest.mark.parametrize(
    ("changed", "why"),
    [
        ({"attempts": 2**64}, "beyond 64 bits"),
        ({"error": "\ud800"}, "a lone surrogate"),
        ({"key": {"x": float("inf")}}, "a key that is not a string or an integer"),
        ({"key": 1.5}, "a float key"),
    ],
)
def test_fields_orjson_could_write_otherwise_are_written_by_pydantic(pydantic_path, changed, why):
    fields = call_fields(usage=None, **changed)
    with contextlib.suppress(PydanticSerializationError):  # the lone surrogate: refused too
        fields_json(fields)
    assert pydantic_path.values == [fields], why
