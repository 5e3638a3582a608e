"""``flink-agents store export`` and ``flink-agents replay``: parsers and handlers.

flink-agents store export --topic T [--key K] -o FILE
flink-agents replay AGENT (--topic T | --file FILE) [--key K] [--since T] [--until T]
                    [--live {missing,changed}] [--allow-empty]

AGENT is what ``compile`` takes (a plan .json, a YAML agents file or module:attr). Replay exits
with status 1 when any run diverged, gave other outputs or failed, so CI can gate a deploy; and
it passes nothing by mistake: a missing topic (never created by the read) exits 3, an agent
with no recorded runs where others have some exits 2 naming them, and no run to check (none
matched, or none replayable) exits 4 unless ``--allow-empty``.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flink_agents.durable.store import ActionState
    from flink_agents.replay.recorded import RecordedRun

# The store, the engine and the recorded runs load in the handlers: building the command line
# (for `flink-agents compile`, say) must not load them.

EXIT_DIFFERENCES = 1
EXIT_STORE = 3
EXIT_NO_RUNS = 4
"""No run was checked: none matched the filters, or none could be replayed."""


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
        "--live",
        choices=("missing", "changed"),
        help="make calls instead of ending the run at them: 'missing' the calls with no record, "
        "'changed' also the calls that differ from their record (to see a changed prompt's "
        "answer); each is shown with what it returned against its record",
    )
    replay.add_argument(
        "--allow-live", dest="live", action="store_const", const="missing", help="--live missing"
    )
    replay.add_argument(
        "--allow-empty",
        action="store_true",
        help="exit 0 when no run is left to check (none matched, or none is replayable)",
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
        "--partitions", type=int, help="check that the topic has this many partitions"
    )


def _topic_states(args: argparse.Namespace) -> list[ActionState]:
    """Every state of the store topic; a `StoreError` if there is no such topic (a read never
    creates one: a mistyped name would read as an empty topic and pass)."""
    from flink_agents.durable.store.kafka import KafkaActionStateStore
    from flink_agents.replay.recorded import read_store

    store = KafkaActionStateStore.existing(
        args.bootstrap_servers, args.topic, partitions=args.partitions
    )
    try:
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
    from flink_agents.replay.recorded import group_runs, in_window, key_matches, read_states
    from flink_agents.replay.replayer import replay_runs

    if (args.topic is None) == (args.file is None):
        raise ValueError("give the recorded runs with exactly one of --topic and --file")
    plan = load_plan(args.source, args.agent)
    try:
        states = read_states(Path(args.file)) if args.file else _topic_states(args)
    except StoreError as exc:
        print(f"flink-agents replay: {exc}", file=sys.stderr)
        return EXIT_STORE
    source = f"file {args.file}" if args.file else f"topic {args.topic!r}"
    every_run = group_runs(states)
    recorded = [run for run in every_run if run.key.agent == plan.name]
    if every_run and not recorded:
        raise ValueError(_other_agents(plan.name, every_run, source))
    since, until = _time(args.since), _time(args.until)
    runs = [
        run
        for run in recorded
        if all(key_matches(state, args.key) for state in run.states)
        and in_window(run, since, until)
    ]
    # The runs left out: a chosen run's memory is rebuilt from its key's earlier ones.
    report = replay_runs(plan, runs, live=args.live, earlier=recorded)
    for run in report.runs:
        print(run.describe())
    print(report.summary())
    if not report.ok:
        return EXIT_DIFFERENCES
    if report.checked == 0:  # a gate that checked nothing must not pass by mistake
        if not recorded:
            why = f"{source} holds no recorded run"
        elif not runs:
            why = f"no recorded run of {plan.name!r} matched {_filters(args)}"
        else:
            why = f"none of the {len(runs)} runs could be replayed"
        hint = "" if args.allow_empty else " (--allow-empty to accept that)"
        print(f"flink-agents replay: nothing checked: {why}{hint}", file=sys.stderr)
        return 0 if args.allow_empty else EXIT_NO_RUNS
    return 0


def _other_agents(agent: str, runs: list[RecordedRun], source: str) -> str:
    """Why an agent with no recorded run cannot be checked, naming the agents that have runs:
    an agent renamed since the recording would otherwise replay nothing and pass."""
    counts = Counter(run.key.agent for run in runs)
    found = ", ".join(f"{name!r} ({count} runs)" for name, count in sorted(counts.items()))
    return (
        f"no recorded run of agent {agent!r} in {source}, which holds runs of {found}; runs "
        "are matched by the agent's name: replay the agent under its recorded name (or choose "
        "it with --agent)"
    )


def _filters(args: argparse.Namespace) -> str:
    """The filters given, as typed."""
    given = {name: getattr(args, name) for name in ("key", "since", "until")}
    return " ".join(f"--{name} {value}" for name, value in given.items() if value is not None)


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
