"""One run of the example job (the support desk, jobs/support_desk.yaml) on the
mini-cluster, as ``make run`` runs it: a Kafka action-state store of its own, the event log on,
and one injected task failure (:class:`~examples.demo.FailOnce`) after a checkpoint."""

from __future__ import annotations

import json
import shutil
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyflink.common import Configuration, Types
from pyflink.datastream import StreamExecutionEnvironment

from examples.demo import DEFAULT_JOB, EXAMPLE_PORT, FailOnce, demo_spec, read_outputs
from examples.services import UNKNOWN_CUSTOMERS, ExampleServices, wait_until_port_free
from flink_agents.flink.job import JobSpec
from flink_agents.flink.job_runner import build
from flink_agents.observability import CallFinished, EventLogConfig, read_records

FAIL_AFTER = 8  # outputs before the injected failure, as `make run`
# Slower services and inputs than `make run` (0.2 s, 4/s): a ticket's run (five steps of calls)
# then takes longer than the gap between tickets, so the runs in flight when the failure comes
# (at an output) are at different steps, some with calls already recorded. At the job's pace
# the runs went in step, and a failure at one's end found the next ones just begun.
SERVICE_LATENCY_S = 0.5
RECORDS_PER_SECOND = 2
# The services listen on the port the example names (EXAMPLE_PORT: its agent.yaml, and its
# researcher's tool by default): pointing them elsewhere through FLINK_AGENTS_EXAMPLE_SERVICES
# would have to be set in this process before the session's JVM starts, and would leak into
# every later test.


@dataclass(frozen=True)
class SupportDeskRun:
    """What the run left behind."""

    spec: JobSpec
    agent_file: Path
    """The agent (YAML) the job ran: a copy of the example's."""
    event_log: Path
    store_topic: str
    failed_at: float
    restart_delay_s: float
    outputs: list[dict[str, Any]]
    tickets: list[dict[str, Any]]
    requests: dict[str, int]
    """Requests the example services answered during the run, per service (they are shut
    down after it)."""


def run_support_desk(work: Path, bootstrap: str) -> SupportDeskRun:
    """Run the job once with the event log in ``work``."""
    wait_until_port_free(EXAMPLE_PORT)
    services = ExampleServices(EXAMPLE_PORT, SERVICE_LATENCY_S, UNKNOWN_CUSTOMERS)
    job_dir = work / "job"
    shutil.copytree(DEFAULT_JOB.parent / "support_desk", job_dir / "support_desk")
    shutil.copy(DEFAULT_JOB, job_dir / DEFAULT_JOB.name)
    agent_file = job_dir / "support_desk" / "agent.yaml"
    demo = demo_spec(job_dir / DEFAULT_JOB.name, work)
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
            "source": demo.source.model_copy(update={"records_per_second": RECORDS_PER_SECOND}),
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
        requests={
            service: sum(per_key.values())
            for service, per_key in services.counters.snapshot().items()
        },
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


ATTEMPTS = 3


def run_until_replayed(bootstrap: str, folders: Any) -> SupportDeskRun:
    """A run whose failure came while some run had calls recorded in an unfinished action.

    When the failure comes is up to scheduling (it waits for a checkpoint, then fires at an
    output): on a loaded machine it may come when no run is mid-action, or after the last
    one, and such a run shows nothing of replay. Then the job runs again (a fresh topic), at
    most ATTEMPTS times; ``folders`` (pytest's ``tmp_path_factory``) gives each its folder.
    """
    for attempt in range(1, ATTEMPTS + 1):
        run = run_support_desk(folders.mktemp(f"support-desk-{attempt}"), bootstrap)
        # The researcher's tool reached this run's services (see support_desk_run).
        assert run.requests.get("tool:lookup_fact", 0) >= len(run.tickets), run.requests
        logged = read_records(run.event_log)
        if any(isinstance(r, CallFinished) and r.outcome == "replayed" for r in logged):
            break
        print(f"\n[support desk] attempt {attempt}: the failure found no call to replay")
    return run
