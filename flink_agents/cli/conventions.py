"""What every ``flink-agents`` command shares: its exit codes and the arguments several
commands take alike.

Building the command line loads none of the engine, the store or PyFlink: each command imports
what it needs when it runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

Handler = Callable[[argparse.Namespace], int]
"""A command: its parsed arguments -> its exit status."""

EXIT_FAILED = 1
"""``run --local``: a run failed, or an input line was a bad record (each is an error output)."""
EXIT_USAGE = 2
"""Bad input: an invalid plan or agent file, an unimportable reference, a missing file."""
EXIT_RESTARTED = 3
"""`run JOB.yaml` and an attached `submit`: the job finished, but its tasks failed and restarted
on the way."""
EXIT_STORE = 3
"""``store export`` and ``replay``: the store topic cannot be read (a read never creates it)."""
EXIT_TOPIC = 3
"""``waits``: the decisions or output topic cannot be used (no broker answers, no such topic)."""


def add_source(parser: argparse.ArgumentParser, help_text: str) -> None:
    """The agent a command takes (a plan .json, a YAML agents file or ``module:attr``), and
    ``--agent`` to choose one of a YAML file holding several."""
    parser.add_argument("source", help=help_text)
    parser.add_argument("--agent", help="which agent of a YAML file holding several")


def add_bootstrap_option(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--bootstrap-servers`` (Kafka's own word), also spelt ``--bootstrap``: every command
    reading a topic takes both, so a flag copied from one command works in the others."""
    parser.add_argument(
        "--bootstrap-servers",
        "--bootstrap",
        dest="bootstrap_servers",
        default="127.0.0.1:9092",
        help=help_text,
    )
