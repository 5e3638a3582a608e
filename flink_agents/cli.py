"""flink-agents: compile, run, inspect and replay agents that run as keyed Flink jobs.

flink-agents compile FILE.yaml|module:attr [-o plan.json]
flink-agents run --local PLAN.json|FILE.yaml|module:attr --input FILE.jsonl --key FIELD [--output F]
flink-agents run JOB.yaml                                  (PyFlink local mini-cluster)
flink-agents submit JOB.yaml --jobmanager HOST:PORT [--from-savepoint P] [--parallelism N]
flink-agents inspect PLAN.json|FILE.yaml|module:attr        (what each chat model is offered)
flink-agents trace EVENT_LOG|--topic T [--key K] [--run SEQ] (each run's tree from an event log)
flink-agents store inspect --topic T --key K [--payloads]    (a key's action states and calls)
flink-agents store export --topic T [--key K] -o FILE        (a store topic's records to a file)
flink-agents replay AGENT (--topic T | --file F) [...]       (recorded runs against the agent now)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, TextIO

from flink_agents.api.refs import UnresolvableReference
from flink_agents.plan.errors import PlanValidationError
from flink_agents.plan.sources import load_plan
from flink_agents.plan.yaml.loader import YamlAgentError
from flink_agents.replay import commands as replay_commands

Handler = Callable[[argparse.Namespace], int]

EXIT_FAILED = 1
"""``run --local``: a run failed, or an input line was a bad record (each is an error output)."""
EXIT_USAGE = 2
"""Bad input: an invalid plan or agent file, an unimportable reference, a missing file."""


def _add_source(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument("source", help=help_text)
    parser.add_argument("--agent", help="which agent of a YAML file holding several")


def cmd_compile(args: argparse.Namespace) -> int:
    """Compile an agent to its plan JSON."""
    _write_output(load_plan(args.source, args.agent).to_json(), args.output)
    return 0


def _write_output(text: str, output: str | None) -> None:
    """Write a command's result to the file ``output`` (``-o/--output``), else to stdout; a
    file gets the result only, while what tools print stays on stdout."""
    if output:
        Path(output).write_text(text)
    else:
        sys.stdout.write(text)


def cmd_run(args: argparse.Namespace) -> int:
    """Run an agent over JSON lines and write one JSON line per output as it finishes."""
    # Imported here so that `compile` works without loading the engine.
    from flink_agents.observability import EventLogConfig
    from flink_agents.observability.status import StatusLine, status_stream
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

    from flink_agents.flink.job import ListSourceSpec, load_job
    from flink_agents.flink.job_runner import build, environment
    from flink_agents.observability.job_status import (
        FailureWatch,
        JobMetricsReader,
        free_local_port,
        innermost_cause,
        local_rest_settings,
        local_rest_url,
    )
    from flink_agents.observability.status import PolledStatusLine, status_stream

    spec = load_job(job_file)
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
    return _job_report(
        "run", spec.name, failures, None if failed is None else innermost_cause(str(failed))
    )


EXIT_RESTARTED = 3
"""`run JOB.yaml` and an attached `submit`: the job finished, but its tasks failed and restarted
on the way."""


def _job_report(command: str, name: str, failures: list[Any], failed: str | None) -> int:
    """Say on stderr how a job ended when anything failed (``failed``: why it failed for
    good); the command's exit code."""
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


def cmd_submit(args: argparse.Namespace) -> int:
    """Submit a job spec to a standalone cluster with `flink run -py`."""
    import subprocess

    from flink_agents.flink.job import load_job
    from flink_agents.flink.job_runner import shipped_outputs, submit_command, with_overrides

    # A bad spec (or parallelism) fails here, with file and line, not on the cluster.
    spec = with_overrides(
        load_job(args.job),
        parallelism=args.parallelism,
        from_savepoint=args.from_savepoint is not None,
    )
    for warning in shipped_outputs(spec, args.job):
        print(f"flink-agents submit: warning: {warning}", file=sys.stderr)
    unreachable = _unreachable(args.jobmanager)
    if unreachable:
        print(
            f"flink-agents submit: no JobManager answers at {args.jobmanager} ({unreachable}); "
            "start the cluster (scripts/flink-cluster.sh start) or give --jobmanager HOST:PORT",
            file=sys.stderr,
        )
        return EXIT_USAGE
    command = submit_command(
        args.job,
        args.jobmanager,
        detached=args.detached,
        from_savepoint=args.from_savepoint,
        parallelism=args.parallelism,
    )
    flink_run = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert flink_run.stdout is not None
    job_id = None
    for line in flink_run.stdout:  # passed on as it comes; the job's id is read on the way
        sys.stdout.write(line)
        sys.stdout.flush()
        found = _SUBMITTED.search(line)
        job_id = found.group(1) if found else job_id
    code = flink_run.wait()
    if args.detached or job_id is None:
        return code
    return _cluster_job_report(args.jobmanager, job_id, spec.name, code)


