"""``flink-agents waits``: decide a paused run's wait, and list the open ones (docs/waits.md).

flink-agents waits approve WAIT_ID --key K --key-field F (--topic T | --file F) [--by NAME]
    [--message M] [--arguments JSON] [--fingerprint FP]      (with --arguments: an edit)
flink-agents waits reject WAIT_ID --key K --key-field F (--topic T | --file F) [--by] [--message]
    [--fingerprint FP]
flink-agents waits list (--file OUTPUTS.jsonl | --topic OUTPUT_TOPIC) [--key K]
flink-agents waits list --event-log (--file EVENTS.jsonl | --topic EVENT_LOG_TOPIC) [--key K]
flink-agents waits list --store --topic STORE_TOPIC [--partitions N] [--secret-env VAR] [--key K]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flink_agents.api.json_values import read_json
from flink_agents.cli.conventions import EXIT_STORE, EXIT_TOPIC, EXIT_USAGE, add_bootstrap_option
from flink_agents.cli.store_command import add_secret_env

if TYPE_CHECKING:
    from flink_agents.cli.wait_records_io import OpenWaitLine

# Kafka and the runtime load in the handlers: building the command line must not load them.


def add_command(commands: Any) -> None:
    """Add ``waits`` and its commands to the ``flink-agents`` subcommands."""
    waits_parser = commands.add_parser("waits", help="decide and list paused runs' waits")
    waits_commands = waits_parser.add_subparsers(dest="waits_command", required=True)
    for verdict, help_text in (
        ("approve", "approve a wait (with --arguments: approve with new arguments, an edit)"),
        ("reject", "reject a wait"),
    ):
        parser = waits_commands.add_parser(verdict, help=help_text)
        parser.add_argument("wait_id", help="the wait's id (its run's `waiting` record)")
        parser.add_argument("--key", required=True, help="the run's key (a JSON value, else text)")
        parser.add_argument(
            "--key-field", required=True, help="the job's key field (its spec's `key:`)"
        )
        _add_lines_place(parser, "the job's decisions", "append the record to this JSON lines file")
        parser.add_argument("--by", help="who decides (recorded with the decision)")
        parser.add_argument("--message", help="the decider's message (the model sees it)")
        parser.add_argument(
            "--fingerprint",
            help="the `waiting` record's fingerprint: the decision is refused if the wait's "
            "request changed since",
        )
        if verdict == "approve":
            parser.add_argument("--arguments", help="an edit: the new arguments (a JSON object)")
        parser.set_defaults(handler=cmd_decide, verdict=verdict)
    list_parser = waits_commands.add_parser("list", help="list the open waits in a job's outputs")
    _add_lines_place(
        list_parser, "the job's output", "read the job's output records from this file"
    )
    list_parser.add_argument("--key", help="only this key's waits (a JSON value, else text)")
    read_from = list_parser.add_mutually_exclusive_group()
    read_from.add_argument(
        "--event-log",
        action="store_true",
        help="--file / --topic is the job's event log (its `wait` records), not its outputs",
    )
    read_from.add_argument(
        "--store",
        action="store_true",
        help="--topic is the job's action-state store topic (its wait calls not yet decided)",
    )
    list_parser.add_argument(
        "--partitions", type=int, help="--store: check that the topic has this many partitions"
    )
    add_secret_env(list_parser)
    list_parser.set_defaults(handler=cmd_list)


def _add_lines_place(parser: argparse.ArgumentParser, topic_of: str, file_help: str) -> None:
    place = parser.add_mutually_exclusive_group(required=True)
    place.add_argument("--topic", help=f"{topic_of} Kafka topic (it must exist)")
    place.add_argument("--file", help=file_help)
    add_bootstrap_option(parser, "--topic: the Kafka brokers")


def cmd_decide(args: argparse.Namespace) -> int:
    """Write one decision record where the job's decisions input reads it."""
    from flink_agents.cli.json_topic import TopicError
    from flink_agents.cli.wait_records_io import decision_record, key_value
    from flink_agents.durable.identity import canonical_json

    arguments = _arguments(getattr(args, "arguments", None))
    verdict = "edit" if arguments is not None else args.verdict
    key = key_value(args.key)
    record = decision_record(
        args.key_field,
        key,
        args.wait_id,
        verdict,
        by=args.by,
        message=args.message,
        arguments=arguments,
        fingerprint=args.fingerprint,
    )
    try:
        where = deliver_decision(
            record, key, file=args.file, topic=args.topic, servers=args.bootstrap_servers
        )
    except TopicError as exc:
        print(f"flink-agents waits: {exc}", file=sys.stderr)
        return EXIT_TOPIC
    print(f"{verdict} of wait {args.wait_id} for key {canonical_json(key)} written to {where}")
    return 0


