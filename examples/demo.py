"""`make run`: the support-desk job end to end, one injected failure, and a short report.

The job (jobs/support_desk.yaml) runs on the PyFlink mini-cluster with a Kafka action-state
store. The example services (model, tool, billing sub-agent) run in this process and count every
request by its idempotency key. The billing service does not know two customers
(:data:`~examples.services.UNKNOWN_CUSTOMERS`): their delegations fail for good (404), and the
desk's model is told so. After a few answers the job fails once on purpose; Flink restores the
last checkpoint and replays the inputs since then. The report shows what the witness saw: a call
made twice would be counted twice, a recorded failure sent again too, and every ticket's model
conversation is compared byte for byte with a no-fault run's (the same agent over the same tickets
on the local runner, before the job: no Flink, no store, no failure).

    python -m examples.demo [--fail-after 8] [--job JOB.yaml] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyflink.common import Types
from pyflink.datastream import MapFunction

from examples.services import UNKNOWN_CUSTOMER, UNKNOWN_CUSTOMERS, ExampleServices
from flink_agents.flink import FileSinkSpec, JobSpec, build_job, job_environment, load_job
from flink_agents.plan import AgentPlan
from flink_agents.runtime import outputs_of, run_local

REPO = Path(__file__).resolve().parents[1]
DEFAULT_JOB = REPO / "jobs" / "support_desk.yaml"
EXAMPLE_PORT = 8765
"""The services' port the example job names (its agent file, its researcher's tool)."""
SERVICES_URL_ENV = "FLINK_AGENTS_EXAMPLE_SERVICES"


class FailOnce(MapFunction):
    """Raises once: at the first output from the ``after``-th on that passes once a checkpoint
    has completed in ``checkpoints`` (so the restart restores a real checkpoint, not the start).

    The marker is a file, not a variable: module state survives a restart inside one local
    mini-cluster, a file is what tells the restarted job that the failure already happened.
    """

    def __init__(self, marker: str, after: int, checkpoints: str) -> None:
        self._marker = marker
        self._after = after
        self._checkpoints = checkpoints

    def open(self, runtime_context: Any) -> None:
        self._seen = 0

    def map(self, value: str) -> str:
        self._seen += 1
        marker = Path(self._marker)
        if (
            self._seen >= self._after
            and not marker.exists()
            and any(Path(self._checkpoints).rglob("chk-*/_metadata"))
        ):
            marker.write_text(str(time.time()))
            raise RuntimeError(f"injected failure at output {self._seen} (demo)")
        return value


def demo_spec(job: Path, work: Path) -> JobSpec:
    """The job spec with its output in ``work`` and a store topic of this run's own."""
    spec = load_job(job)
    updated = spec.model_copy(
        update={
            "sink": FileSinkSpec(kind="file", path=str(work / "out")),
            "checkpointing": spec.checkpointing.model_copy(update={"dir": str(work / "ckpt")}),
            "store": spec.store.model_copy(update={"topic": f"{spec.store.topic}-{work.name}"})
            if spec.store
            else None,
        }
    )
    updated._base_dir = spec.base_dir
    return updated


def serve_on(spec: JobSpec, port: int, work: Path) -> None:
    """Point the job of ``spec`` at services on ``port``: a copy of its agent file in ``work``
    names that port, and so does the researcher's tool. Services of a run beside this one (a
    test, a crash matrix, another ``make run``) must not count this job's calls, nor this run's
    services theirs."""
    agent = spec.resolve(spec.agent)
    copy = work / agent.name
    copy.write_text(agent.read_text().replace(f"127.0.0.1:{EXAMPLE_PORT}", f"127.0.0.1:{port}"))
    spec.agent = str(copy)
    # The desk's tool reads it when its module is first imported (here and in the workers, which
    # inherit this environment).
    os.environ[SERVICES_URL_ENV] = f"http://127.0.0.1:{port}"


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class NoFaultRun:
    """What a run without a failure did: each ticket's model conversation and the outputs."""

    conversations: dict[str, list[str]]
    outputs: list[str]
    """Output records as the job writes them (JSON lines)."""


