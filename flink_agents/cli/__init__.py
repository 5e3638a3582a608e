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
flink-agents waits approve|reject WAIT_ID --key K --key-field F (--topic T | --file F) [...]
flink-agents waits list (--file OUTPUTS.jsonl | --topic T) [--key K]  (open waits in outputs)
flink-agents console (--job JOB.yaml | --event-log F --store T ...) [--token]  (the web console)

One module per command (``<verb>_command.py``), each adding its parser and handler; this face
wires them and runs one.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from flink_agents.api.refs import UnresolvableReference
from flink_agents.cli import (
    compile_command,
    console_command,
    inspect_command,
    replay_command,
    run_command,
    store_command,
    submit_command,
    trace_command,
    waits_command,
)
from flink_agents.cli.conventions import EXIT_FAILED, EXIT_RESTARTED, EXIT_USAGE, Handler
from flink_agents.plan.errors import PlanValidationError, PlanWarning
from flink_agents.plan.yaml.loader import YamlAgentError

__all__ = ["EXIT_FAILED", "EXIT_RESTARTED", "EXIT_USAGE", "build_parser", "main"]

_COMMANDS = (
    compile_command,
    run_command,
    submit_command,
    inspect_command,
    trace_command,
    store_command,
    replay_command,
    waits_command,
    console_command,
)
"""In the order ``flink-agents --help`` lists them."""


def build_parser() -> argparse.ArgumentParser:
    """The ``flink-agents`` command line: every command, each with its handler."""
    parser = argparse.ArgumentParser(prog="flink-agents", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for command in _COMMANDS:
        command.add_command(commands)
    return parser


def _import_from_working_directory() -> None:
    """Resolve ``module:name`` references from the current directory first, as ``python -m``
    does: a console script's ``sys.path`` starts at its own ``bin/`` folder instead."""
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)


@contextmanager
def _plan_warnings_on_stderr(command: str) -> Iterator[None]:
    """Each :class:`PlanWarning` once, as ``flink-agents <command>: warning: ...`` on stderr (an
    agent may be compiled twice in one command: a YAML file is checked whole, then compiled)."""
    shown: set[str] = set()
    with warnings.catch_warnings():
        warnings.simplefilter("always", PlanWarning)
        default = warnings.showwarning

        def show(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: TextIO | None = None,
            line: str | None = None,
        ) -> None:
            if not issubclass(category, PlanWarning):
                default(message, category, filename, lineno, file, line)
            elif str(message) not in shown:
                shown.add(str(message))
                print(f"flink-agents {command}: warning: {message}", file=sys.stderr)

        warnings.showwarning = show
        yield


def main(argv: list[str] | None = None) -> int:
    """Run the ``flink-agents`` command ``argv`` (else the process's arguments); its exit
    status."""
    args = build_parser().parse_args(argv)
    _import_from_working_directory()
    handler: Handler = args.handler
    try:
        with _plan_warnings_on_stderr(args.command):
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
