"""Typed outputs, dead letters and two agents chained in one job, on the mini-cluster.

Stage 1 analyses each review (keyed by review id), stage 2 notes each analysis per product
(keyed by product), fed with stage 1's typed answers; failures of either stage are dead
letters, apart from the answers. With the Kafka store, a crash in stage 2 re-invokes no
completed call of either stage and the answers equal those of a run without it.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from pyflink.common import Encoder, Types
from pyflink.datastream.connectors.file_system import FileSink

from examples.demo import read_outputs
from flink_agents.durable.store import StoreConfig
from flink_agents.flink import AgentsExecutionEnvironment, OperatorOptions
from flink_agents.flink.environment import as_json_text
from tests.flink.conftest import crash_test_run
from tests.flink.failover_counts import recorded_before
from tests.flink.review_pipeline import (
    CRASH_ENV,
    SLOW,
    WITNESS_ENV,
    ProductNote,
    product_notes,
    review_analysis,
    reviews,
)

pytestmark = [pytest.mark.flink]

REVIEWS = 21  # three unreadable (every seventh)


def _file_sink(folder: Path) -> FileSink:
    return FileSink.for_row_format(str(folder), Encoder.simple_string_encoder()).build()


def _expected_notes() -> set[tuple[str, str, str]]:
    found = set()
    for review in reviews(REVIEWS):
        if review.stars == 0:
            continue
        sentiment = "positive" if review.stars >= 4 else "negative"
        note = f"{sentiment} review {review.review_id} of {review.product}"
        found.add((review.product, review.review_id, note))
    return found


def _chain(agents: AgentsExecutionEnvironment, **source: Any) -> tuple[Any, Any]:
    analysed = agents.from_list(reviews(REVIEWS), key="review_id", **source).apply(
        review_analysis()
    )
    noted = analysed.then(key=lambda analysis: analysis.product).apply(product_notes())
    return noted, analysed.dead_letters().union(noted.dead_letters())


def test_two_agents_chained_give_typed_answers_and_dead_letters_apart(
    fresh_flink_env, tmp_path
) -> None:
    agents = AgentsExecutionEnvironment(fresh_flink_env)
    noted, dead_letters = _chain(agents)
    # Python objects of the declared type leave the agent: a map reads their attributes.
    noted.to_datastream().map(
        lambda note: json.dumps([type(note).__name__, note.product, note.review_id, note.note]),
        output_type=Types.STRING(),
    ).sink_to(_file_sink(tmp_path / "answers"))
    dead_letters.sink_to(_file_sink(tmp_path / "dead"))
    fresh_flink_env.execute("typed-chain")

    answers = read_outputs(tmp_path / "answers")
    assert {kind for kind, *_ in answers} == {ProductNote.__name__}
    assert {tuple(rest) for _, *rest in answers} == _expected_notes()
    assert len(answers) == len(_expected_notes())
    dead = read_outputs(tmp_path / "dead")
    assert sorted(d["key"] for d in dead) == ["r006", "r013", "r020"]
    assert {d["agent"] for d in dead} == {"review_analysis"}
    assert {d["error_type"] for d in dead} == {"ValueError"}
    assert all(d["input"]["stars"] == 0 and "cannot be analysed" in d["reason"] for d in dead)


def _witnessed(path: Path) -> list[list[Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@SLOW
@pytest.mark.kafka
@pytest.mark.timeout(600)
def test_a_crash_in_the_second_stage_reinvokes_no_completed_call(
    make_flink_env, kafka_bootstrap, tmp_path, monkeypatch
) -> None:
    def run(name: str, crash: str | None) -> tuple[set[tuple[str, str, str]], Path]:
        env, witness = crash_test_run(
            make_flink_env,
            monkeypatch,
            tmp_path,
            name,
            witness_env=WITNESS_ENV,
            crash_env=CRASH_ENV,
            crash=crash,
            checkpoint_ms=300,
        )
        store = StoreConfig(
            kind="kafka",
            bootstrap_servers=kafka_bootstrap,
            topic=f"test-pipelines-{uuid.uuid4().hex[:12]}",
        )
        agents = AgentsExecutionEnvironment(
            env, options=OperatorOptions(max_in_flight=4), store=store
        )
        noted, _ = _chain(agents, records_per_second=15)
        as_json_text(noted.to_datastream()).sink_to(_file_sink(tmp_path / f"{name}-out"))
        env.execute(f"pipeline-{name}")
        notes = {
            (n["product"], n["review_id"], n["note"])
            for n in read_outputs(tmp_path / f"{name}-out")
        }
        return notes, witness

    calm, calm_witness = run("calm", None)
    flag = tmp_path / "crashed"
    crashed, witness = run("crash", f"8:{flag}")

    assert calm == _expected_notes()
    assert crashed == calm, "answers differ from the run without a crash"
    assert flag.exists(), "the crash was not injected"
    crashed_at = float(flag.read_text())
    calls = _witnessed(witness)
    times: dict[tuple[str, str, str], list[float]] = {}
    for stage, key, call, at in calls:
        times.setdefault((stage, key, call), []).append(at)
    reinvoked = {
        call: seen
        for call, seen in times.items()
        if len(seen) > 1 and recorded_before(crashed_at, seen[0])
    }
    assert not reinvoked, f"completed calls re-invoked: {reinvoked}"
    assert {stage for stage, *_ in times} == {"review_analysis", "product_notes"}
    assert len(times) == len({tuple(c[:3]) for c in _witnessed(calm_witness)})
    sent_again = {call: len(seen) - 1 for call, seen in times.items() if len(seen) > 1}
    print(f"witness calls {len(calls)}, distinct {len(times)}, sent again {sent_again}")
