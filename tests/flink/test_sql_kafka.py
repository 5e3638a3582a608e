"""A Kafka table defined in SQL, the agent, a SQL result table in Kafka: the example's job spec
(``jobs/sql_reviews.yaml``) and its Python twin (``examples/sql_reviews.py``), on the
mini-cluster with the broker of ``scripts/kafka.sh``."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from examples import sql_reviews
from examples.demo import read_outputs
from flink_agents.flink.job import load_job
from flink_agents.flink.job_runner import build, environment
from tests.flink.conftest import consume_json, produce_json
from tests.flink.review_pipeline import SLOW, reviews

pytestmark = [pytest.mark.flink, pytest.mark.kafka]

REPO = Path(__file__).resolve().parents[2]
REVIEWS = 14  # two without stars: r006, r013


def _topics(bootstrap: str) -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:12]
    source, sink = f"test-sql-reviews-{suffix}", f"test-sql-sentiments-{suffix}"
    produce_json(bootstrap, source, [r.model_dump() for r in reviews(REVIEWS)])
    return source, sink


def _expected() -> list[dict[str, Any]]:
    return [
        {
            "review_id": r.review_id,
            "product": r.product,
            "sentiment": "positive" if r.stars >= 4 else "negative",
        }
        for r in reviews(REVIEWS)
        if r.stars
    ]


def _rows(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    return sorted(consume_json(bootstrap, topic), key=lambda row: row["review_id"])


def test_the_job_spec_reads_a_sql_kafka_table_and_inserts_into_one(
    tmp_path, kafka_bootstrap
) -> None:
    source, sink = _topics(kafka_bootstrap)
    dead_letter = f"dead_letter: {{kind: file, path: {tmp_path / 'dead'}}}"
    text = (
        (REPO / "jobs" / "sql_reviews.yaml")
        .read_text()
        .replace("'topic' = 'reviews'", f"'topic' = '{source}'")
        .replace("'topic' = 'review-sentiments'", f"'topic' = '{sink}'")
        .replace("127.0.0.1:9092", kafka_bootstrap)
        .replace("dead_letter: {kind: stdout}", dead_letter)
        .replace("interval_ms: 1000", f"interval_ms: 500\n  dir: {tmp_path / 'checkpoints'}")
    )
    job = tmp_path / "job.yaml"
    job.write_text(text + "restart_strategy: {type: none}\n")
    spec = load_job(job)
    env = environment(spec, [str(REPO)])
    build(spec, env)
    env.execute(spec.name)

    assert _rows(kafka_bootstrap, sink) == _expected()
    dead = read_outputs(tmp_path / "dead")
    assert sorted((d["key"], d["error_type"]) for d in dead) == [
        ("r006", "ValueError"),
        ("r013", "ValueError"),
    ]


@SLOW
def test_the_python_twin_gives_the_same_rows(fresh_flink_env, kafka_bootstrap) -> None:
    source, sink = _topics(kafka_bootstrap)
    sql_reviews.build(fresh_flink_env, kafka_bootstrap, source, sink)
    fresh_flink_env.execute("sql-reviews")
    assert _rows(kafka_bootstrap, sink) == _expected()
