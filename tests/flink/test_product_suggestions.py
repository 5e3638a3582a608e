"""The three-stage example on the mini-cluster: reviews analysed per review, summed up per
product every three analyses (a stage that aggregates), then turned into suggestions.

From Python and from its job spec the suggestions are the expected ones; with the Kafka store, a
crash in the middle stage re-invokes no completed model call of any stage and the suggestions
equal those of a run without it: the checkpoint it restores holds lists still filling (kettle's
second, headphones' last), which the batching operator must keep in Flink's state.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from pyflink.common import Encoder
from pyflink.datastream.connectors.file_system import FileSink

from examples.demo import read_outputs
from examples.product_suggestions import (
    ANALYSIS_TURNS,
    SUGGESTION_TURNS,
    SUMMARY_TURNS,
    product_suggestions_agent,
    product_summary_agent,
    review_analysis_agent,
)
from examples.product_suggestions_job import REVIEWS_FILE, REVIEWS_KEY, pipeline
from flink_agents.durable.store import StoreConfig
from flink_agents.flink import AgentsExecutionEnvironment, FileSinkSpec
from flink_agents.flink.environment import as_json_text
from flink_agents.flink.job import JobSpec, load_job
from flink_agents.flink.job_runner import build, environment
from tests.flink.conftest import crash_test_run
from tests.flink.failover_counts import recorded_before
from tests.flink.review_pipeline import SLOW
from tests.flink.witnessed_models import CRASH_ENV, WITNESS_ENV, witnessed, witnessed_calls

pytestmark = [pytest.mark.flink]

REPO = Path(__file__).resolve().parents[2]
DURABILITY = ["choose sturdier materials", "offer a longer warranty"]
NOISE = ["find and quieten what makes the noise"]
SPEED = ["make it quicker to use"]
EXPECTED = sorted(
    [
        {"product": "kettle", "review_ids": ["r01", "r04", "r07"], "suggestions": DURABILITY},
        {"product": "headphones", "review_ids": ["r02", "r05", "r08"], "suggestions": NOISE},
        {"product": "backpack", "review_ids": ["r03", "r06", "r09"], "suggestions": SPEED},
        {"product": "kettle", "review_ids": ["r10", "r12", "r14"], "suggestions": DURABILITY},
        # The input's end hands on the last, shorter list of a product.
        {"product": "headphones", "review_ids": ["r11", "r13"], "suggestions": NOISE},
    ],
    key=json.dumps,
)
"""Each product's reviews in lists of three, in the file's order."""


def _file_sink(folder: Path) -> FileSink:
    return FileSink.for_row_format(str(folder), Encoder.simple_string_encoder()).build()


def _run_job(spec: JobSpec) -> None:
    """Build ``spec``'s job as ``flink-agents run`` does (this checkout on the workers' path)
    and run it to its end."""
    env = environment(spec, [str(REPO)])
    build(spec, env)
    env.execute(spec.name)


def _sorted(records: list[Any]) -> list[Any]:
    return sorted(records, key=json.dumps)


def test_three_stages_from_python_hand_on_lists_of_three(fresh_flink_env, tmp_path) -> None:
    agents = AgentsExecutionEnvironment(fresh_flink_env)
    suggested, dead_letters = pipeline(agents.from_file(REVIEWS_FILE, key=REVIEWS_KEY))
    as_json_text(suggested.to_datastream()).sink_to(_file_sink(tmp_path / "out"))
    dead_letters.sink_to(_file_sink(tmp_path / "dead"))
    fresh_flink_env.execute("product-suggestions")

    assert _sorted(read_outputs(tmp_path / "out")) == EXPECTED
    assert read_outputs(tmp_path / "dead") == []


@SLOW
def test_three_stages_from_the_job_spec(tmp_path) -> None:
    spec = load_job(REPO / "jobs" / "product_suggestions.yaml")
    spec = spec.model_copy(
        update={
            "sink": FileSinkSpec(kind="file", path=str(tmp_path / "out")),
            "checkpointing": spec.checkpointing.model_copy(update={"dir": str(tmp_path / "ck")}),
        }
    )
    spec._base_dir = (REPO / "jobs").resolve()
    _run_job(spec)

    assert _sorted(read_outputs(tmp_path / "out")) == EXPECTED


@SLOW
@pytest.mark.kafka
def test_three_stages_between_sql_tables(tmp_path, kafka_bootstrap) -> None:
    """The job spec with a SQL table at each end and the Kafka store: the same suggestions, as
    table rows."""
    topic = f"product-suggestions-sql-{uuid.uuid4().hex[:12]}"
    text = (
        (REPO / "jobs" / "product_suggestions_sql.yaml")
        .read_text()
        .replace("'jobs/data/product_reviews.jsonl'", f"'{REVIEWS_FILE}'")
        .replace("'product-suggestions'", f"'{tmp_path / 'out'}'")
        .replace("interval_ms: 1000", f"interval_ms: 1000\n  dir: {tmp_path / 'ck'}")
    )
    store = f"store: {{kind: kafka, bootstrap_servers: '{kafka_bootstrap}', topic: {topic}}}\n"
    job = tmp_path / "job.yaml"
    job.write_text(text + store)
    _run_job(load_job(job))

    assert _sorted(read_outputs(tmp_path / "out")) == EXPECTED


@SLOW
@pytest.mark.kafka
@pytest.mark.timeout(600)
def test_a_crash_in_the_summary_stage_reinvokes_no_completed_call(
    make_flink_env, kafka_bootstrap, tmp_path, monkeypatch
) -> None:
    def run(name: str, crash: str | None) -> tuple[list[Any], Path]:
        env, witness = crash_test_run(
            make_flink_env,
            monkeypatch,
            tmp_path,
            name,
            witness_env=WITNESS_ENV,
            crash_env=CRASH_ENV,
            crash=crash,
            checkpoint_ms=1000,
        )
        store = StoreConfig(
            kind="kafka",
            bootstrap_servers=kafka_bootstrap,
            topic=f"test-product-suggestions-{uuid.uuid4().hex[:12]}",
        )
        agents = AgentsExecutionEnvironment(env, store=store)
        stages = (
            review_analysis_agent(witnessed("review-analysis", ANALYSIS_TURNS)),
            product_summary_agent(witnessed("product-summary", SUMMARY_TURNS)),
            product_suggestions_agent(witnessed("product-suggestions", SUGGESTION_TURNS)),
        )
        reviews = agents.from_file(REVIEWS_FILE, key=REVIEWS_KEY, records_per_second=4)
        suggested, _ = pipeline(reviews, stages=stages)
        as_json_text(suggested.to_datastream()).sink_to(_file_sink(tmp_path / f"{name}-out"))
        env.execute(f"product-suggestions-{name}")
        return _sorted(read_outputs(tmp_path / f"{name}-out")), witness

    calm, calm_witness = run("calm", None)
    flag = tmp_path / "crashed"
    crashed, witness = run("crash", f"product-summary:4:{flag}")

    assert calm == EXPECTED
    assert crashed == calm, "suggestions differ from the run without a crash"
    assert flag.exists(), "the crash was not injected"
    crashed_at = float(flag.read_text())
    times: dict[tuple[str, str], list[float]] = {}
    for stage, question, at in witnessed_calls(witness):
        times.setdefault((stage, question), []).append(at)
    reinvoked = {
        call: seen
        for call, seen in times.items()
        if len(seen) > 1 and recorded_before(crashed_at, seen[0])
    }
    assert not reinvoked, f"completed calls re-invoked: {reinvoked}"
    assert {stage for stage, _ in times} == {
        "review-analysis",
        "product-summary",
        "product-suggestions",
    }
    calm_calls = {(stage, question) for stage, question, _ in witnessed_calls(calm_witness)}
    assert set(times) == calm_calls, "the crashed run asked other questions"
    sent_again = {call: len(seen) - 1 for call, seen in times.items() if len(seen) > 1}
    print(f"calls {sum(map(len, times.values()))}, distinct {len(times)}, sent again {sent_again}")
