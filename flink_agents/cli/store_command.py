"""``flink-agents store``: commands over an action-state store topic.

flink-agents store inspect --topic T --key K [--payloads]    (a key's action states and calls)
flink-agents store export --topic T [--key K] -o FILE        (a store topic's records to a file)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flink_agents.cli.conventions import EXIT_STORE, add_bootstrap_option

if TYPE_CHECKING:
    from flink_agents.durable.store import ActionState

# The store loads in the handlers: building the command line (for `flink-agents compile`, say)
# must not load it.


def add_command(commands: Any) -> None:
    """Add ``store`` and its commands to the ``flink-agents`` subcommands."""
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
    add_bootstrap_option(inspect_parser, "the Kafka brokers")
    add_secret_env(inspect_parser)
    inspect_parser.add_argument(
        "--payloads", action="store_true", help="also print each call's payload (or error)"
    )
    inspect_parser.add_argument(
        "--payload-chars", type=int, default=2000, help="--payloads: cut each at this size"
    )
    inspect_parser.set_defaults(handler=cmd_store_inspect)

    export = store_commands.add_parser("export", help="write a store topic's records to a file")
    add_topic(export, required=True)
    export.add_argument("--key", help="only this Flink key (a JSON value, else a string)")
    export.add_argument(
        "-o",
        "--output",
        required=True,
        help="the JSON lines file to write (signed with the store secret when it is set)",
    )
    export.set_defaults(handler=cmd_store_export)


def add_secret_env(parser: argparse.ArgumentParser) -> None:
    """The variable holding the store's HMAC secret: records read must verify with it, and an
    export is signed with it and read back only if it verifies."""
    parser.add_argument(
        "--secret-env",
        default="FLINK_AGENTS_STORE_SECRET",  # the store's DEFAULT_SECRET_ENV, not loaded here
        help="variable holding the store's HMAC secret (signed records and exports; "
        "default %(default)s)",
    )


def add_topic(parser: argparse.ArgumentParser, *, required: bool) -> None:
    """The store topic a command reads (:func:`topic_states`), its brokers, and the partition
    count to check."""
    parser.add_argument("--topic", required=required, help="the store topic")
    add_bootstrap_option(parser, "Kafka brokers")
    parser.add_argument(
        "--partitions", type=int, help="check that the topic has this many partitions"
    )
    add_secret_env(parser)


def topic_states(args: argparse.Namespace) -> list[ActionState]:
    """Every state of the store topic; a `StoreError` if there is no such topic (a read never
    creates one: a mistyped name would read as an empty topic and pass)."""
    from flink_agents.durable.store.kafka import KafkaActionStateStore
    from flink_agents.replay.recorded import read_store

    store = KafkaActionStateStore.existing(
        args.bootstrap_servers, args.topic, secret_env=args.secret_env, partitions=args.partitions
    )
    try:
        return read_store(store)
    finally:
        store.close()


def cmd_store_inspect(args: argparse.Namespace) -> int:
    """List a key's action states and call results in a store topic."""
    from flink_agents.durable.store import StoreError
    from flink_agents.durable.store.inspect import key_states, open_store, render_states
    from flink_agents.observability import PayloadWriter

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


def cmd_store_export(args: argparse.Namespace) -> int:
    """Write the latest state of every key of a store topic (one JSON line each)."""
    from flink_agents.durable.store import StoreError, secret_from_env
    from flink_agents.replay.recorded import key_matches, write_states

    try:
        states = [s for s in topic_states(args) if key_matches(s, args.key)]
    except StoreError as exc:
        print(f"flink-agents store export: {exc}", file=sys.stderr)
        return EXIT_STORE
    count = write_states(states, Path(args.output), secret_from_env(args.secret_env))
    print(f"{count} records of topic {args.topic!r} written to {args.output}", file=sys.stderr)
    return 0
