"""The CPU the event log costs per run, measured in-process (less sensitive to other load than a
throughput A/B on a shared machine): `run_local` of a workload at 0 ms latency, CPU of the
process (the file sink's writer thread included) per run, configurations alternated in every
round (each round starts with the next one), medians over the rounds. Each sample also splits
the CPU into the engine's thread and the others (the writer), and counts garbage collections.

    python -m bench.observability_cost [--workload one_call|react_tools] [--rounds 5]
        [--inputs 3000] [--label NAME] [--out FILE.jsonl] [--stages] [--hooks] [--store]

``--stages`` first prints what each record kind costs, stage by stage, over one captured run:
the typed path (payloads as JSON values, the record built, its line serialized) against the
line path (payloads rendered as JSON text, the line rendered from the fields), best of 7
``timeit`` repeats; what is left of the end-to-end cost is the hooks themselves (timing, field
values, call names) and the collector. ``--hooks`` prints the hooks' whole cost per run, on
one captured run replayed (see :func:`hooks`): best-of timings, the figure least moved by other
load. ``--store`` sends the end-to-end rounds' calls through a memory action-state store, as
the operator's go through its store (the call protocol the event log observes there is not the
direct runner's). ``--rounds 0`` skips the end-to-end rounds. Without ``--stages`` it runs on
older trees too (``cd OLD_TREE && PYTHONPATH=. python NEW_TREE/bench/observability_cost.py``).
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import queue
import statistics
import sys
import tempfile
import time
import timeit
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.workloads import WORKLOADS
from flink_agents.durable.store.store_config import StoreConfig
from flink_agents.observability import EventLog, EventLogConfig, MetricsListener
from flink_agents.observability.log_records import construct, record_json
from flink_agents.observability.payloads import PayloadWriter
from flink_agents.plan.compile import compile_agent
from flink_agents.plan.models import AgentPlan
from flink_agents.runtime import run_local

CONFIGS = ("off", "metrics", "metrics+log")


@contextmanager
def _collections() -> Iterator[dict[str, float]]:
    """Count the collector's runs and their time while the block runs."""
    seen = {"count": 0, "seconds": 0.0, "began": 0.0}

    def callback(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen["began"] = time.perf_counter()
        else:
            seen["count"] += 1
            seen["seconds"] += time.perf_counter() - seen["began"]

    gc.callbacks.append(callback)
    try:
        yield seen
    finally:
        gc.callbacks.remove(callback)


def cpu_per_run(
    plan: AgentPlan, config: str, inputs: int, folder: Path, store: bool = False
) -> dict[str, float]:
    """CPU microseconds per run of ``inputs`` runs over 1,000 keys in ``config`` (with
    ``store``: through a memory action-state store, as the operator's calls go through its
    store): the process, the engine's thread (this one), the collector; and collections per
    1,000 runs."""
    records = [{"k": n % 1000, "text": f"q{n}"} for n in range(inputs)]
    listeners = [] if config == "off" else [MetricsListener()]
    log = EventLogConfig(path=str(folder / f"{config}.jsonl")) if config == "metrics+log" else None
    memory_store = StoreConfig(kind="memory").build() if store else None
    with _collections() as collected:
        started, engine_started = time.process_time(), time.thread_time()
        results = run_local(
            plan,
            records,
            key="k",
            max_in_flight=1000,
            store=memory_store,
            listeners=listeners,
            event_log=log,
        )
        cpu, engine = time.process_time() - started, time.thread_time() - engine_started
    assert len(results) == inputs
    return {
        "cpu_us": cpu / inputs * 1e6,
        "engine_us": engine / inputs * 1e6,
        "other_threads_us": (cpu - engine) / inputs * 1e6,
        "gc_us": collected["seconds"] / inputs * 1e6,
        "collections_per_1000": collected["count"] / inputs * 1000,
    }


def measure(
    plan: AgentPlan,
    rounds: int,
    inputs: int,
    report: Callable[[dict[str, object]], None],
    store: bool = False,
) -> dict[str, dict[str, float]]:
    """Median of each figure per configuration over ``rounds`` alternating rounds."""
    samples: dict[str, list[dict[str, float]]] = {config: [] for config in CONFIGS}
    cpu_per_run(plan, "metrics+log", 300, Path(tempfile.mkdtemp()), store)  # warm up
    for round_number in range(1, rounds + 1):
        with tempfile.TemporaryDirectory() as folder:
            first = (round_number - 1) % len(CONFIGS)  # none always runs first
            for config in CONFIGS[first:] + CONFIGS[:first]:
                sample = cpu_per_run(plan, config, inputs, Path(folder), store)
                samples[config].append(sample)
                report(
                    {"round": round_number, "config": config}
                    | {name: round(value, 1) for name, value in sample.items()}
                )
    return {
        config: {
            name: round(statistics.median(sample[name] for sample in taken), 1) for name in taken[0]
        }
        for config, taken in samples.items()
    }


# --- stages ----------------------------------------------------------------------------------


def _one_run(
    plan: AgentPlan,
    replacements: dict[str, Callable[..., Any]],
    listeners: Sequence[Any] = (),
) -> None:
    """Run one input of ``plan`` with a JSON-lines event log, ``EventLog``'s methods named in
    ``replacements`` replaced by them (each gets the original as its ``original`` keyword), and
    the originals put back: how the stages and the hooks capture what one run does."""
    originals = {name: getattr(EventLog, name) for name in replacements}
    for name, replacement in replacements.items():
        setattr(EventLog, name, functools.partialmethod(replacement, original=originals[name]))
    try:
        with tempfile.TemporaryDirectory() as folder:
            log = EventLogConfig(path=str(Path(folder) / "one.jsonl"))
            run_local(plan, [{"k": 0, "text": "q0"}], key="k", event_log=log, listeners=listeners)
    finally:
        for name, original in originals.items():
            setattr(EventLog, name, original)


def _captured_run(plan: AgentPlan) -> list[tuple[Any, dict[str, Any], dict[str, Any]]]:
    """What the event log's hooks publish in one run: (record type, fields, raw payloads)."""
    published: list[tuple[Any, dict[str, Any], dict[str, Any]]] = []

    def capture(
        log: EventLog, record_type: Any, fields: Any, payloads: Any, *, original: Any
    ) -> None:
        published.append((record_type, dict(fields), dict(payloads or {})))
        original(log, record_type, fields, payloads)

    class _Records:  # a listener of records: every record then goes through _publish
        def on_record(self, record: Any) -> None:
            pass

    _one_run(plan, {"_publish": capture}, [_Records()])
    return published


def _us(work: Callable[[], object], number: int = 2000) -> float:
    """CPU microseconds per call of ``work``: the thread's CPU clock, not the wall clock, so
    that time the OS gives other processes is not counted (best of 7)."""
    return min(timeit.repeat(work, number=number, repeat=7, timer=time.thread_time)) / number * 1e6


def stages(plan: AgentPlan) -> dict[str, dict[str, float]]:
    """Microseconds per run of each stage, per record kind, on one captured run."""
    # not in trees before it: lazy
    from flink_agents.observability.lines import payload_pairs, render_line

    writer = PayloadWriter()
    queued: queue.SimpleQueue[bytes] = queue.SimpleQueue()
    found: dict[str, dict[str, float]] = {}
    batch: list[bytes] = []
    for record_type, fields, payloads in _captured_run(plan):
        written = {name: writer(value) for name, value in payloads.items()}
        record = construct(record_type, **fields, **written)
        line = render_line(fields, writer.json, *payload_pairs(payloads))
        assert line == record_json(record).encode()  # the two paths write the same line
        batch.append(line)
        as_json = sum(_us(lambda v=v: writer.json(v)) for v in payloads.values())
        row = found.setdefault(fields["kind"], dict.fromkeys(_STAGES, 0.0) | {"records": 0})
        row["records"] += 1
        row["typed: payloads as values"] += sum(
            _us(lambda v=v: writer(v)) for v in payloads.values()
        )
        row["typed: build the record"] += _us(
            lambda t=record_type, f=fields, w=written: construct(t, **f, **w)
        )
        row["typed: serialize it"] += _us(lambda r=record: record_json(r))
        row["line: payloads as JSON"] += as_json
        pairs = payload_pairs(payloads)
        row["line: render"] += (
            _us(lambda f=fields, p=pairs: render_line(f, writer.json, *p)) - as_json
        )
        row["queue the line"] += _us(lambda x=line: queued.put(x))
    with tempfile.TemporaryDirectory() as folder, (Path(folder) / "w.jsonl").open("ab") as out:

        def write_batch() -> None:
            out.write(b"\n".join(batch) + b"\n")
            out.flush()

        found["(writer thread: one run's lines, one write)"] = {"us": _us(write_batch, 500)}
    return {kind: {k: round(v, 2) for k, v in row.items()} for kind, row in found.items()}


class _DiscardedLines:
    """A JSON-lines sink without the file: the engine thread's part of the file sink's work."""

    def on_record(self, record: Any) -> None:
        record_json(record)

    def on_line(self, line: bytes) -> None:
        pass


_HOOKS = ("run_admitted", "action_started", "action_finished", "action_replayed", "call_finished")


def hooks(plan: AgentPlan) -> dict[str, float]:
    """Microseconds per run of the event log's hooks (everything the engine thread does for
    the log but collecting garbage), over the hook calls of one captured run replayed on a log
    whose only listener is the file sink's engine-thread part, best of 7 ``timeit`` repeats;
    and, for comparison, the same with a listener of records as well (the typed path)."""
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def capture(name: str) -> Callable[..., Any]:
        def hook(log: EventLog, *args: Any, original: Callable[..., Any], **kw: Any) -> Any:
            calls.append((name, args, kw))
            return original(log, *args, **kw)

        return hook

    async def observe(
        log: EventLog, run: Any, input: Any, work: Any, summary: Any, *, original: Any
    ) -> Any:
        outcome = await original(log, run, input, work, summary)
        calls.append(("observe_run", (run, input, outcome, summary), {}))
        return outcome

    _one_run(plan, {name: capture(name) for name in _HOOKS} | {"observe_run": observe})

    def replay(log: EventLog) -> None:
        for name, args, kw in calls:
            if name == "observe_run":
                run, input, outcome, summary = args
                _drive(log.observe_run(run, input, _ready(outcome), summary))
            else:
                getattr(log, name)(*args, **kw)

    class _Records:
        def on_record(self, record: Any) -> None:
            pass

    file_only = EventLog([_DiscardedLines()], payloads=PayloadWriter())
    with_records = EventLog([_DiscardedLines(), _Records()], payloads=PayloadWriter())
    return {
        "hooks, file only": round(_us(lambda: replay(file_only), 500), 1),
        "hooks, file + a listener of records": round(_us(lambda: replay(with_records), 500), 1),
    }


async def _ready(value: Any) -> Any:
    return value


def _drive(coroutine: Any) -> None:
    try:
        coroutine.send(None)
    except StopIteration:
        return
    raise RuntimeError("the replayed run awaited something")


_STAGES = (
    "typed: payloads as values",
    "typed: build the record",
    "typed: serialize it",
    "line: payloads as JSON",
    "line: render",
    "queue the line",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=("one_call", "react_tools"), default="one_call")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--inputs", type=int, default=3000)
    parser.add_argument("--label", default="", help="a name for this tree (before/after)")
    parser.add_argument("--out", type=Path, help="append every sample and the medians here")
    parser.add_argument("--stages", action="store_true", help="first the cost of each stage")
    parser.add_argument("--hooks", action="store_true", help="first the hooks' cost per run")
    parser.add_argument(
        "--store", action="store_true", help="calls through a memory store (as the operator's)"
    )
    args = parser.parse_args(argv)
    plan = compile_agent(WORKLOADS[args.workload](0.0))
    lines: list[dict[str, object]] = []

    def report(line: dict[str, object]) -> None:
        line = {"label": args.label, "workload": args.workload, **line}
        lines.append(line)
        print(json.dumps(line), flush=True)

    if args.stages:
        report({"stages_us_per_run": stages(plan)})
    if args.hooks:
        report({"hooks_us_per_run": hooks(plan)})
    if args.rounds > 0:
        medians = measure(plan, args.rounds, args.inputs, report, args.store)
        report({"medians_per_run": medians})
    report({"load": Path("/proc/loadavg").read_text().split()[0]})
    if args.out:
        with args.out.open("a") as out:
            out.writelines(json.dumps(line) + "\n" for line in lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
