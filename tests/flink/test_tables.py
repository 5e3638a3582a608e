"""Flink Tables in and out of an agent, and event time through it, on the mini-cluster.

A SQL view's rows are the agent's records (``from_table``); its typed answers are a table with
a column per field of the output type (``to_table``), written by SQL into a filesystem table;
failures stay dead letters. Under ``event_time_lag_ms`` each answer carries its input's
timestamp and watermarks follow them, so an event-time window after the agent counts right.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest
from pyflink.common import Encoder, Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import ProcessFunction
from pyflink.datastream.connectors.file_system import FileSink
from pyflink.datastream.functions import ProcessWindowFunction
from pyflink.datastream.window import TumblingEventTimeWindows

from examples.demo import read_outputs
from flink_agents.flink import AgentsExecutionEnvironment
from flink_agents.flink.environment import Paced
from tests.flink.review_pipeline import review_analysis, reviews

pytestmark = [pytest.mark.flink]

REVIEWS = 14  # two unreadable (every seventh)


def _file_sink(folder: Path) -> FileSink:
    return FileSink.for_row_format(str(folder), Encoder.simple_string_encoder()).build()


def _sentiment(stars: int) -> str:
    return "positive" if stars >= 4 else "negative"


def test_a_sql_view_through_the_agent_into_a_sql_table(fresh_flink_env, tmp_path) -> None:
    agents = AgentsExecutionEnvironment(fresh_flink_env)
    rows = ", ".join(
        f"('{r.review_id}', '{r.product}', {r.stars}, '{r.text}')" for r in reviews(REVIEWS)
    )
    agents.table_env.execute_sql(
        f"CREATE TEMPORARY VIEW reviews AS SELECT * FROM (VALUES {rows}) "
        "AS t(review_id, product, stars, text)"
    )
    agents.table_env.execute_sql(
        "CREATE TABLE analyses (review_id STRING, product STRING, sentiment STRING) "
        f"WITH ('connector' = 'filesystem', 'path' = '{tmp_path / 'analyses'}', "
        "'format' = 'json')"
    )
    analysed = agents.from_table(agents.table_env.from_path("reviews"), key="review_id").apply(
        review_analysis()
    )
    table = analysed.to_table()
    assert list(table.get_schema().get_field_names()) == [  # both lines' API (1.20 and 2)
        "review_id",
        "product",
        "sentiment",
    ]
    agents.insert_into("analyses", table)
    analysed.dead_letters().sink_to(_file_sink(tmp_path / "dead"))
    fresh_flink_env.execute("sql-view-to-table")

    expected = {(r.review_id, r.product, _sentiment(r.stars)) for r in reviews(REVIEWS) if r.stars}
    found = read_outputs(tmp_path / "analyses")
    assert sorted((a["review_id"], a["product"], a["sentiment"]) for a in found) == sorted(expected)
    dead = read_outputs(tmp_path / "dead")
    assert sorted(d["key"] for d in dead) == ["r006", "r013"]
    assert all(d["error_type"] == "ValueError" for d in dead)


class ReviewTime(TimestampAssigner):
    """A review's event time: second ``i`` for review ``r<i>``."""

    def extract_timestamp(self, value: str, record_timestamp: int) -> int:
        return _event_ms(json.loads(value)["review_id"])


def _event_ms(review_id: str) -> int:
    return int(review_id[1:]) * 1000


class Stamped(ProcessFunction):
    """Each answer with its timestamp and the watermark the function had seen before it."""

    def process_element(self, value: Any, ctx: ProcessFunction.Context) -> Any:
        watermark = ctx.timer_service().current_watermark()
        yield json.dumps([value.review_id, ctx.timestamp(), watermark])


class Counted(ProcessWindowFunction):
    def process(self, key: str, context: Any, elements: Any) -> Any:
        ids = sorted(analysis.review_id for analysis in elements)
        yield json.dumps([key, context.window().start, ids])


