"""The crash matrix: the support-desk job killed at every named kill point, again and again.

Each run is the support-desk job (jobs/support_desk.yaml: a model, a tool, an internal
and an external sub-agent, two customers whose billing delegations fail for good) on the PyFlink
mini-cluster with a Kafka action-state store, its operator armed to crash once at a kill point
(flink_agents/durable/faults.py) at a passage drawn from a seeded random generator. Flink
restarts the job from its last checkpoint. The example services, in the same process (thread
mode), count every request by its idempotency key. The oracle of a run
(:mod:`bench.crash_oracle` joins the services' counts with the store's topic):

* **re-invoked**: requests, made after a crash, for a call whose outcome was on the store's
  topic before it (a replay must hand it back): must be 0;
* **lost**: outputs of the no-fault run (the same agent over the same tickets on the local
  runner) missing from the job's outputs; **extra**: outputs the no-fault run does not have
  (content differs); **duplicates**: outputs written twice: all must be 0;
* **sent again** (all repeated requests) must not exceed the calls **in flight** at the crash
  (sent by the crashed attempt, its outcome not on the topic at the crash);
* **recovery**: from the (last) crash to the first checkpoint completed after it.

Every run is a subprocess of its own (a fresh JVM and interpreter, so a kill point's counts and
the services' counters start at zero). A first run without a fault counts how often the workload
passes each point; the kill passages are drawn from those counts.

    python -m bench.crash_matrix [--runs 5] [--seed 14] [--points after-output ...] [--doc FILE]

``make crash-matrix`` runs the full matrix and writes docs/reliability.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.crash_oracle import ModelCalls, completed_at, judge, requests_of, terminal_records
from examples.demo import DEFAULT_JOB, demo_spec, free_port, no_fault_run, read_outputs, serve_on
from examples.services import UNKNOWN_CUSTOMERS, ExampleServices
from flink_agents.durable.faults import WAIT_POINTS, FaultPlan, KillPoint

REPO = Path(__file__).resolve().parents[1]
HAND_WRITTEN = "<!-- hand-written below: kept when the matrix is regenerated -->"
"""The line of the matrix's document after which :func:`write_doc` keeps what is there."""
"""The port the agent file names (``make run``'s)."""
"""Where the desk's tool finds the services (examples/support_desk.py)."""
COUNT_ONLY = 1_000_000_000
"""A passage no run reaches: arms a point only to count its passages."""
SERVICE_LATENCY_S = 0.1
"""Seconds each service request takes: several calls are in flight at any moment."""


@dataclass(frozen=True)
class Scenario:
    """One row of the matrix: where the crash happens."""

    name: str
    point: KillPoint
    first: KillPoint | None = None
    """For a second crash while replaying: the point of the first crash."""

    def kill_points(self, hits: dict[str, int], rng: random.Random) -> str:
        """The fault plan of one run: the passage of each crash drawn from the passages a
        no-fault run made (its first 80 %, so the job still has work after the crash)."""
        if self.first is None:
            return f"{self.point.value}@{_draw(hits.get(self.point.value, 1), rng)}"
        first = f"{self.first.value}@{_draw(hits.get(self.first.value, 1), rng)}"
        # A replay hands back a few recorded calls per key it replays: crash at one of them.
        return f"{first},{self.point.value}@{rng.randint(1, 3)}"


def _draw(passages: int, rng: random.Random) -> int:
    return rng.randint(1, max(1, int(passages * 0.8)))


SCENARIOS: tuple[Scenario, ...] = (
    *(
        Scenario(p.value, p)
        for p in KillPoint
        # The desk's runs never wait: bench/crash_waits.py crashes the refunds job at those.
        if p is not KillPoint.DURING_RESTORE and p not in WAIT_POINTS
    ),
    Scenario(
        KillPoint.DURING_RESTORE.value, KillPoint.DURING_RESTORE, KillPoint.AFTER_RECORD_ACKED
    ),
)