_SUBMITTED = re.compile(r"JobID ([0-9a-f]{32})")
"""How `flink run` names the job it submitted."""


def _cluster_job_report(jobmanager: str, job_id: str, name: str, code: int) -> int:
    """After an attached `flink run` returned ``code``: the job's failures from the cluster's
    REST API (it keeps finished jobs), reported as `run` reports a local job's."""
    from flink_agents.observability.job_status import JobMetricsReader

    address = jobmanager if "://" in jobmanager else f"http://{jobmanager}"
    failures = JobMetricsReader(address, job_id).read_failures() or []
    # `flink run` printed the final failure's stack trace already.
    report = _job_report("submit", name, failures, None if code == 0 else "see above")
    return code or report


def _unreachable(address: str) -> str | None:
    """Why nothing accepts a connection at ``HOST:PORT``, or None when something does: `flink
    run` would otherwise retry for a while and end in a page of Java stack traces."""
    import socket

    host, _, port = address.split("://")[-1].split("/")[0].rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=5):
            return None
    except ValueError:
        return f"{port!r} is not a port"
    except OSError as exc:
        return exc.strerror or type(exc).__name__


def cmd_inspect(args: argparse.Namespace) -> int:
    """List, per scope and chat model, the tools (and what each MCP server offers), the
    sub-agent callables offered and the sub-agents skipped with the reason (a skipped sub-agent
    is never dropped silently)."""
    from flink_agents.api.chat_models import ChatModelSetup
    from flink_agents.api.resources import ResourceType
    from flink_agents.plan.resolve import resolve_plan
    from flink_agents.runtime.scopes import Scope

    def show(scope: Scope, indent: str) -> None:
        print(f"{indent}scope {scope.name}")
        for name, declared in scope.resolved.plan.resources.items():
            if declared.type is not ResourceType.CHAT_MODEL:
                continue
            model = scope.resources.get(name, ResourceType.CHAT_MODEL)  # opens the setup only
            assert isinstance(model, ChatModelSetup)
            offer = model.subagent_offer
            skipped = [f"{sub} ({reason})" for sub, reason in offer.skipped.items()]
            print(f"{indent}  chat model {name}")
            print(f"{indent}    tools: {', '.join(model.tools) or '-'}")
            for resource in model.tools:  # what a toolset (an MCP server) offers, by name
                offered = [n for n, source in model.offered_tools.items() if source == resource]
                if offered != [resource]:
                    print(f"{indent}      from {resource}: {', '.join(offered) or '-'}")
            print(f"{indent}    sub-agent tools: {', '.join(offer.resources) or '-'}")
            print(f"{indent}    skipped sub-agents: {', '.join(skipped) or '-'}")
        for child in scope.children.values():
            show(child, indent + "  ")

    show(Scope.build(resolve_plan(load_plan(args.source, args.agent))), "")
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    """Print each run's tree (actions, their calls and events) from an event log file or
    topic."""
    from flink_agents.observability import read_records
    from flink_agents.observability.trace import render_trace

    if (args.event_log is None) == (args.topic is None):
        print("flink-agents trace needs an event log file or --topic", file=sys.stderr)
        return EXIT_USAGE
    try:
        if args.topic is not None:
            from flink_agents.observability import KafkaEventLogConfig
            from flink_agents.observability.sinks.kafka_log import read_topic

            config = KafkaEventLogConfig(topic=args.topic, bootstrap_servers=args.bootstrap_servers)
            records = read_topic(config)
        else:
            records = read_records(args.event_log)
        text = render_trace(records, key=args.key, seq=args.run)
    except OSError as exc:
        print(f"flink-agents trace: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if text:
        print(text)
    else:  # an empty answer would read as an empty log, or a key that is not in it
        wanted = "" if args.key is None else f" of key {args.key}"
        wanted += "" if args.run is None else f" with seq {args.run}"
        print(f"flink-agents trace: no run{wanted} in the event log", file=sys.stderr)
    return 0


def cmd_store_inspect(args: argparse.Namespace) -> int:
    """List a key's action states and call results in a store topic."""
    from flink_agents.durable.store.errors import StoreError
    from flink_agents.durable.store.inspect import key_states, open_store, render_states
    from flink_agents.observability.payloads import PayloadWriter

    try:
        store, corrupt = open_store(args.bootstrap_servers, args.topic, args.secret_env)
    except StoreError as exc:
        print(f"flink-agents store inspect: {exc}", file=sys.stderr)
        return 1
    try:
        states = key_states(store, args.key, args.agent)
    finally:
        store.close()
    payloads = PayloadWriter(args.payload_chars) if args.payloads else None
    for line in render_states(states, payloads=payloads):
        print(line)
    if not states:
        print(f"no action state for key {args.key!r} in {args.topic!r}", file=sys.stderr)
    if corrupt:
        print(f"{corrupt} corrupt records skipped (see the log)", file=sys.stderr)
    return 0


def _add_store_commands(commands: Any) -> Any:
    """``flink-agents store <command>``: commands over an action-state store topic; returns the
    group, which other modules add their store commands to."""
    store_parser = commands.add_parser("store", help="look into an action-state store topic")
    store_commands = store_parser.add_subparsers(dest="store_command", required=True)

    inspect_parser = store_commands.add_parser(
        "inspect", help="list a key's action states and call results"
    )
    inspect_parser.add_argument("--topic", required=True, help="the store topic")
    inspect_parser.add_argument(
        "--key", required=True, help="the Flink key (as in the input, or JSON)"
    )
    inspect_parser.add_argument("--agent", help="only this agent's states")
    replay_commands.add_bootstrap_option(inspect_parser, "the Kafka brokers")
    inspect_parser.add_argument(
        "--secret-env",
        default="FLINK_AGENTS_STORE_SECRET",
        help="variable holding the store's HMAC secret (signed records)",
    )
    inspect_parser.add_argument(
        "--payloads", action="store_true", help="also print each call's payload (or error)"
    )
    inspect_parser.add_argument(
        "--payload-chars", type=int, default=2000, help="--payloads: cut each at this size"
    )
    inspect_parser.set_defaults(handler=cmd_store_inspect)
    return store_commands


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="flink-agents", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    compile_parser = commands.add_parser("compile", help="compile an agent to plan JSON")
    _add_source(compile_parser, "a YAML agents file or module:attr (Agent, class or factory)")
    compile_parser.add_argument("-o", "--output", help="write here instead of stdout")
    compile_parser.set_defaults(handler=cmd_compile)

    run_parser = commands.add_parser(
        "run",
        help="run a job spec on the mini-cluster, or an agent in-process (--local)",
        epilog="--local exit status: 0 every line ran and every run succeeded; 1 a run failed or "
        "an input line was a bad record (error outputs, counted on stderr); 2 nothing ran",
    )
    _add_source(run_parser, "a job spec (jobs/*.yaml); with --local a plan, agents file or ref")
    run_parser.add_argument(
        "--local", action="store_true", help="run the agent in this process, without Flink"
    )
    run_parser.add_argument("--input", help="--local: JSON lines file ('-' for stdin)")
    run_parser.add_argument("--key", help="--local: the input field to key runs by")
    run_parser.add_argument("--max-in-flight", type=int, default=128, help="concurrent runs")
    run_parser.add_argument(
        "--output", help="--local: write the output JSON lines to this file instead of stdout"
    )
    run_parser.add_argument("--event-log", help="--local: append the event log to this file")
    run_parser.set_defaults(handler=cmd_run)

    submit_parser = commands.add_parser("submit", help="submit a job spec to a Flink cluster")
    submit_parser.add_argument("job", help="a job spec (jobs/*.yaml)")
    submit_parser.add_argument(
        "--jobmanager", default="127.0.0.1:8081", help="REST address of the JobManager"
    )
    submit_parser.add_argument("--detached", action="store_true", help="return once submitted")
    submit_parser.add_argument(
        "--from-savepoint",
        metavar="PATH",
        help="start from this savepoint or retained checkpoint (restores the action-state store)",
    )
    submit_parser.add_argument(
        "--parallelism", type=int, help="instead of the spec's (up to its max_parallelism)"
    )
    submit_parser.set_defaults(handler=cmd_submit)

    inspect_parser = commands.add_parser("inspect", help="list what each chat model is offered")
    _add_source(inspect_parser, "a plan .json, a YAML agents file or module:attr")
    inspect_parser.set_defaults(handler=cmd_inspect)

    trace_parser = commands.add_parser("trace", help="print each run's tree from an event log")
    trace_parser.add_argument("event_log", nargs="?", help="an event log file (JSON lines)")
    trace_parser.add_argument("--topic", help="read the event log from this Kafka topic instead")
    replay_commands.add_bootstrap_option(trace_parser, "--topic: the Kafka brokers")
    trace_parser.add_argument("--key", help="only runs of this key (as in the input, or JSON)")
    trace_parser.add_argument("--run", type=int, help="only the run with this seq")
    trace_parser.set_defaults(handler=cmd_trace)
    store = _add_store_commands(commands)
    replay_commands.add_commands(commands, store)
    return parser


def _import_from_working_directory() -> None:
    """Resolve ``module:name`` references from the current directory first, as ``python -m``
    does: a console script's ``sys.path`` starts at its own ``bin/`` folder instead."""
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _import_from_working_directory()
    handler: Handler = args.handler
    try:
        return handler(args)
    except (
        PlanValidationError,
        YamlAgentError,
        UnresolvableReference,
        ValueError,
        KeyError,
    ) as exc:
        # A KeyError's str is the repr of its message: print the message itself.
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"flink-agents {args.command}: {message}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `flink-agents ... | head` closed our stdout: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as exc:
        if exc.filename is None:  # not about a file the user named: keep the traceback
            raise
        print(f"flink-agents {args.command}: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
