"""``flink-agents run``: an agent in this process over JSON lines (``--local``), or a job spec
on the local PyFlink mini-cluster; on a terminal, with a status line on stderr.

flink-agents run --local PLAN.json|FILE.yaml|module:attr --input FILE.jsonl --key FIELD [--output F]
flink-agents run JOB.yaml
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import traceback
from collections.abc import Iterator
from typing import Any, Literal, TextIO

from flink_agents.cli.conventions import EXIT_FAILED, EXIT_RESTARTED, EXIT_USAGE, add_source
from flink_agents.plan.models import AgentPlan
from flink_agents.plan.sources import load_plan


def add_command(commands: Any) -> None:
    """Add ``run`` to the ``flink-agents`` subcommands."""
    parser = commands.add_parser(
        "run",
        help="run a job spec on the mini-cluster, or an agent in-process (--local)",
        epilog="--local exit status: 0 every line ran and every run succeeded; 1 a run failed or "
        "an input line was a bad record (error outputs, counted on stderr); 2 nothing ran",
    )
    add_source(parser, "a job spec (jobs/*.yaml); with --local a plan, agents file or ref")
    parser.add_argument(
        "--local", action="store_true", help="run the agent in this process, without Flink"
    )
    parser.add_argument("--input", help="--local: JSON lines file ('-' for stdin)")
    parser.add_argument(
        "--key",
        help="--local: the input field to key runs by ('.': the input itself, for lines that "
        "are JSON strings or numbers)",
    )
    parser.add_argument("--max-in-flight", type=int, default=128, help="concurrent runs")
    parser.add_argument(
        "--output", help="--local: write the output JSON lines to this file instead of stdout"
    )
    parser.add_argument("--event-log", help="--local: append the event log to this file")
    parser.set_defaults(handler=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    """Run an agent over JSON lines and write one JSON line per output as it finishes."""
    # Imported here so that `compile` works without loading the engine.
    from flink_agents.cli.status_line import StatusLine, status_stream
    from flink_agents.observability import EventLogConfig
    from flink_agents.runtime.local import run_local_lines

    if not args.local:
        return _run_job(args.source)
    if args.input is None or args.key is None:
        print("flink-agents run --local needs --input and --key", file=sys.stderr)
        return EXIT_USAGE
    plan = load_plan(args.source, args.agent)
    event_log = EventLogConfig(path=args.event_log) if args.event_log else None
    terminal = status_stream(sys.stderr)
    status = [] if terminal is None else [StatusLine(terminal)]
    with _opened(args.input, sys.stdin, "r") as lines, _opened(args.output, sys.stdout, "w") as out:

        def write(line: str) -> None:
            out.write(line + "\n")
            out.flush()  # each output as its run finishes, for a reader of a pipe or the file

        report = run_local_lines(
            plan,
            lines,
            key=args.key,
            write=write,
            source=args.input,
            max_in_flight=args.max_in_flight,
            event_log=event_log,
            listeners=status,
        )
    if report.stopped_by is not None:
        print(f"flink-agents run: {report.stopped_by}", file=sys.stderr)
        cause = report.stopped_by.__cause__
        if cause is not None and not _built_in(plan, report.stopped_by.failure.action):
            # Where the agent's own action raised, as Python's run_local shows it (a built-in
            # action's failure, a model call's say, is said in full on the line above).
            sys.stderr.write("".join(traceback.format_exception(cause)))
        print(
            f"flink-agents run: stopped at that run (error_policy: fail), inputs not run: "
            f"{report.not_run}; set error_policy: emit on the agent to write failed runs as "
            "error outputs and go on",
            file=sys.stderr,
        )
    if report.failed_runs or report.bad_records:
        print(
            f"flink-agents run: failed runs: {report.failed_runs} of {report.runs}, bad input "
            f"lines: {report.bad_records} (see the error outputs)",
            file=sys.stderr,
        )
    return 0 if report.ok else EXIT_FAILED


def _built_in(plan: AgentPlan, action: str) -> bool:
    """Whether ``action`` (in ``plan`` or a sub-agent's scope) is one of this package's."""
    functions = [a.function for a in plan.actions if a.name == action]
    if functions:
        return all(function.startswith("flink_agents.") for function in functions)
    return any(_built_in(scope, action) for scope in plan.scopes.values())


@contextlib.contextmanager
def _opened(path: str | None, standard: TextIO, mode: Literal["r", "w"]) -> Iterator[TextIO]:
    """The file ``path``, or ``standard`` (stdin, stdout) for no path or '-'; closes a file."""
    if path is None or path == "-":
        yield standard
        return
    with open(path, mode) as handle:
        yield handle


def _run_job(job_file: str) -> int:
    """Run a job spec on the local mini-cluster; on a terminal, with a status line on stderr.

    The job's failures are read from its REST API while it runs: a job whose tasks restarted
    exits with ``EXIT_RESTARTED`` and names each failure's cause, one that failed for good exits
    1 with its causes (a restart loop is never silent).
    """
    from py4j.protocol import Py4JJavaError

    from flink_agents.cli.status_line import PolledStatusLine, status_stream
    from flink_agents.flink.job import ListSourceSpec, load_job
    from flink_agents.flink.job_runner import build, environment
    from flink_agents.flink.job_status import (
        FailureWatch,
        JobMetricsReader,
        free_local_port,
        innermost_cause,
        local_rest_settings,
        local_rest_url,
    )

    spec = load_job(job_file)
    if spec.store is not None:
        spec.store.require_secret()  # before a JVM starts for nothing
    source = spec.source
    if isinstance(source, ListSourceSpec) and not spec.resolve(source.path).is_file():
        # Flink would fail the job with a Java stack trace from its file enumerator.
        print(
            f"flink-agents run: {job_file}: source.path: no file {spec.resolve(source.path)} "
            "(relative paths start at the job spec's folder)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    port = free_local_port()
    env = environment(spec, extra=local_rest_settings(port))
    build(spec, env)
    client = env.execute_async(spec.name)
    reader = JobMetricsReader(local_rest_url(port), str(client.get_job_id()))
    watch = FailureWatch(reader.read_failures)
    terminal = status_stream(sys.stderr)
    status = None if terminal is None else PolledStatusLine(terminal, reader.read)
    failed: Py4JJavaError | None = None
    try:
        client.get_job_execution_result().result()
    except Py4JJavaError as exc:
        failed = exc
    finally:
        if status is not None:
            status.close()
        failures = watch.stop()
    return job_report(
        "run", spec.name, failures, None if failed is None else innermost_cause(str(failed))
    )


def job_report(command: str, name: str, failures: list[Any], failed: str | None) -> int:
    """Say on stderr how a job ended when anything failed (``failed``: why it failed for
    good); the command's exit code (``run JOB.yaml`` and an attached ``submit``)."""
    for number, failure in enumerate(failures, start=1):
        where = f" in {failure.task}" if failure.task else ""
        print(f"flink-agents {command}: failure {number}{where}: {failure.cause}", file=sys.stderr)
    if failed is not None:
        # The last failure may be missing above: a local job's API goes away with the job.
        print(f"flink-agents {command}: job {name!r} FAILED: {failed}", file=sys.stderr)
        return 1
    if failures:
        print(
            f"flink-agents {command}: job {name!r} finished, but its tasks restarted "
            f"{len(failures)} time(s): the inputs since the last checkpoint ran again (their "
            "calls were made again unless the job has a store)",
            file=sys.stderr,
        )
        return EXIT_RESTARTED
    return 0
