"""How long the console's pages take with 10,000 runs in the event log (issue 38: under a
second).

Writes an event log of RUNS runs (each: started, an action, a model call with tokens, a tool
call, the action's end, the run's end; a tenth executed again after a cut-off, a tenth paused),
then times the console's start (the log read and grouped, which the server does on a thread of
its own as it starts) and the pages through Starlette's test client, in process (no network):
the Runs page on its first load, again (nothing new), after 100 runs were appended (those only
parsed and grouped), searched by key and filtered by state; a trace; the health page's charts.
Median and max of REPEATS.

    .venv/bin/python -m bench.console_pages [--runs 10000] [--out bench/results/console.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from flink_agents.api.chat import TokenUsage
from flink_agents.console import ConsoleSources, build_app
from flink_agents.observability import (
    ActionFinished,
    ActionStarted,
    CallFinished,
    RunFinished,
    RunStarted,
)

REPEATS = 5


def run_records(n: int, at: float) -> Iterator[Any]:
    """The records of run ``n``: a tenth cut off and executed again, a tenth paused."""
    run = {"agent": "support_desk", "key": f"customer-{n % 3000}", "seq": n // 3000}
    action = {"action": "chat_action", "event_id": f"{n:032x}", "event_type": "ChatRequestEvent"}
    call = {
        "event_id": action["event_id"],
        "action": "chat_action",
        "function": "flink_agents.api.chat_models:ChatModelSetup.chat",
        "arguments": {"messages": [{"role": "user", "content": f"ticket {n}"}]},
        "result": {"role": "assistant", "content": "an answer of a few words"},
    }
    executions = 2 if n % 10 == 0 else 1
    for execution in range(executions):
        again = execution > 0
        yield RunStarted(time=at, **run, input={"ticket": n})
        yield ActionStarted(time=at, **run, **action)
        yield CallFinished(
            time=at,
            **run,
            **call,
            call_id="chat",
            call_kind="model",
            outcome="replayed" if again else "live",
            latency_ms=120.0,
            usage=TokenUsage(input_tokens=40, output_tokens=12),
        )
        if executions == 2 and not again:
            continue  # cut off: no end
        yield CallFinished(
            time=at + 0.1,
            **run,
            **call,
            call_id="tool:lookup",
            call_kind="tool",
            outcome="live",
            latency_ms=30.0,
        )
        yield ActionFinished(time=at + 0.2, **run, **action, latency_ms=200.0)
        status = "paused" if n % 10 == 5 else "succeeded"
        yield RunFinished(time=at + 0.2, **run, status=status, latency_ms=220.0, outputs=1)


def write_log(path: Path, first: int, count: int, start: float) -> None:
    with path.open("a") as log:
        for n in range(first, first + count):
            for record in run_records(n, start + n * 0.01):
                log.write(record.model_dump_json() + "\n")


def timed(load: Callable[[], Any]) -> float:
    began = time.perf_counter()
    answer = load()
    elapsed = time.perf_counter() - began
    assert answer.status_code == 200, answer.status_code
    return elapsed


def page_loads(client: TestClient, log: Path, runs: int) -> dict[str, Callable[[], Any]]:
    """The page loads timed, in order, by name."""

    def appended() -> Any:
        write_log(log, runs, 100, time.time())
        return client.get("/runs")

    return {
        "Runs, first load": lambda: client.get("/runs"),
        "Runs, again (nothing new)": lambda: client.get("/runs"),
        "Runs, after 100 runs appended": appended,
        "Runs, searched by key": lambda: client.get("/runs", params={"key": "customer-29"}),
        "Runs, state replayed": lambda: client.get("/runs", params={"state": "replayed"}),
        "a run's trace": lambda: client.get(
            "/trace", params={"agent": "support_desk", "key": '"customer-10"', "seq": 0}
        ),
        "Job health (charts)": lambda: client.get("/health"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--out", default="bench/results/console.md")
    args = parser.parse_args()
    rows: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "events.jsonl"
        for _ in range(REPEATS):
            log.unlink(missing_ok=True)
            write_log(log, 0, args.runs, time.time() - 3600)
            app = build_app(ConsoleSources(event_log=str(log)))
            began = time.perf_counter()
            app.state.console.warm()  # what the server does at start, on a thread
            rows.setdefault("start: the log read and grouped (before any page)", []).append(
                time.perf_counter() - began
            )
            client = TestClient(app)
            pages = page_loads(client, log, args.runs)
            for name, load in pages.items():
                rows.setdefault(name, []).append(timed(load))
        size = log.stat().st_size
    lines = [
        "# The console's pages with 10,000 runs in the event log",
        "",
        f"`python -m bench.console_pages --runs {args.runs}`: {args.runs} runs "
        f"({size / 1e6:.1f} MB of event log, about {args.runs * 6 + args.runs // 10 * 3} "
        "records), pages served in process by Starlette's test client (no network, no "
        f"browser), {REPEATS} repeats; {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}, load average "
        f"{os.getloadavg()[0]:.1f} at the end (other work shared the machine).",
        "",
        "| page | median | max |",
        "|---|---|---|",
        *(
            f"| {name} | {statistics.median(times) * 1000:.0f} ms | {max(times) * 1000:.0f} ms |"
            for name, times in rows.items()
        ),
        "",
    ]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
