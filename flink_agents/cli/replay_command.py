"""``flink-agents replay``: recorded runs re-executed by the agent as it is now
(docs/replay.md).

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

from flink_agents.cli.conventions import EXIT_STORE, add_source
from flink_agents.cli.store_command import add_topic, topic_states

if TYPE_CHECKING:
    from flink_agents.replay.recorded import RecordedRun

# The store, the engine and the recorded runs load in the handlers: building the command line
# (for `flink-agents compile`, say) must not load them.

EXIT_DIFFERENCES = 1
EXIT_NO_RUNS = 4
"""No run was checked: none matched the filters, or none could be replayed."""


def add_command(commands: Any) -> None:
    """Add ``replay`` to the ``flink-agents`` subcommands."""
    replay = commands.add_parser(
        "replay", help="re-execute recorded runs with the agent as it is now, calling nothing"
    )
    add_source(replay, "the agent now: a plan .json, a YAML file or module:attr")
    add_topic(replay, required=False)
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


def cmd_replay(args: argparse.Namespace) -> int:
    """Replay recorded runs; print one report per run and a summary."""
    from flink_agents.durable.store import StoreError, secret_from_env
    from flink_agents.plan.sources import load_plan
    from flink_agents.replay.recorded import group_runs, in_window, key_matches, read_states
    from flink_agents.replay.replayer import replay_runs

    if (args.topic is None) == (args.file is None):
        raise ValueError("give the recorded runs with exactly one of --topic and --file")
    plan = load_plan(args.source, args.agent)
    try:
        if args.file:
            states = read_states(Path(args.file), secret=secret_from_env(args.secret_env))
        else:
            states = topic_states(args)
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
