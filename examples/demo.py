"""`make run`: the support-desk job end to end, one injected failure, and a short report.

The job (examples/jobs/support_desk.yaml) runs on the PyFlink mini-cluster with a Kafka action-state
store. The example services (model, tool, billing sub-agent) run in this process and count every
request by its idempotency key. After a few answers the job fails once on purpose; Flink
restores the last checkpoint and replays the inputs since then. The report shows what the
witness saw: a call made twice would be counted twice.

    python -m examples.demo [--fail-after 8] [--job JOB.yaml] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from pyflink.common import Types
from pyflink.datastream import MapFunction

from examples.services import Counters, ExampleServices
from flink_agents.flink.job import FileSinkSpec, JobSpec, load_job
from flink_agents.flink.job_runner import build, environment

REPO = Path(__file__).resolve().parents[1]
DEFAULT_JOB = REPO / "examples" / "jobs" / "support_desk.yaml"


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
    services: Counters,
    failed_at: float | None,
    seconds: float,
) -> dict[str, Any]:
    """What the run did, as numbers (``--json`` writes this); ``ok`` is whether it kept its
    promise: every input answered exactly once, and no call that had completed before the
    failure made again."""
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
        "seconds": round(seconds, 1),
        "ok": failed_at is not None
        and len(answered) == inputs == len(outputs)
        and not errors
        and total_reinvoked == 0,
    }


def report(
    inputs: int,
    outputs: list[dict[str, Any]],
    services: Counters,
    failed_at: float | None,
    seconds: float,
) -> tuple[str, bool]:
    """The report text, and whether the run kept its promise (see :func:`summarize`)."""
    data = summarize(inputs, outputs, services, failed_at, seconds)
    researcher, billing = data["delegations"]["researcher"], data["delegations"]["billing"]

    def per_service(values: dict[str, int]) -> str:
        return ", ".join(f"{service} {n}" for service, n in sorted(values.items()))

    lines = [
        f"inputs:       {inputs} tickets",
        f"outputs:      {data['outputs']} ({data['distinct_answers']} distinct answers, "
        f"{data['errors']} errors)",
        "failure:      "
        + ("injected once; the job restarted from its last checkpoint" if failed_at else "NONE"),
        f"delegations:  {researcher + billing} (researcher {researcher}, billing {billing})",
        f"calls seen by the services: {per_service(data['calls'])}",
        f"calls re-invoked after the failure: {data['reinvoked_total']} (expected 0) "
        f"[{per_service(data['reinvoked'])}]",
        f"calls in flight at the failure, sent again: {data['in_flight_sent_again']} "
        "(allowed: their outcome was not recorded yet)",
        f"wall time:    {seconds:.1f} s",
        f"result:       {'OK' if data['ok'] else 'FAILED'}",
    ]
    return "\n".join(lines), data["ok"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", type=Path, default=DEFAULT_JOB)
    parser.add_argument("--fail-after", type=int, default=8, help="outputs before the failure")
    parser.add_argument("--port", type=int, default=8765, help="the example services' port")
    parser.add_argument(
        "--latency", type=float, default=0.2, help="seconds each service request takes"
    )
    parser.add_argument("--json", type=Path, help="also write the report's numbers here (JSON)")
    args = parser.parse_args(argv)

    work = REPO / ".cache" / "demo" / f"run-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
    work.mkdir(parents=True)
    spec = demo_spec(args.job, work)
    inputs = sum(
        1 for line in spec.resolve(spec.source.path).read_text().splitlines() if line.strip()
    )
    services = ExampleServices(args.port, args.latency).start()
    marker = work / "failure-injected"
    print(
        f"running {spec.name}: {inputs} inputs, "
        f"store topic {spec.store.topic if spec.store else '-'}, "
        f"one failure after {args.fail_after} outputs; work folder {work}",
        flush=True,
    )

    env = environment(spec)
    build(
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
    text, ok = report(inputs, outputs, services.counters, failed_at, seconds)
    print("\n" + text)
    (work / "report.txt").write_text(text + "\n")
    if args.json:
        summary = summarize(inputs, outputs, services.counters, failed_at, seconds)
        args.json.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
