"""``flink-agents store export`` and ``flink-agents replay``: parsers and handlers.

flink-agents store export --topic T [--key K] -o FILE
flink-agents replay AGENT (--topic T | --file FILE) [--key K] [--since T] [--until T]
                    [--allow-live]

AGENT is what ``compile`` takes (a plan .json, a YAML agents file or module:attr). Replay exits
with status 1 when any run diverged, gave other outputs or failed, so CI can gate a deploy.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flink_agents.durable.store import ActionState

# The store, the engine and the recorded runs load in the handlers: building the command line
# (for `flink-agents compile`, say) must not load them.

EXIT_DIFFERENCES = 1
EXIT_STORE = 3


def add_commands(commands: Any, store_commands: Any) -> None:
    """Add ``replay`` to the ``flink-agents`` subcommands and ``export`` to its ``store`` group."""
    export = store_commands.add_parser("export", help="write a store topic's records to a file")
    _add_topic(export, required=True)
    export.add_argument("--key", help="only this Flink key (a JSON value, else a string)")
    export.add_argument("-o", "--output", required=True, help="the JSON lines file to write")
    export.set_defaults(handler=cmd_store_export)

    replay = commands.add_parser(
        "replay", help="re-execute recorded runs with the agent as it is now, calling nothing"
    )
    replay.add_argument("source", help="the agent now: a plan .json, a YAML file or module:attr")
    replay.add_argument("--agent", help="which agent of a YAML file holding several")
    _add_topic(replay, required=False)
    replay.add_argument("--file", help="an exported file (flink-agents store export)")
    replay.add_argument("--key", help="only this Flink key (a JSON value, else a string)")
    replay.add_argument("--since", help="runs admitted at or after (ISO 8601 or epoch ms)")
    replay.add_argument("--until", help="runs admitted before (ISO 8601 or epoch ms)")
    replay.add_argument(
        "--allow-live", action="store_true", help="make calls that have no record (reported)"
    )
    replay.set_defaults(handler=cmd_replay)


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


def _add_topic(parser: argparse.ArgumentParser, *, required: bool) -> None:
    parser.add_argument("--topic", required=required, help="the store topic")
    add_bootstrap_option(parser, "Kafka brokers")
    parser.add_argument(
        "--partitions", type=int, default=4, help="the topic's partition count (store setting)"
    )


def _topic_states(args: argparse.Namespace) -> list[ActionState]:
    from flink_agents.durable.store.config import StoreConfig
    from flink_agents.durable.store.log import LogStore
    from flink_agents.replay.recorded import read_store

    config = StoreConfig(
        kind="kafka",
        bootstrap_servers=args.bootstrap_servers,
        topic=args.topic,
        partitions=args.partitions,
    )
    store = config.build()
    try:
        assert isinstance(store, LogStore)
        return read_store(store)
    finally:
        store.close()


def cmd_store_export(args: argparse.Namespace) -> int:
    """Write the latest state of every key of a store topic (one JSON line each)."""
    from flink_agents.durable.store import StoreError
    from flink_agents.replay.recorded import key_matches, write_states

    try:
        states = [s for s in _topic_states(args) if key_matches(s, args.key)]
    except StoreError as exc:
        print(f"flink-agents store export: {exc}", file=sys.stderr)
        return EXIT_STORE
    count = write_states(states, Path(args.output))
    print(f"{count} records of topic {args.topic!r} written to {args.output}", file=sys.stderr)
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    """Replay recorded runs; print one report per run and a summary."""
    from flink_agents.durable.store import StoreError
    from flink_agents.plan.sources import load_plan
    from flink_agents.replay.recorded import in_window, key_matches, read_states, runs_of
    from flink_agents.replay.replayer import replay_runs

    if (args.topic is None) == (args.file is None):
        raise ValueError("give the recorded runs with exactly one of --topic and --file")
    plan = load_plan(args.source, args.agent)
    try:
        states = read_states(Path(args.file)) if args.file else _topic_states(args)
    except StoreError as exc:
        print(f"flink-agents replay: {exc}", file=sys.stderr)
        return EXIT_STORE
    since, until = _time(args.since), _time(args.until)
    recorded = list(runs_of(states, plan.name))
    runs = [
        run
        for run in recorded
        if all(key_matches(state, args.key) for state in run.states)
        and in_window(run, since, until)
    ]
    # The runs left out: a chosen run's memory is rebuilt from its key's earlier ones.
    report = replay_runs(plan, runs, allow_live=args.allow_live, earlier=recorded)
    for run in report.runs:
        print(run.describe())
    print(report.summary())
    return 0 if report.ok else EXIT_DIFFERENCES


def _time(text: str | None) -> float | None:
    """Epoch ms from epoch ms or an ISO 8601 time (a time without zone is UTC)."""
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp() * 1000