@dataclass
class RunReport:
    """The oracle's figures for one run (``--one`` prints this as JSON)."""

    scenario: str
    seed: int
    kill_points: str
    fired: dict[str, float]
    inputs: int
    outputs: int
    lost: int
    extra: int
    duplicates: int
    reinvoked: int
    sent_again: int
    in_flight: int
    unmatched: int
    recovery_s: float | None
    conversations_equal: int
    seconds: float
    armed: list[float] = field(default_factory=list)
    """When each attempt of the job armed its kill points (epoch seconds)."""
    resent: list[str] = field(default_factory=list)
    """The calls sent again, with their request and record times from the crash."""
    hits: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return (
            bool(self.fired) == (self.scenario != "none")
            and self.lost == self.extra == self.duplicates == self.reinvoked == 0
            and self.unmatched == 0
            and self.sent_again <= self.in_flight
        )


class CheckpointWatch:
    """Notes when each completed checkpoint (``chk-N/_metadata``) first appears in ``folder``."""

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self.seen: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="checkpoint-watch", daemon=True)

    def __enter__(self) -> CheckpointWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def first_after(self, moment: float) -> float | None:
        later = [at for at in self.seen.values() if at > moment]
        return min(later) if later else None

    def _watch(self) -> None:
        while not self._stop.wait(0.05):
            for metadata in self._folder.rglob("chk-*/_metadata"):
                self.seen.setdefault(str(metadata.parent), time.time())


def run_one(scenario: Scenario | None, seed: int, kill_points: str, port: int) -> RunReport:
    """One run of the support-desk job with ``kill_points`` armed (none: count passages), its
    services on ``port`` (0: a free one)."""
    from flink_agents.flink.job_runner import build, environment

    port = port or free_port()

    work = REPO / ".cache" / "crash-matrix" / f"{scenario.name if scenario else 'none'}-{seed}"
    work = work.with_name(f"{work.name}-{uuid.uuid4().hex[:6]}")
    work.mkdir(parents=True)
    spec = demo_spec(DEFAULT_JOB, work)
    serve_on(spec, port, work)
    armed = kill_points or ",".join(f"{p.value}@{COUNT_ONLY}" for p in KillPoint)
    spec.operator = spec.operator.model_copy(
        update={"kill_points": armed, "kill_markers_dir": str(work / "faults")}
    )
    records = [
        json.loads(line)
        for line in spec.resolve(spec.source.path).read_text().splitlines()
        if line.strip()
    ]
    reference = no_fault_run(spec, records, port)
    services = ExampleServices(port, SERVICE_LATENCY_S, UNKNOWN_CUSTOMERS).start()
    env = environment(spec)
    build(spec, env)
    started = time.monotonic()
    try:
        with CheckpointWatch(spec.checkpoint_dir()) as watch:
            env.execute(spec.name)
    finally:
        services.shutdown()
        services.server_close()
    seconds = time.monotonic() - started

    # What the Python workers (another process than this client) left in the marker folder.
    plan = FaultPlan.parse(armed, work / "faults")
    fired = {p.value: at for p in KillPoint if (at := plan.fired_at(p)) is not None}
    written = read_outputs(work / "out")
    outputs = [_canonical(json.dumps(o)) for o in written]
    expected = {_canonical(o) for o in reference.outputs}
    got = set(outputs)
    assert spec.store is not None
    outcomes = terminal_records(spec.store)
    verdict = judge(
        requests_of(services),
        completed_at(outcomes, ModelCalls(services)),
        list(fired.values()),
        plan.armed_at(),
    )
    last_crash = max(fired.values()) if fired else None
    checkpoint = watch.first_after(last_crash) if last_crash else None
    conversations = services.conversations.by_ticket()
    return RunReport(
        scenario=scenario.name if scenario else "none",
        seed=seed,
        kill_points=kill_points,
        fired=fired,
        inputs=len(records),
        outputs=len(outputs),
        lost=len(_runs_of(expected) - _runs_of(got)),
        extra=len(got - expected),
        duplicates=len(outputs) - len(got),
        reinvoked=verdict.reinvoked,
        sent_again=verdict.sent_again,
        in_flight=verdict.in_flight,
        unmatched=verdict.unmatched,
        recovery_s=round(checkpoint - last_crash, 2) if checkpoint and last_crash else None,
        conversations_equal=sum(
            1
            for ticket, bodies in reference.conversations.items()
            if conversations.get(ticket) == bodies
        ),
        seconds=round(seconds, 1),
        armed=plan.armed_at(),
        resent=verdict.resent,
        hits={p.value: n for p, n in plan.passages().items()} if not kill_points else {},
    )


