"""``flink-agents trace EVENT_LOG|--topic T [--key K] [--run SEQ]``: each run's tree from an
event log (the tree: :mod:`~flink_agents.cli.trace_tree`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from flink_agents.cli.conventions import EXIT_USAGE, add_bootstrap_option


def add_command(commands: Any) -> None:
    """Add ``trace`` to the ``flink-agents`` subcommands."""
    parser = commands.add_parser("trace", help="print each run's tree from an event log")
    parser.add_argument("event_log", nargs="?", help="an event log file (JSON lines)")
    parser.add_argument("--topic", help="read the event log from this Kafka topic instead")
    add_bootstrap_option(parser, "--topic: the Kafka brokers")
    parser.add_argument("--key", help="only runs of this key (as in the input, or JSON)")
    parser.add_argument("--run", type=int, help="only the run with this seq")
    parser.set_defaults(handler=cmd_trace)


def cmd_trace(args: argparse.Namespace) -> int:
    """Print each run's tree (actions, their calls and events) from an event log file or
    topic."""
    from flink_agents.cli.trace_tree import render_trace
    from flink_agents.observability import read_records

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