def deliver_decision(
    record: dict[str, Any], key: Any, *, file: str | None, topic: str | None, servers: str
) -> str:
    """Append a decision record to the JSON lines ``file``, else write it to the Kafka
    ``topic`` (keyed by the key's JSON, as the job's inputs); where it went. A topic that
    cannot be used raises :class:`~flink_agents.cli.json_topic.TopicError`."""
    from flink_agents.cli.json_topic import append
    from flink_agents.durable.identity import canonical_json

    line = canonical_json(record)
    if file is not None:
        with Path(file).open("a", encoding="utf-8") as out:
            out.write(line + "\n")
        return file
    if topic is None:
        raise ValueError("a decision needs a decisions topic or file")
    append(servers, topic, canonical_json(key), line)
    return f"topic {topic!r}"


def _arguments(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        arguments = read_json(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--arguments is not JSON: {exc}") from exc
    except ValueError as exc:  # JSON beyond what a call takes (nested too deeply, NaN)
        raise ValueError(f"--arguments cannot be used: {exc}") from exc
    if not isinstance(arguments, dict):
        raise ValueError("--arguments must be a JSON object (the tool's arguments)")
    return arguments


def cmd_list(args: argparse.Namespace) -> int:
    """Print the open waits of a job's output records, one line each."""
    from flink_agents.cli.json_topic import TopicError, read
    from flink_agents.cli.wait_records_io import key_value, open_waits

    key = None if args.key is None else key_value(args.key)
    if args.event_log:
        return _list_from_event_log(args, key)
    if args.store:
        return _list_from_store(args, key)
    try:
        if args.file is not None:
            with Path(args.file).open(encoding="utf-8") as lines:
                waits = open_waits(lines, key)
        else:
            waits = open_waits(read(args.bootstrap_servers, args.topic), key)
    except TopicError as exc:
        print(f"flink-agents waits: {exc}", file=sys.stderr)
        return EXIT_TOPIC
    # Said every time: a run that finished without any output leaves no trace of its end.
    return _print_waits(waits, "`waiting` records with no later record of the same run")


def _list_from_event_log(args: argparse.Namespace, key: Any) -> int:
    """Print the open waits of a job's event log (file or topic), one line each."""
    from flink_agents.cli.wait_records_io import open_waits_in_event_log
    from flink_agents.observability import KafkaEventLogConfig, read_records

    try:
        if args.file is not None:
            waits = open_waits_in_event_log(read_records(args.file), key)
        else:
            from flink_agents.observability.sinks.kafka_log import read_topic

            config = KafkaEventLogConfig(topic=args.topic, bootstrap_servers=args.bootstrap_servers)
            waits = open_waits_in_event_log(read_topic(config), key)
    except (OSError, ValueError) as exc:  # no file or topic; a line that is no record
        print(f"flink-agents waits: {exc}", file=sys.stderr)
        return EXIT_TOPIC if args.topic is not None else EXIT_USAGE
    return _print_waits(
        waits,
        "`wait` records of runs that paused and did not resume "
        "(a sampled event log holds only its sampled runs)",
    )


def _list_from_store(args: argparse.Namespace, key: Any) -> int:
    """Print the open waits of a job's action-state store topic, one line each."""
    from flink_agents.cli.store_command import topic_states
    from flink_agents.cli.wait_records_io import open_waits_in_store
    from flink_agents.durable.store import StoreError

    if args.topic is None:
        print("flink-agents waits: --store reads a store topic: give --topic", file=sys.stderr)
        return EXIT_USAGE
    try:
        waits = open_waits_in_store(topic_states(args), key)
    except StoreError as exc:
        print(f"flink-agents waits: {exc}", file=sys.stderr)
        return EXIT_STORE
    return _print_waits(waits, "wait calls of the store's runs with no decision recorded")


def _print_waits(waits: Sequence[OpenWaitLine], what: str) -> int:
    """One line per open wait on stdout, then how many and what counts as open on stderr."""
    for wait in waits:
        print(wait.render())
    print(f"{len(waits)} open waits: {what}", file=sys.stderr)
    return 0
