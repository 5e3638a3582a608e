"""The customer-memory example (long-term memory, docs/memory.md) on the mini-cluster with the
Kafka action-state store: the second ticket of a customer is answered from the first."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from flink_agents.flink.job import load_job

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.flink
@pytest.mark.kafka
def test_the_second_ticket_is_answered_from_the_first(
    tmp_path: Path, fresh_flink_env: object, kafka_bootstrap: str
) -> None:
    from flink_agents.flink.job_runner import build

    out = tmp_path / "out"
    spec = (REPO / "jobs" / "customer_memory.yaml").read_text()
    spec = spec.replace(
        "agent: ../examples/customer_memory.yaml", f"agent: {REPO}/examples/customer_memory.yaml"
    )
    spec = spec.replace("path: data/", f"path: {REPO}/jobs/data/")
    spec = spec.replace("kind: stdout", f"kind: file\n  path: {out}")
    spec = spec.replace("127.0.0.1:9092", kafka_bootstrap)
    spec = spec.replace("flink-agents-customer-memory", f"test-memory-{uuid.uuid4().hex[:12]}")
    job = tmp_path / "customer_memory.yaml"
    job.write_text(spec)
    loaded = load_job(job)
    assert loaded.settings.store is not None and loaded.settings.store.kind == "kafka"

    build(loaded, fresh_flink_env)
    fresh_flink_env.execute("customer-memory")  # type: ignore[attr-defined]

    lines = [
        json.loads(line)
        for part in out.rglob("*")
        if part.is_file() and not part.name.startswith(".")
        for line in part.read_text().splitlines()
    ]
    answers = {(line["key"], line["seq"]): line["output"]["answer"] for line in lines}
    assert answers == {
        ("ada", 0): "Thanks, noted. We are looking into it.",
        ("ada", 1): "For your XR-500: install firmware 2.4.",
        ("bob", 0): "Thanks, noted. We are looking into it.",
        ("bob", 1): "Which router model do you have?",
        ("cyd", 0): "Which router model do you have?",
    }
