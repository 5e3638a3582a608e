"""``flink-agents compile FILE.yaml|module:attr [-o plan.json]``: an agent's plan JSON."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from flink_agents.cli.conventions import add_source
from flink_agents.plan.sources import load_plan


def add_command(commands: Any) -> None:
    """Add ``compile`` to the ``flink-agents`` subcommands."""
    parser = commands.add_parser("compile", help="compile an agent to plan JSON")
    add_source(parser, "a YAML agents file or module:attr (Agent, class or factory)")
    parser.add_argument("-o", "--output", help="write here instead of stdout")
    parser.set_defaults(handler=cmd_compile)


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
