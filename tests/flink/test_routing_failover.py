"""A routed agent run as a Flink job with the Kafka action-state store: the primary connection is
rate-limited mid-stream (429 with Retry-After) and calls move to the fallback; then the job fails
for real, and the restore replays the recorded model choice: no call completed before the
failure reaches either server again, and each input's answer is from the model that first
answered it.

Both servers are fake OpenAI-compatible servers in this process; each logs every request (its
question, when, and the status it answered). The job reads paced inputs, checkpoints every 300 ms
and fails once (``FailOnce`` of examples/demo.py) once a checkpoint exists and some outputs have
passed; Flink restores the checkpoint and replays the inputs since then.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyflink.common import Encoder, Types
from pyflink.datastream.connectors.file_system import FileSink

from examples.demo import FailOnce, read_outputs
from flink_agents.durable.store.store_config import StoreConfig
from flink_agents.flink import AgentsExecutionEnvironment, OperatorOptions
from tests.flink.conftest import job_spec_settings
from tests.flink.failover_counts import recorded_before
from tests.providers.fake_servers import FakeModelServer, RecordedRequest, ScriptedResponse
from tests.providers.openai_servers import completion
from tests.providers.routing_samples import routed_plan

pytestmark = [pytest.mark.flink, pytest.mark.kafka]

INPUTS = 30
RECORDS_PER_SECOND = 5
PRIMARY_ANSWERS = 8  # then the primary refuses every request: rate-limited mid-stream
FAIL_AFTER = 16  # outputs before the injected failure
ANSWER_SECONDS = 0.2  # so that calls are in flight when the job fails
RESTART_DELAY_S = 0.5


@dataclass(frozen=True)
class Request:
    question: str
    at: float
    status: int


class LoggingServer(FakeModelServer):
    """A chat-completions server answering ``{model}: {question}``; after ``answers`` answers
    it refuses every request with a 429 and ``Retry-After: 1``. Every request is logged."""

    def __init__(self, model: str, answers: int | None = None) -> None:
        self.model = model
        self.answers = answers
        self.log: list[Request] = []
        self._log_lock = threading.Lock()
        super().__init__(self._answer)

    def _answer(self, request: RecordedRequest) -> ScriptedResponse:
        question = request.json()["messages"][-1]["content"]
        with self._log_lock:
            answered = sum(1 for r in self.log if r.status == 200)
            refuse = self.answers is not None and answered >= self.answers
            self.log.append(Request(question, time.time(), 429 if refuse else 200))
        if refuse:
            error = {"message": "rate limit reached", "type": "requests", "code": "rate_limit"}
            return ScriptedResponse(status=429, body={"error": error}, headers={"Retry-After": "1"})
        time.sleep(ANSWER_SECONDS)
        return ScriptedResponse(body=completion(f"{self.model}: {question}"))

    def answered(self) -> dict[str, float]:
        """Question -> when it was first answered (the answer ends a moment later)."""
        first: dict[str, float] = {}
        for request in self.log:
            if request.status == 200:
                first.setdefault(request.question, request.at + ANSWER_SECONDS)
        return first

    def asked_after(self, moment: float) -> set[str]:
        return {request.question for request in self.log if request.at > moment}


def test_a_rate_limited_primary_moves_calls_to_the_fallback_and_a_failover_replays_the_choice(
    make_flink_env: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    primary, spare = LoggingServer("big", answers=PRIMARY_ANSWERS), LoggingServer("small")
    with primary, spare:
        plan = routed_plan(
            {
                "primary": (primary.base_url, "big"),
                "spare": (spare.base_url, "small"),
            },
            connections=["primary", "spare"],
        )
        records = [{"key": i, "q": f"q{i}"} for i in range(INPUTS)]
        checkpoints = tmp_path / "ckpt"
        env = make_flink_env(
            **job_spec_settings(
                checkpoints,
                execution_mode="process",
                accept_slow_process_mode=True,
                checkpointing={"interval_ms": 300},
                restart_strategy={"delay_ms": int(RESTART_DELAY_S * 1000)},
            )
        )
        store = StoreConfig(
            kind="kafka",
            bootstrap_servers=kafka_bootstrap,
            topic=f"test-routing-failover-{uuid.uuid4().hex[:12]}",
        )
        agents = AgentsExecutionEnvironment(
            env, options=OperatorOptions(max_in_flight=8), store=store
        )
        outputs = (
            agents.from_list(records, key="key", records_per_second=RECORDS_PER_SECOND)
            .apply(plan)
            .to_datastream()
        )
        marker = tmp_path / "failure-injected"
        outputs = outputs.map(
            FailOnce(str(marker), FAIL_AFTER, str(checkpoints)), output_type=Types.STRING()
        )
        out_dir = tmp_path / "out"
        outputs.sink_to(
            FileSink.for_row_format(str(out_dir), Encoder.simple_string_encoder()).build()
        )
        env.execute("routing-failover")

    assert marker.exists(), "the injected failure did not happen"
    failed_at = float(marker.read_text())

    # Every input answered once; the primary answered the first ones, the spare the rest.
    answers = read_outputs(out_dir)
    assert not [line for line in answers if "error" in line], answers
    assert sorted(line["key"] for line in answers) == list(range(INPUTS))
    by_primary, by_spare = primary.answered(), spare.answered()
    assert len(by_primary) == PRIMARY_ANSWERS
    assert [r for r in primary.log if r.status == 429], "the primary was never rate-limited"

    # Calls answered well before the failure: handed back from the store after it, so no
    # request for them reached either server, and the output is the recorded model's answer.
    completed = {
        question
        for question in (f"q{i}" for i in range(INPUTS))
        if recorded_before(failed_at, by_primary.get(question))
        or recorded_before(failed_at, by_spare.get(question))
    }
    asked_again = (primary.asked_after(failed_at) | spare.asked_after(failed_at)) & completed
    output_of = {f"q{line['key']}": line["output"] for line in answers}
    from_recorded_model = {
        question
        for question in completed
        if output_of[question]
        == (f"big: {question}" if question in by_primary else f"small: {question}")
    }
    completed_by = (
        len(completed & by_primary.keys()),
        len(completed & by_spare.keys()),
    )
    print(
        f"\n[routing failover] primary answered {len(by_primary)}, refused "
        f"{sum(r.status == 429 for r in primary.log)}; spare answered {len(by_spare)}; "
        f"completed before the failure {len(completed)} (primary, spare: {completed_by}); "
        f"asked again after it: {len(asked_again)}"
    )
    assert completed_by[0] > 0 and completed_by[1] > 0, completed_by
    assert len(completed) < INPUTS, "the failure came after every call"
    assert asked_again == set(), sorted(asked_again)
    assert from_recorded_model == completed, sorted(completed - from_recorded_model)