def _timed_reviews(env: Any) -> Any:
    """The reviews, paced, each at its event time, with watermarks; all of product p0, so one
    key whose runs end in their inputs' order (no answer is late at lag 0)."""
    env.get_config().set_auto_watermark_interval(50)
    records = [json.dumps({**r.model_dump(), "product": "p0"}) for r in reviews(REVIEWS)]
    return (
        env.from_collection(records, type_info=Types.STRING())
        .map(Paced(20), output_type=Types.STRING())
        .assign_timestamps_and_watermarks(
            WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ReviewTime())
        )
    )


def _windows_of_five_seconds() -> list[tuple[str, int, tuple[str, ...]]]:
    readable = [r.review_id for r in reviews(REVIEWS) if r.stars]
    return [
        ("p0", start, tuple(i for i in readable if start <= _event_ms(i) < start + 5000))
        for start in (0, 5000, 10000)
    ]


def test_answers_keep_their_inputs_event_time_and_watermarks_pass_the_agent(
    fresh_flink_env, tmp_path
) -> None:
    agents = AgentsExecutionEnvironment(fresh_flink_env)
    analysed = agents.from_datastream(_timed_reviews(fresh_flink_env), key="product").apply(
        review_analysis(), event_time_lag_ms=0
    )
    answers = analysed.to_datastream()
    answers.process(Stamped(), output_type=Types.STRING()).sink_to(_file_sink(tmp_path / "stamped"))
    answers.key_by(lambda analysis: analysis.product, key_type=Types.STRING()).window(
        TumblingEventTimeWindows.of(Time.seconds(5))
    ).process(Counted(), output_type=Types.STRING()).sink_to(_file_sink(tmp_path / "windows"))
    fresh_flink_env.execute("event-time")

    readable = [r.review_id for r in reviews(REVIEWS) if r.stars]
    stamped = read_outputs(tmp_path / "stamped")
    assert sorted((review_id, ts) for review_id, ts, _ in stamped) == [
        (review_id, _event_ms(review_id)) for review_id in readable
    ]
    # Watermarks made from the answers' stamps reached the next operator before the input
    # ended (the final watermark comes after every answer), never ahead of an answer.
    watermarks = [watermark for _, _, watermark in stamped]
    assert any(0 <= watermark < 2**62 for watermark in watermarks)
    assert all(watermark < ts for _, ts, watermark in stamped)
    windows = sorted(
        (key, start, tuple(ids)) for key, start, ids in read_outputs(tmp_path / "windows")
    )
    assert windows == _windows_of_five_seconds()


def test_a_sql_window_over_the_answers_table_uses_their_event_time(
    fresh_flink_env, tmp_path
) -> None:
    agents = AgentsExecutionEnvironment(fresh_flink_env)
    analysed = agents.from_datastream(_timed_reviews(fresh_flink_env), key="product").apply(
        review_analysis(), event_time_lag_ms=0
    )
    t_env = agents.table_env
    t_env.get_config().set("table.local-time-zone", "UTC")  # window_start is read as UTC below
    t_env.create_temporary_view("analyses", analysed.to_table())
    t_env.execute_sql(
        "CREATE TABLE per_window (product STRING, window_start TIMESTAMP(3), ids ARRAY<STRING>) "
        f"WITH ('connector' = 'filesystem', 'path' = '{tmp_path / 'windows'}', "
        "'format' = 'json')"
    )
    windowed = t_env.sql_query(
        "SELECT product, window_start, ARRAY_AGG(review_id) AS ids FROM TABLE("
        "TUMBLE(TABLE analyses, DESCRIPTOR(rowtime), INTERVAL '5' SECOND)) "
        "GROUP BY product, window_start, window_end"
    )
    agents.insert_into("per_window", windowed)
    fresh_flink_env.execute("sql-event-time")

    found = sorted(
        (w["product"], _ms(w["window_start"]), tuple(sorted(w["ids"])))
        for w in read_outputs(tmp_path / "windows")
    )
    assert found == _windows_of_five_seconds()


def _ms(window_start: str) -> int:
    """A window start written by the json format (``1970-01-01 00:00:05``, in the session's
    time zone, UTC) as epoch ms."""
    start = datetime.datetime.fromisoformat(window_start).replace(tzinfo=datetime.UTC)
    return int(start.timestamp() * 1000)
