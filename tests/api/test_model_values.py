"""Outputs and memory values take pydantic models and dataclasses, kept in their JSON form."""

from __future__ import annotations

import dataclasses
import datetime

import pytest
from pydantic import BaseModel, ValidationError

from flink_agents.api import OutputEvent
from flink_agents.api.json_values import NotJsonError
from flink_agents.api.memory import Memory


class Score(BaseModel):
    stars: int
    at: datetime.date


@dataclasses.dataclass
class Tag:
    name: str
    weight: float


SCORE = Score(stars=4, at=datetime.date(2026, 1, 2))


def test_an_output_model_or_dataclass_is_its_json_mode_dump() -> None:
    assert OutputEvent(output=SCORE).output == {"stars": 4, "at": "2026-01-02"}
    assert OutputEvent(output=Tag("fast", 0.5)).output == {"name": "fast", "weight": 0.5}
    nested = OutputEvent(output={"best": SCORE, "tags": (Tag("a", 1.0),)}).output
    assert nested == {
        "best": {"stars": 4, "at": "2026-01-02"},
        "tags": [{"name": "a", "weight": 1.0}],
    }


def test_an_output_json_cannot_hold_is_refused_where_it_is() -> None:
    with pytest.raises(ValidationError, match=r"not a JSON value at \$.ids: a set"):
        OutputEvent(output={"ids": {1, 2}})


def test_memory_keeps_a_models_json_form_and_it_validates_back() -> None:
    memory = Memory()
    memory.set("score", SCORE)
    memory.set("tags", [Tag("a", 1.0)])
    assert memory.get("score") == {"stars": 4, "at": "2026-01-02"}
    assert memory.get("tags") == [{"name": "a", "weight": 1.0}]
    assert Score.model_validate(memory.get("score")) == SCORE
    assert memory.snapshot() == {
        "score": SCORE.model_dump(mode="json"),
        "tags": [{"name": "a", "weight": 1.0}],
    }


def test_memory_stores_a_copy_and_refuses_what_json_cannot_hold_naming_the_key() -> None:
    memory = Memory()
    seen = [1]
    memory.set("seen", seen)
    seen.append(2)
    assert memory.get("seen") == [1]
    with pytest.raises(NotJsonError, match=r"at \$.pending: a set"):
        memory.set("pending", {1})
    with pytest.raises(NotJsonError, match=r"\$\[\"odd key\"\]"):
        memory.set("odd key", float("nan"))


def test_memory_copies_its_content_in_and_out_empty_or_not() -> None:
    content: dict[str, object] = {"notes": ["a"]}
    memory = Memory(content)
    content["notes"].append("b")  # type: ignore[attr-defined]
    assert memory.get("notes") == ["a"]
    taken = memory.snapshot()
    taken["notes"].append("c")
    assert memory.get("notes") == ["a"]
    empty = Memory({})
    first, second = empty.snapshot(), empty.snapshot()
    first["x"] = 1
    assert second == {} and len(empty) == 0 and first is not second
