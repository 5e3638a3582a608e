"""``flink-agents console``: serve the console, a local web app over a job's event log, store,
Flink REST API, outputs and decisions (docs/console.md)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from flink_agents.cli.conventions import EXIT_USAGE, add_bootstrap_option

TOKEN_ENV = "FLINK_AGENTS_CONSOLE_TOKEN"


def add_command(commands: Any) -> None:
    """Add ``console`` to the ``flink-agents`` subcommands."""
    parser = commands.add_parser("console", help="serve the web console (runs, traces, waits)")
    parser.add_argument("--job", help="a job spec: its event log, store, outputs and decisions")
    parser.add_argument("--event-log", help="an event log file ({subtask}: every subtask's)")
    parser.add_argument("--event-log-topic", help="an event log Kafka topic")
    parser.add_argument("--store", dest="store_topic", help="the action-state store topic")
    parser.add_argument("--secret-env", help="variable holding the store's HMAC secret")
    parser.add_argument("--flink-rest", help="Flink's REST API, e.g. http://127.0.0.1:8081")
    parser.add_argument("--outputs", help="the job's outputs: a JSON lines file or sink folder")
    parser.add_argument("--outputs-topic", help="the job's output Kafka topic")
    parser.add_argument("--decisions-topic", help="the job's decisions Kafka topic")
    parser.add_argument("--decisions-file", help="append decisions to this JSON lines file")
    parser.add_argument("--key-field", help="the job's key field (its spec's `key:`)")
    parser.add_argument("--agent", help="the agent (plan, YAML or module:attr): tool schemas")
    add_bootstrap_option(parser, "the Kafka brokers")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (%(default)s)")
    parser.add_argument("--port", type=int, default=8765, help="port (%(default)s)")
    parser.add_argument(
        "--token",
        help=f"the token a decision needs (else ${TOKEN_ENV}; neither: deciding is off)",
    )
    parser.set_defaults(handler=cmd_console)


def cmd_console(args: argparse.Namespace) -> int:
    """Serve the console until interrupted."""
    try:
        import uvicorn

        from flink_agents.console import build_app
    except ImportError as exc:
        print(
            f"flink-agents console needs the console extra ({exc.name} is missing): "
            "pip install 'flink-agents-py[console]'",
            file=sys.stderr,
        )
        return EXIT_USAGE
    sources = console_sources(args)
    token = args.token or os.environ.get(TOKEN_ENV) or None
    if args.host not in ("127.0.0.1", "localhost", "::1") and token is None:
        print(
            f"flink-agents console: binding {args.host} without a token; deciding is off",
            file=sys.stderr,
        )
    print(f"flink-agents console on http://{args.host}:{args.port}/", file=sys.stderr)
    uvicorn.run(build_app(sources, token), host=args.host, port=args.port, log_level="warning")
    return 0


def console_sources(args: argparse.Namespace) -> Any:
    """The console's sources: the job spec's, with the options given on top."""
    from flink_agents.console import ConsoleSources

    given = {
        "event_log": args.event_log,
        "event_log_topic": args.event_log_topic,
        "store_topic": args.store_topic,
        "secret_env": args.secret_env,
        "flink_rest": args.flink_rest,
        "outputs": args.outputs,
        "outputs_topic": args.outputs_topic,
        "decisions_topic": args.decisions_topic,
        "decisions_file": args.decisions_file,
        "key_field": args.key_field,
        "agent": args.agent,
    }
    if args.job is not None:
        from flink_agents.flink.job import load_job

        return ConsoleSources.from_job(load_job(args.job), args.bootstrap_servers, **given)
    settled = {name: value for name, value in given.items() if value is not None}
    return ConsoleSources(bootstrap_servers=args.bootstrap_servers, **settled)