def no_fault_run(
    spec: JobSpec,
    records: list[dict[str, Any]],
    port: int,
    unknown_customers: frozenset[str] = UNKNOWN_CUSTOMERS,
) -> NoFaultRun:
    """A run without a failure: the job's agent over the same records on the local runner (the
    engine the Flink operator runs per key; no store), against services of its own on ``port``
    that refuse ``unknown_customers`` (the demo's witness refuses these)."""
    # The plan as the job ships it to its operators: through its JSON form, which orders the
    # keys of every schema a model is sent.
    plan = AgentPlan.from_json(spec.plan().to_json())
    services = ExampleServices(port, unknown_customers=unknown_customers).start()
    try:
        results = run_local(plan, records, key=spec.key)
    finally:
        services.shutdown()
        services.server_close()
    outputs = [record.to_json() for result in results for record in outputs_of(result)]
    return NoFaultRun(services.conversations.by_ticket(), outputs)


def read_outputs(folder: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for part in sorted(folder.rglob("*"))
        if part.is_file() and not part.name.startswith(".")
        for line in part.read_text().splitlines()
        if line.strip()
    ]


def summarize(
    inputs: int,
    outputs: list[dict[str, Any]],
    witness: ExampleServices,
    reference: Mapping[str, list[str]],
    failed_at: float | None,
    restart_delay: float,
    seconds: float,
) -> dict[str, Any]:
    """What the run did, as numbers (``--json`` writes this); ``ok`` is whether it kept its
    promise: every input answered exactly once, no call that had completed before the failure
    made again (a recorded failure included), and every ticket's model conversation equal to
    the no-fault run's (``reference``), byte for byte."""
    services = witness.counters
    counts = services.snapshot()
    answered = {(o["key"], o["seq"]) for o in outputs if "output" in o}
    errors = [o for o in outputs if "error" in o]
    sent = {service: sum(per_key.values()) for service, per_key in sorted(counts.items())}
    resent = {
        service: sum(n - 1 for n in per_key.values()) for service, per_key in sorted(counts.items())
    }
    # A call completed at least a second before the failure has certainly been recorded.
    reinvoked = services.repeated_after(failed_at - 1.0) if failed_at else {}
    total_reinvoked = sum(reinvoked.values())
    failures_reinvoked = services.failures_repeated_after(failed_at - 1.0) if failed_at else {}
    # A billing failure answered once before the failure whose ticket's model was told about it
    # by the restarted job: the replay handed the recorded failure back.
    handed_back = (
        [
            ticket
            for ticket in services.failed_once_before("billing", failed_at)
            if witness.conversations.received_after(
                ticket, failed_at + restart_delay, UNKNOWN_CUSTOMER
            )
        ]
        if failed_at
        else []
    )
    conversations = witness.conversations.by_ticket()
    equal = sum(1 for ticket, bodies in reference.items() if conversations.get(ticket) == bodies)
    return {
        "inputs": inputs,
        "outputs": len(outputs),
        "distinct_answers": len(answered),
        "errors": len(errors),
        "failure_injected": failed_at is not None,
        "delegations": {
            "researcher": len(counts.get("tool:lookup_fact", {})),
            "billing": len(counts.get("billing", {})),
        },
        "calls": sent,
        "reinvoked": reinvoked,
        "reinvoked_total": total_reinvoked,
        "in_flight_sent_again": sum(resent.values()) - total_reinvoked,
        "billing_failures": services.failures().get("billing", 0),
        "billing_failures_reinvoked": failures_reinvoked.get("billing", 0),
        "billing_failures_handed_back": len(handed_back),
        "conversations_equal": equal,
        "conversations_compared": len(reference),
        # Tickets the job's model requests name (``?``: a request naming none); more than the
        # inputs means requests the no-fault run did not make.
        "conversations_of_job": sorted(conversations),
        "seconds": round(seconds, 1),
        "ok": failed_at is not None
        and len(answered) == inputs == len(outputs)
        and not errors
        and total_reinvoked == 0
        and equal == inputs == len(reference) == len(conversations),
    }


