"""A job spec chaining two agents with output schemas: a bounded source into every sink.

The answers of the last stage reach the sink as JSON records of its schema; the dead letters of
both stages reach ``dead_letter`` (stdout, a file folder, a Kafka topic), never the answers.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from examples.demo import read_outputs
from flink_agents.flink.job import load_job
from flink_agents.flink.job_runner import build, environment
from tests.flink.conftest import consume_json
from tests.flink.review_pipeline import SLOW, reviews

pytestmark = [pytest.mark.flink]

REPO = Path(__file__).resolve().parents[2]
REVIEWS = 14  # two unreadable: r006, r013
ANALYSIS_SCHEMA = {
    "type": "object",
    "required": ["review_id", "product", "sentiment"],
    "properties": {"sentiment": {"enum": ["positive", "negative"]}},
}
NOTE_SCHEMA = {
    "type": "object",
    "required": ["product", "review_id", "note"],
    "properties": {"note": {"type": "string"}},
}


def _job(tmp_path: Path, sink: str, dead_letter: str | None) -> Path:
    data = tmp_path / "reviews.jsonl"
    data.write_text("".join(r.model_dump_json() + "\n" for r in reviews(REVIEWS)))
    job = tmp_path / "job.yaml"
    job.write_text(
        "name: review-pipeline\n"
        "agent: tests.flink.review_pipeline:REVIEW_ANALYSIS\n"
        "key: review_id\n"
        f"output_schema: {json.dumps(ANALYSIS_SCHEMA)}\n"
        "then:\n"
        "  - agent: tests.flink.review_pipeline:PRODUCT_NOTES\n"
        "    key: product\n"
        f"    output_schema: {json.dumps(NOTE_SCHEMA)}\n"
        "source: {kind: list, path: reviews.jsonl}\n"
        f"sink: {sink}\n"
        + ("" if dead_letter is None else f"dead_letter: {dead_letter}\n")
        + f"checkpointing: {{interval_ms: 500, dir: {tmp_path / 'checkpoints'}}}\n"
        "restart_strategy: {type: none}\n"
    )
    return job


def _run_here(job: Path) -> None:
    spec = load_job(job)
    env = environment(spec, [str(REPO)])
    build(spec, env)
    env.execute(spec.name)


def _expected_notes() -> list[dict[str, Any]]:
    return sorted(
        (
            {
                "product": r.product,
                "review_id": r.review_id,
                "note": f"{'positive' if r.stars >= 4 else 'negative'} review {r.review_id} "
                f"of {r.product}",
            }
            for r in reviews(REVIEWS)
            if r.stars
        ),
        key=lambda note: note["review_id"],
    )


def _assert_answers_and_dead_letters(answers: list[Any], dead: list[Any]) -> None:
    assert sorted(answers, key=lambda note: note["review_id"]) == _expected_notes()
    assert sorted((d["agent"], d["key"], d["error_type"]) for d in dead) == [
        ("review_analysis", "r006", "ValueError"),
        ("review_analysis", "r013", "ValueError"),
    ]
    assert all(d["input"]["stars"] == 0 for d in dead)


@SLOW
def test_answers_and_dead_letters_printed_apart(tmp_path) -> None:
    job = _job(tmp_path, "{kind: stdout}", None)
    done = subprocess.run(
        [sys.executable, "-m", "flink_agents.flink.job_runner", str(job), str(REPO)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    printed = [line for line in done.stdout.splitlines() if line.strip()]
    dead = [
        json.loads(line.split("> ", 1)[1]) for line in printed if line.startswith("dead letter")
    ]
    answers = [json.loads(line) for line in printed if line.startswith("{")]
    _assert_answers_and_dead_letters(answers, dead)


@pytest.mark.kafka
def test_answers_to_kafka_and_dead_letters_to_files(tmp_path, kafka_bootstrap) -> None:
    topic = f"test-pipeline-answers-{uuid.uuid4().hex[:12]}"
    sink = f"{{kind: kafka, topic: {topic}, bootstrap_servers: '{kafka_bootstrap}'}}"
    _run_here(_job(tmp_path, sink, f"{{kind: file, path: {tmp_path / 'dead'}}}"))
    _assert_answers_and_dead_letters(
        consume_json(kafka_bootstrap, topic), read_outputs(tmp_path / "dead")
    )


@SLOW
@pytest.mark.kafka
def test_answers_to_files_and_dead_letters_to_a_kafka_topic(tmp_path, kafka_bootstrap) -> None:
    topic = f"test-pipeline-dead-{uuid.uuid4().hex[:12]}"
    # The dead_letter form of envelope jobs (a topic, no kind) works for typed outputs too.
    dead_letter = f"{{topic: {topic}, bootstrap_servers: '{kafka_bootstrap}'}}"
    _run_here(_job(tmp_path, f"{{kind: file, path: {tmp_path / 'out'}}}", dead_letter))
    _assert_answers_and_dead_letters(
        read_outputs(tmp_path / "out"), consume_json(kafka_bootstrap, topic)
    )
