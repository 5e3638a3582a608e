"""A table's columns from an output type, answers as rows, and a job spec's SQL parts checked
(no mini-cluster: docs/pipelines.md, "Tables and SQL")."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel
from pyflink.common import Types

from flink_agents.flink.job import load_job
from flink_agents.flink.tables import row_type, to_row
from flink_agents.plan.yaml.loader import YamlAgentError


class Place(BaseModel):
    city: str
    country: str | None = None


class Visit(BaseModel):
    visitor: str
    stars: int
    score: float
    happy: bool
    mood: Literal["good", "bad"]
    paid: decimal.Decimal
    at: datetime.datetime
    on: datetime.date
    tags: list[str]
    place: Place
    note: str | None = None


def test_each_field_of_the_output_type_is_a_column_of_its_type() -> None:
    info = row_type(Visit)
    assert info.get_field_names() == list(Visit.model_fields)
    assert info.get_field_types() == [
        Types.STRING(),
        Types.LONG(),
        Types.DOUBLE(),
        Types.BOOLEAN(),
        Types.STRING(),
        Types.BIG_DEC(),
        Types.SQL_TIMESTAMP(),
        Types.SQL_DATE(),
        Types.OBJECT_ARRAY(Types.STRING()),
        Types.ROW_NAMED(["city", "country"], [Types.STRING(), Types.STRING()]),
        Types.STRING(),
    ]


def test_an_answer_becomes_a_row_of_those_columns() -> None:
    at = datetime.datetime(2026, 12, 3, 14, 0)
    visit = Visit(
        visitor="ada",
        stars=4,
        score=1,
        happy=True,
        mood="good",
        paid=decimal.Decimal("9.50"),
        at=at,
        on=at.date(),
        tags=["a", "b"],
        place=Place(city="Lyon"),
    )
    row = to_row(visit, row_type(Visit))
    assert row.as_dict(recursive=True) == {
        "visitor": "ada",
        "stars": 4,
        "score": 1.0,
        "happy": True,
        "mood": "good",
        "paid": decimal.Decimal("9.50"),
        "at": at,
        "on": at.date(),
        "tags": ["a", "b"],
        "place": {"city": "Lyon", "country": None},
        "note": None,
    }


def test_a_json_answer_fills_the_columns_by_name_and_missing_ones_are_null() -> None:
    info = Types.ROW_NAMED(
        ["id", "at", "amount", "ratio"],
        [Types.STRING(), Types.SQL_TIMESTAMP(), Types.BIG_DEC(), Types.DOUBLE()],
    )
    row = to_row({"id": "x", "at": "2026-12-03T14:00:00", "ratio": 1, "extra": 2}, info)
    assert row.as_dict() == {
        "id": "x",
        "at": datetime.datetime(2026, 12, 3, 14, 0),
        "amount": None,
        "ratio": 1.0,
    }


@dataclasses.dataclass
class Tally:
    product: str
    counts: dict[str, int]


def test_a_field_without_a_column_type_is_named_with_what_is_supported() -> None:
    with pytest.raises(TypeError, match=r"field Tally\.counts: dict\[str, int\] has no Flink"):
        row_type(Tally)
    with pytest.raises(TypeError, match="supported: str, int, float"):
        row_type(Tally)


def test_a_type_without_fields_has_no_table() -> None:
    with pytest.raises(TypeError, match=r"a dataclass\), not list\[str\]"):
        row_type(list[str])


def _spec(tmp_path: Path, body: str) -> Path:
    job = tmp_path / "job.yaml"
    job.write_text("name: x\nagent: a.yaml\nkey: review_id\n" + body)
    return job


TABLES = (
    "tables:\n"
    "  - CREATE TABLE reviews (review_id STRING) WITH ('connector' = 'datagen')\n"
    "  - CREATE TEMPORARY VIEW `cat`.`db`.recent AS SELECT * FROM reviews\n"
)


def test_sql_sources_and_sinks_name_tables_the_spec_creates(tmp_path: Path) -> None:
    spec = load_job(
        _spec(
            tmp_path,
            TABLES + "source: {kind: sql, table: recent}\noutput_schema: {type: object}\n"
            "sink: {kind: sql, table: reviews}\n",
        )
    )
    assert spec.source.kind == "sql" and spec.sink.kind == "sql"


@pytest.mark.parametrize(
    ("body", "line", "message"),
    [
        (
            "tables: [DROP TABLE reviews]\nsource: {kind: list, path: in.jsonl}\n",
            4,
            "tables.0.*one CREATE",
        ),
        (TABLES + "source: {kind: sql}\n", 7, "source.sql.*table or query"),
        (
            TABLES + "source: {kind: sql, table: reviews, query: SELECT 1}\n",
            7,
            "table or query",
        ),
        (TABLES + "source: {kind: sql, query: DELETE FROM reviews}\n", 7, "a SELECT"),
        (TABLES + "source: {kind: sql, table: nope}\n", 1, "source.table 'nope' is not created"),
        (
            TABLES + "source: {kind: sql, table: reviews}\nsink: {kind: sql, table: reviews}\n",
            1,
            "give output_schema",
        ),
    ],
)
def test_a_sql_part_that_does_not_fit_is_named(
    tmp_path: Path, body: str, line: int, message: str
) -> None:
    job = _spec(tmp_path, body)
    with pytest.raises(YamlAgentError, match=message) as error:
        load_job(job)
    assert f"{job}:{line}:" in str(error.value)


def test_a_sql_dead_letter_is_refused(tmp_path: Path) -> None:
    job = _spec(
        tmp_path,
        TABLES + "source: {kind: sql, table: reviews}\ndead_letter: {kind: sql, table: reviews}\n",
    )
    with pytest.raises(YamlAgentError, match="dead_letter"):
        load_job(job)