def report(data: dict[str, Any]) -> str:
    """The report text of :func:`summarize`'s numbers."""
    inputs, seconds = data["inputs"], data["seconds"]
    researcher, billing = data["delegations"]["researcher"], data["delegations"]["billing"]

    def per_service(values: dict[str, int]) -> str:
        return ", ".join(f"{service} {n}" for service, n in sorted(values.items()))

    lines = [
        f"inputs:       {inputs} tickets",
        f"outputs:      {data['outputs']} ({data['distinct_answers']} distinct answers, "
        f"{data['errors']} errors)",
        "failure:      "
        + (
            "injected once; the job restarted from its last checkpoint"
            if data["failure_injected"]
            else "NONE"
        ),
        f"delegations:  {researcher + billing} (researcher {researcher}, billing {billing})",
        f"calls seen by the services: {per_service(data['calls'])}",
        f"calls re-invoked after the failure: {data['reinvoked_total']} (expected 0) "
        f"[{per_service(data['reinvoked'])}]",
        f"calls in flight at the failure, sent again: {data['in_flight_sent_again']} "
        "(allowed: their outcome was not recorded yet)",
        f"billing failures: {data['billing_failures']} final (unknown customer), "
        f"{data['billing_failures_reinvoked']} re-invoked (expected 0), "
        f"{data['billing_failures_handed_back']} handed to the model again by the replay",
        f"conversations equal to the no-fault run: {data['conversations_equal']}/{inputs} "
        "(every model request of every ticket, byte for byte)"
        + (
            ""
            if len(data["conversations_of_job"]) == inputs
            else f"; the job's requests name {len(data['conversations_of_job'])} tickets"
            f" (expected {inputs}; '?' stands for none)"
        ),
        f"wall time:    {seconds:.1f} s",
        f"result:       {'OK' if data['ok'] else 'FAILED'}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", type=Path, default=DEFAULT_JOB)
    parser.add_argument("--fail-after", type=int, default=8, help="outputs before the failure")
    parser.add_argument(
        "--port", type=int, default=0, help="the example services' port (default: a free one)"
    )
    parser.add_argument(
        "--latency", type=float, default=0.2, help="seconds each service request takes"
    )
    parser.add_argument("--json", type=Path, help="also write the report's numbers here (JSON)")
    args = parser.parse_args(argv)

    work = REPO / ".cache" / "demo" / f"run-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
    work.mkdir(parents=True)
    spec = demo_spec(args.job, work)
    port = args.port or free_port()
    serve_on(spec, port, work)
    records = [
        json.loads(line)
        for line in spec.resolve(spec.source.path).read_text().splitlines()
        if line.strip()
    ]
    inputs = len(records)
    print(f"no-fault reference run of {spec.name} on the local runner", flush=True)
    reference = no_fault_run(spec, records, port).conversations
    services = ExampleServices(port, args.latency, UNKNOWN_CUSTOMERS).start()
    marker = work / "failure-injected"
    print(
        f"running {spec.name}: {inputs} inputs, "
        f"store topic {spec.store.topic if spec.store else '-'}, "
        f"one failure after {args.fail_after} outputs; work folder {work}",
        flush=True,
    )

    env = job_environment(spec)
    build_job(
        spec,
        env,
        before_sink=lambda outputs: outputs.map(
            FailOnce(str(marker), args.fail_after, str(spec.checkpoint_dir())),
            output_type=Types.STRING(),
        ),
    )
    started = time.monotonic()
    env.execute(spec.name)
    seconds = time.monotonic() - started
    services.shutdown()

    failed_at = float(marker.read_text()) if marker.exists() else None
    outputs = read_outputs(work / "out")
    restart_delay = spec.restart_strategy.delay_ms / 1000
    summary = summarize(inputs, outputs, services, reference, failed_at, restart_delay, seconds)
    text = report(summary)
    print("\n" + text)
    (work / "report.txt").write_text(text + "\n")
    # What was compared, for a look at any difference.
    for name, compared in (("no-fault", reference), ("job", services.conversations.by_ticket())):
        (work / f"conversations-{name}.json").write_text(json.dumps(compared, indent=1) + "\n")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
