"""How a value is shown to a model (one rendering for values JSON has no type for), and the
two ways lone surrogates are handled: escaped in recorded JSON, replaced in a model's text."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import json
import pathlib
import uuid

import pytest
from pydantic import BaseModel

from flink_agents.api.json_values import (
    NotJsonError,
    escape_lone_surrogates,
    json_bytes,
    json_rendering,
    json_text,
    replace_lone_surrogates,
)


class Colour(enum.Enum):
    RED = "red"


class Row(BaseModel):
    at: datetime.date
    tags: frozenset[str]


@dataclasses.dataclass
class Cell:
    value: decimal.Decimal


def test_values_json_has_no_type_for_render_one_documented_way() -> None:
    value = {
        "when": datetime.datetime(2024, 5, 1, 12, 30),
        "tags": {"old", "new"},
        "pair": (1, 2),
        3: Colour.RED,
        None: uuid.UUID(int=1),
        "path": pathlib.Path("/tmp/x"),
        "took": datetime.timedelta(hours=1),
        "raw": b"ok\xff",
        "row": Row(at=datetime.date(2024, 5, 1), tags=frozenset({"b", "a"})),
        "cell": Cell(value=decimal.Decimal("1.50")),
    }
    shown = json.loads(json_text(value))
    # A model's set field is dumped as its type writes it (in the set's order).
    assert sorted(shown["row"].pop("tags")) == ["a", "b"]
    assert shown == {
        "when": "2024-05-01T12:30:00",
        "tags": ["new", "old"],
        "pair": [1, 2],
        "3": "red",
        "null": "00000000-0000-0000-0000-000000000001",
        "path": "/tmp/x",
        "took": "PT1H",
        "raw": "ok\ufffd",
        "row": {"at": "2024-05-01"},
        "cell": {"value": "1.50"},
    }
    assert json_text("as it is") == "as it is"
    assert json_text({"b": 1, "a": "é"}) == '{"a": "é", "b": 1}'  # sorted, non-ASCII kept


def test_a_value_with_no_rendering_is_refused_naming_its_path() -> None:
    with pytest.raises(NotJsonError) as caught:
        json_rendering({"rows": [{"handle": object()}]})
    assert caught.value.path == "$.rows[0].handle"
    with pytest.raises(NotJsonError, match=r"at \$: key \(1, 2\) is a tuple"):
        json_rendering({(1, 2): "x"})


def test_lone_surrogates_are_escaped_in_json_and_replaced_for_a_model() -> None:
    text = "report-\udcff.txt"
    escaped = escape_lone_surrogates(json.dumps(text, ensure_ascii=False))
    assert escaped == '"report-\\udcff.txt"' and json.loads(escaped) == text
    nan = {"name": text, "n": float("nan")}
    assert json.loads(json_bytes(nan, inf_nan_mode="null")) == {"name": text, "n": None}
    assert json_bytes({"n": float("nan")}) == b'{"n":NaN}'  # pydantic's default
    assert json_bytes({"name": text}) == b'{"name":"report-\\udcff.txt"}'  # escaped
    assert replace_lone_surrogates(text) == "report-\ufffd.txt"
    assert json_text(text) == json_text({"name": text})[10:-2] == "report-\ufffd.txt"