def _canonical(text: str) -> str:
    return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))


def _runs_of(outputs: set[str]) -> set[tuple[str, int]]:
    """The (key, seq) of the runs ``outputs`` answer: an input without one is lost."""
    return {(json.dumps(o["key"]), o["seq"]) for o in map(json.loads, outputs)}


RUN_TIMEOUT_S = 300
"""A run taking longer has hung (a restart loop, a lost input the bounded job waits for)."""


def run_in_subprocess(
    scenario: Scenario | None, seed: int, kill_points: str, port: int, log: Path
) -> RunReport:
    """:func:`run_one` in a fresh interpreter and JVM (its output in ``log``); its report."""
    name = scenario.name if scenario else "none"
    arguments = ["--one", name, "--seed", str(seed), "--kill-points", kill_points]
    arguments += ["--port", str(port)]
    return RunReport(**run_subprocess("bench.crash_matrix", arguments, log))


def run_subprocess(
    module: str, arguments: list[str], log: Path, timeout_s: float = RUN_TIMEOUT_S
) -> dict[str, Any]:
    """``python -m module *arguments --out REPORT`` in a fresh interpreter and JVM (its output
    in ``log``), stopped after ``timeout_s``: the JSON report the run wrote."""
    out = log.with_suffix(".json")
    command = [sys.executable, "-m", module, *arguments, "--out", str(out)]
    # PyFlink marks a process that ran Python functions in loopback mode (a test process, if
    # Flink tests ran before) with PYFLINK_GATEWAY_DISABLED; a run must not inherit that.
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYFLINK_")}
    with log.open("w") as sink:
        try:
            subprocess.run(
                command,
                cwd=REPO,
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired:
            raise RuntimeError(
                f"run {log.stem} did not finish within {timeout_s} s: see {log}; "
                f"continue the matrix with --resume {log.parent}"
            ) from None
    if not out.exists():
        raise RuntimeError(f"run {log.stem} failed: see {log}")
    found: dict[str, Any] = json.loads(out.read_text())
    return found


@dataclass(frozen=True)
class Row:
    """The matrix row of one scenario."""

    scenario: str
    runs: list[RunReport]

    def total(self, name: str) -> int:
        return sum(getattr(run, name) for run in self.runs)

    def recovery(self) -> str:
        return p50_max(r.recovery_s for r in self.runs if r.recovery_s is not None)

    def wall_time(self) -> str:
        return p50_max(r.seconds for r in self.runs)

    @property
    def ok(self) -> bool:
        return all(run.ok for run in self.runs)


def p50_max(values: Iterable[float]) -> str:
    ordered = sorted(values)
    if not ordered:
        return "-"
    return f"{statistics.median(ordered):.1f} / {ordered[-1]:.1f}"


def matrix(
    scenarios: Sequence[Scenario], runs: int, seed: int, port: int, logs: Path
) -> tuple[RunReport, list[Row]]:
    """The no-fault run, then ``runs`` runs of each scenario (printed as they finish).

    A run whose report ``logs`` already holds (a matrix interrupted, continued with
    ``--resume``) is read back, not run again; the seeded draws are the same either way.
    """
    logs.mkdir(parents=True, exist_ok=True)
    baseline = _finished(logs / "none.json") or run_in_subprocess(
        None, seed, "", port, logs / "none.log"
    )
    _progress(baseline)
    rng = random.Random(seed)
    rows = []
    for scenario in scenarios:
        reports = []
        for i in range(runs):
            kill_points = scenario.kill_points(baseline.hits, rng)
            report = _finished(logs / f"{scenario.name}-{i}.json") or run_in_subprocess(
                scenario, seed, kill_points, port, logs / f"{scenario.name}-{i}.log"
            )
            _progress(report)
            reports.append(report)
        rows.append(Row(scenario.name, reports))
    return baseline, rows


def _finished(report: Path) -> RunReport | None:
    return RunReport(**json.loads(report.read_text())) if report.exists() else None


def read_matrix(logs: Path, scenarios: Sequence[Scenario]) -> tuple[RunReport, list[Row]]:
    """The runs a (possibly interrupted) matrix wrote to ``logs``; scenarios without a finished
    run are left out."""

    rows = []
    for scenario in scenarios:
        found = [_finished(path) for path in sorted(logs.glob(f"{scenario.name}-*.json"))]
        if found:
            rows.append(Row(scenario.name, [report for report in found if report]))
    baseline = _finished(logs / "none.json")
    if baseline is None:
        raise SystemExit(f"{logs} holds no no-fault run (none.json)")
    return baseline, rows


def _progress(report: RunReport) -> None:
    print(
        f"{report.scenario:28} {report.kill_points or '(no fault)':55} "
        f"{'ok' if report.ok else 'FAILED'} {json.dumps(asdict(report), sort_keys=True)}",
        flush=True,
    )


def render(
    baseline: RunReport, rows: Sequence[Row], command: str, seconds: float, commit: str
) -> str:
    """The generated part of docs/reliability.md: the matrix table and how it was made."""
    table = [
        "| kill point | runs | re-invoked | lost | duplicate outputs | other outputs "
        "| sent again / in flight | recovery p50 / max (s) | wall time p50 / max (s) | result |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        table.append(
            f"| `{row.scenario}` | {len(row.runs)} | {row.total('reinvoked')} | "
            f"{row.total('lost')} | {row.total('duplicates')} | {row.total('extra')} | "
            f"{row.total('sent_again')} / {row.total('in_flight')} | {row.recovery()} | "
            f"{row.wall_time()} | {'ok' if row.ok else 'FAILED'} |"
        )
    runs = [
        f"| `{r.scenario}` | `{r.kill_points}` | {r.reinvoked} | {r.lost} | {r.duplicates} | "
        f"{r.extra} | {r.sent_again} / {r.in_flight} | {r.unmatched} | "
        f"{'-' if r.recovery_s is None else r.recovery_s} | {r.seconds} | "
        f"{r.conversations_equal}/{r.inputs} |"
        for row in rows
        for r in row.runs
    ]
    return "\n".join(
        [
            "# Reliability: the crash matrix",
            "",
            "Generated by `make crash-matrix` (`bench/crash_matrix.py`); edit only below the "
            "hand-written marker at the end, which regenerating keeps.",
            "",
            f"- command: `{command}`",
            f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; commit: `{commit}`;"
            f" wall time {seconds / 60:.1f} min",
            f"- workload: the support desk (`jobs/support_desk.yaml`), {baseline.inputs}"
            " tickets, a Kafka action-state store, the PyFlink mini-cluster (thread mode), "
            f"services answering in {SERVICE_LATENCY_S} s; no-fault run: {baseline.outputs} "
            f"outputs, {baseline.lost} lost, {baseline.extra} other, in {baseline.seconds} s",
            "",
            *table,
            "",
            "## What the columns count",
            "",
            "Each run crashes once at its kill point (`flink_agents/durable/faults.py`), at a "
            "passage drawn from a seeded generator among the first 80 % of the passages the "
            "no-fault run made; `during-restore` crashes first after an acknowledged record, "
            "then again while the replay hands recorded calls back. Flink restarts the job from "
            "its last checkpoint.",
            "",
            "A call is **completed** at a moment iff its outcome (a SUCCEEDED or FAILED "
            "record) is on the action-state store's topic with a timestamp before it: the "
            "harness reads the topic after the run and joins each record to the key the "
            "services counted its requests under (`bench/crash_oracle.py`).",
            "",
            "- **re-invoked**: requests (counted by the services per idempotency key) made after "
            "a crash for a call completed before it: must be 0.",
            "- **lost**: inputs answered by the no-fault run (the agent on the local runner, no "
            "store) that the job did not answer; **other outputs**: outputs the no-fault run "
            "does not have (content differs); **duplicate outputs**: outputs written twice.",
            "- **sent again / in flight**: all repeated requests, and the calls in flight at "
            "each crash: sent by the attempt that crashed (from its start until the next "
            "attempt starts, so also what its runs sent after the crash until it was closed) "
            "and not completed at the crash. A call not completed may be sent again, no other.",
            "- **unmatched** (every run): calls the services saw without any completed record on "
            "the topic; every call completes by the run's end, so it must be 0 (else the join "
            "of records to requests is broken and the other counts are void).",
            "- **recovery**: from the (last) crash to the first checkpoint completed after it; "
            "**wall time**: the job's run, from submission to its end.",
            "",
            "## Not covered here",
            "",
            "- Exactly-once outputs (Kafka transactions) and rescaling (savepoint at one "
            "parallelism, restore at another) are not in this matrix: see the sections below.",
            "- External faults (TaskManager SIGKILL and SIGSTOP beyond the heartbeat timeout, a "
            "broker restart or unreachable, a failing model service, a slow sink) run on the "
            "standalone cluster and the mini-cluster: see the sections below.",
            "- A crash here fails the Flink task from Python (a `BaseException` at the kill "
            "point), the way an exception in the operator would; the mini-cluster's JVM and "
            "Python interpreter survive it. In thread mode a failed attempt's engine is closed "
            "when the next attempt opens (PyFlink skips `close()`), so runs that were not "
            "stopped by the crash itself (kill points on the operator thread: `after-output`, "
            "`during-snapshot`) may go on for the restart delay, and a crash inside one of the "
            "calls a model asked for at once ends the run while the sibling calls of that "
            "tool-call batch finish on their own (nothing awaits them any more). A real process "
            "death would stop them; here they count as in flight, and the calls they complete "
            "before the next attempt restores may be handed back instead of sent again.",
            "",
            "## Every run",
            "",
            "| kill point | plan | re-invoked | lost | duplicates | other "
            "| sent again / in flight | unmatched | recovery (s) | wall time (s) "
            "| conversations equal |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
            *runs,
            "",
        ]
    )


def write_doc(path: Path, generated: str) -> None:
    """Write the matrix's document: ``generated``, then the :data:`HAND_WRITTEN` line and what
    followed it in the document already there (nothing if it had no such line)."""
    existing = path.read_text() if path.exists() else ""
    kept = existing.partition(HAND_WRITTEN)[2] if HAND_WRITTEN in existing else "\n"
    path.write_text(f"{generated.rstrip()}\n\n{HAND_WRITTEN}{kept}")


def head_commit() -> str:
    found = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
    )
    return found.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per kill point")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--points", nargs="*", help="only these kill points")
    parser.add_argument(
        "--port",
        type=int,
        default=0,
        help="the example services' port (default: a free one for each run, never make run's)",
    )
    parser.add_argument("--doc", type=Path, help="write the matrix here (docs/reliability.md)")
    parser.add_argument("--commit", help="the commit measured (default: HEAD; for a copy)")
    parser.add_argument(
        "--report-only", type=Path, help="render the runs a matrix left in this log folder"
    )
    parser.add_argument(
        "--resume",
        type=Path,
        help="continue a matrix interrupted in this log folder (same --runs and --seed)",
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a single run, in a subprocess
    parser.add_argument("--kill-points", default="", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    by_name = {s.name: s for s in SCENARIOS}
    if args.one is not None:
        report = run_one(by_name.get(args.one), args.seed, args.kill_points, args.port)
        args.out.write_text(json.dumps(asdict(report)))
        return 0
    scenarios = [by_name[name] for name in args.points] if args.points else list(SCENARIOS)
    started = time.monotonic()
    if args.report_only is not None:
        baseline, rows = read_matrix(args.report_only, scenarios)
    else:
        logs = args.resume or REPO / ".cache" / "crash-matrix" / time.strftime("%Y%m%d-%H%M%S")
        baseline, rows = matrix(scenarios, args.runs, args.seed, args.port, logs)
    if args.doc:
        command = "python -m bench.crash_matrix " + " ".join(argv or sys.argv[1:])
        commit = args.commit or head_commit()
        text = render(baseline, rows, command, time.monotonic() - started, commit)
        write_doc(args.doc, text)
        print(f"wrote {args.doc}")
    return 0 if baseline.ok and all(row.ok for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
