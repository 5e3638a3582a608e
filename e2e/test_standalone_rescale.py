"""A job rescaled through savepoints (1 -> 2 -> 1) with runs in flight loses no input and
repeats no completed call.

The support-desk job of ``e2e/test_standalone_failover.py`` (same agent, services and tickets;
its durable calls in a Kafka action-state store of two partitions), with ``max_parallelism``
set in the spec so key groups stay put. Tickets come in three batches, one per stage:

1. at parallelism 1: once answers come and a sub-agent call is being served, a savepoint is
   taken and the job cancelled (``POST /jobs/<id>/savepoints`` with ``cancel-job``);
2. ``flink-agents submit --from-savepoint <it> --parallelism 2``: each subtask restores the keys
   of its key groups and the store from their markers; again a savepoint with calls in flight;
3. ``--from-savepoint <it> --parallelism 1``: one subtask now holds the keys of both; their
   markers each covered one old subtask's runs, so the store reads its whole topic.

Proved: every ticket gets its expected answer (after de-duplication by (key, seq): the sink is
at least once), the witness saw exactly the calls the tickets need, and no call answered more
than a second before either savepoint was made again.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.test_standalone_failover import (
    CALLS_PER_TICKET,
    DELEGATION_ROUTES,
    Outputs,
    cancel,
    create_ticket_topics,
    expected_outputs,
    job_running,
    release,
    rest,
    start_producer,
    start_witness,
    submit,
    take_savepoint,
    taskmanager_log_tail,
    ticket_lines,
    totals,
    wait_for,
    write_spec,
)

pytestmark = [pytest.mark.cluster, pytest.mark.kafka, pytest.mark.flink]

MAX_PARALLELISM = 16
STORE_PARTITIONS = 2
STAGES = (1, 2, 1)  # the parallelism of each stage; a savepoint ends each but the last


def job_parallelism(cluster: Any, job_id: str) -> dict[str, int]:
    """Each vertex's parallelism (name shortened)."""
    return {v["name"][:40]: v["parallelism"] for v in rest(cluster, f"/jobs/{job_id}")["vertices"]}


def test_rescale_through_savepoints_loses_nothing_and_repeats_no_completed_call(
    flink_cluster: Any, kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.monotonic()
    run_id = uuid.uuid4().hex[:8]
    lines = ticket_lines()
    expected = expected_outputs(lines)
    # In file order, one batch per stage: each customer's seq is known.
    size = -(-len(lines) // len(STAGES))
    batches = [lines[i : i + size] for i in range(0, len(lines), size)]
    spec, topics = write_spec(tmp_path, kafka_bootstrap, run_id)
    settings = yaml.safe_load(spec.read_text())
    settings["max_parallelism"] = MAX_PARALLELISM
    settings["store"]["partitions"] = STORE_PARTITIONS
    spec.write_text(yaml.safe_dump(settings, sort_keys=False))

    admin = create_ticket_topics(kafka_bootstrap, topics)
    witness = start_witness()
    outputs = Outputs(kafka_bootstrap, topics["output"]).start()
    produced: list[float] = []
    job_id: str | None = None
    savepoints: list[tuple[float, str, dict[str, int]]] = []  # (moment, location, in flight)
    parallelisms: list[dict[str, int]] = []

    def state() -> str:
        return (
            f"job {job_id}; produced {len(produced)}/{len(lines)}, "
            f"{len(outputs.answered())} answers, witness calls {totals(witness)}\n"
            + taskmanager_log_tail(flink_cluster)
        )

    def serving_a_delegation(answers_at_least: int) -> Callable[[], bool]:
        def ready() -> bool:
            serving = witness.counters.open_now()
            return len(outputs.answered()) >= answers_at_least and bool(
                set(DELEGATION_ROUTES) & set(serving)
            )

        return ready

    try:
        for stage, parallelism in enumerate(STAGES):
            options = ["--parallelism", str(parallelism)]
            if savepoints:
                options += ["--from-savepoint", savepoints[-1][1]]
            job_id = submit(flink_cluster, spec, *options)
            wait_for("the job to run", partial(job_running, flink_cluster, job_id), 120, state)
            parallelisms.append(job_parallelism(flink_cluster, job_id))
            answered_before = len(outputs.answered())
            producer = start_producer(kafka_bootstrap, topics["input"], batches[stage], produced)
            if stage == len(STAGES) - 1:
                producer.join(timeout=60)
                break
            wait_for(
                f"stage {stage}: answers and a delegation in flight",
                serving_a_delegation(answered_before + 2),
                120,
                state,
            )
            moment = time.time()
            location = take_savepoint(flink_cluster, job_id, tmp_path / "savepoints", stop=False)
            savepoints.append((moment, location, witness.counters.in_flight_at(moment)))
            producer.join(timeout=60)
        wait_for(
            f"all {len(expected)} answers", lambda: set(expected) <= outputs.answered(), 180, state
        )
        time.sleep(2)  # late duplicates (at-least-once sink) would arrive by now
        log_tail = taskmanager_log_tail(flink_cluster, lines=400)
    except BaseException:
        print(state())
        raise
    finally:
        if job_id:
            cancel(flink_cluster, job_id)
        outputs.stop()
        release(witness, admin, topics)

    counts = witness.counters.snapshot()
    distinct = {service: len(per_key) for service, per_key in sorted(counts.items())}
    # Per savepoint, what came after it only: a call in flight at the first and sent again
    # after its restore is not a re-invocation at the second.
    reinvoked = [
        witness.counters.repeated_after(moment - 1.0, since=moment) for moment, _, _ in savepoints
    ]
    summary = [
        f"stages at parallelism {STAGES} (max {MAX_PARALLELISM}, store partitions "
        f"{STORE_PARTITIONS}): vertices {parallelisms}; done in "
        f"{time.monotonic() - started:.0f} s",
        *(
            f"savepoint {i + 1}: calls in flight {in_flight}; completed before it and "
            f"re-invoked: {reinvoked[i]}"
            for i, (_, _, in_flight) in enumerate(savepoints)
        ),
        f"witness calls {totals(witness)}; distinct {distinct}",
        "whole-topic restore after the merge logged: "
        + str("rescaled from parallelism 2 to 1" in log_tail),
    ]
    with capsys.disabled():
        print("\n" + "\n".join(f"[rescale] {line}" for line in summary))

    assert [max(p.values()) for p in parallelisms] == list(STAGES), parallelisms
    assert all(sum(in_flight.values()) for _, _, in_flight in savepoints), (
        "no call in flight at a savepoint"
    )
    records = outputs.snapshot()
    assert not [r for r in records if "error" in r], "error outputs"
    seen: dict[tuple[str, int], set[str]] = {}
    for record in records:
        seen.setdefault((record["key"], record["seq"]), set()).add(record["output"])
    assert set(seen) == set(expected), (
        f"missing {sorted(set(expected) - set(seen))}, extra {sorted(set(seen) - set(expected))}"
    )
    wrong = {k: v for k, v in seen.items() if v != {expected[k]}}
    assert not wrong, f"answers differing from the expected ones: {wrong}"
    expected_distinct = {s: n * len(lines) for s, n in CALLS_PER_TICKET.items()}
    assert distinct == dict(sorted(expected_distinct.items())), distinct
    assert not any(any(r.values()) for r in reinvoked), f"re-invoked: {reinvoked}"
