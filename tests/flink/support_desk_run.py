"""One run of the example job (the support desk, examples/jobs/support_desk.yaml) on the
mini-cluster, as ``make run`` runs it: a Kafka action-state store of its own, the event log on,
and one injected task failure (:class:`~examples.demo.FailOnce`) after a checkpoint."""

from __future__ import annotations

import json
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyflink.common import Configuration, Types
from pyflink.datastream import StreamExecutionEnvironment

from examples.demo import DEFAULT_JOB, FailOnce, demo_spec, read_outputs
from examples.services import UNKNOWN_CUSTOMERS, ExampleServices
from flink_agents.flink.job import JobSpec
from flink_agents.flink.job_runner import build
from flink_agents.observability import EventLogConfig

FAIL_AFTER = 8  # outputs before the injected failure, as `make run`
SERVICE_LATENCY_S = 0.2  # as `make run`: calls are in flight when the job fails
SERVICES_PORT = 8765


@dataclass(frozen=True)
class SupportDeskRun:
    """What the run left behind."""

    spec: JobSpec
    agent_file: Path
    """The agent (YAML) the job ran."""
    event_log: Path
    store_topic: str
    failed_at: float
    restart_delay_s: float
    outputs: list[dict[str, Any]]
    tickets: list[dict[str, Any]]
    requests_served: int
    """Requests the example services answered during the run (they are shut down after it)."""


def run_support_desk(work: Path, bootstrap: str) -> SupportDeskRun:
    """Run the job once with the event log in ``work``."""
    # The port the example's agent and its researcher's tool name (examples/services.py).
    services = ExampleServices(SERVICES_PORT, SERVICE_LATENCY_S, UNKNOWN_CUSTOMERS)
    agent_file = DEFAULT_JOB.parent / "support_desk" / "agent.yaml"
    demo = demo_spec(DEFAULT_JOB, work)
    assert demo.store is not None
    store = demo.store.model_copy(
        update={
            "bootstrap_servers": bootstrap,
            "topic": f"test-support-desk-{uuid.uuid4().hex[:12]}",
        }
    )
    event_log = work / "events.jsonl"
    spec = demo.model_copy(
        update={
            "store": store,
            "event_log": EventLogConfig(path=str(event_log)),
        }
    )
    spec._base_dir = demo.base_dir

    env = _environment(spec)
    marker = work / "failure-injected"
    build(
        spec,
        env,
        before_sink=lambda outputs: outputs.map(
            FailOnce(str(marker), FAIL_AFTER, str(spec.checkpoint_dir())),
            output_type=Types.STRING(),
        ),
    )
    services.start()
    try:
        env.execute(spec.name)
    finally:
        services.shutdown()
        services.server_close()
    assert marker.exists(), "the injected failure did not happen"
    tickets = [
        json.loads(line)
        for line in spec.resolve(spec.source.path).read_text().splitlines()
        if line.strip()
    ]
    return SupportDeskRun(
        spec=spec,
        agent_file=agent_file,
        event_log=event_log,
        store_topic=store.topic,
        failed_at=float(marker.read_text()),
        restart_delay_s=spec.restart_strategy.delay_ms / 1000,
        outputs=read_outputs(work / "out"),
        tickets=tickets,
        requests_served=sum(
            sum(per_key.values()) for per_key in services.counters.snapshot().values()
        ),
    )


def _environment(spec: JobSpec) -> StreamExecutionEnvironment:
    """The spec's environment in the session's JVM (as ``make_flink_env`` makes one)."""
    config = Configuration()
    for name, value in spec.flink_config().items():
        config.set_string(name, value)
    config.set_string("python.executable", sys.executable)
    config.set_string("python.client.executable", sys.executable)
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(spec.parallelism)
    return env
