"""`flink-agents trace`: each run's tree, from the weather example and from a crash and replay
through the action-state store (the second execution's recorded calls show ``replayed``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from examples.weather import build_agent
from flink_agents.cli import main
from flink_agents.cli.trace_tree import executions, render_trace
from flink_agents.durable.store import InMemoryActionStateStore
from flink_agents.observability import (
    CallFinished,
    EventLogConfig,
    JsonLinesSink,
    RunAdmitted,
    build_event_log,
    read_records,
)
from flink_agents.observability.log_records import construct, record_json
from flink_agents.runtime import Runtime, run_local
from flink_agents.testing import agent_plan
from tests.durable import helpers as h
from tests.durable.helpers import PROBE
from tests.observability.scenarios import crash_and_replay
from tests.sample_agents import unheard_agent

pytestmark = pytest.mark.usefixtures("fresh_probe")


def test_the_weather_runs_print_as_trees(tmp_path: Path, capsys):
    path = tmp_path / "events.jsonl"
    inputs = [{"city": "Oslo"}, {"city": "Berlin"}]
    run_local(build_agent(), inputs, key="city", event_log=EventLogConfig(path=str(path)))

    assert main(["trace", str(path), "--key", "Oslo"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith('run weather_react "Oslo" #0  succeeded  ')
    step = [
        "  action chat_action on ToolResponseEvent",
        "    call chat model live",
        "    event ToolRequestEvent",
    ]
    assert [_shape(line) for line in lines[1:]] == [
        "  action react_start on InputEvent",
        "    event ChatRequestEvent",
        "  action chat_action on ChatRequestEvent",
        "    call chat model live",
        "    event ToolRequestEvent",
        "  action tool_call_action on ToolRequestEvent",
        "    call tool:call_0_0 tool live",
        "    event ToolResponseEvent",
        *step,
        "  action tool_call_action on ToolRequestEvent",
        "    call tool:call_1_0 tool live",
        "    event ToolResponseEvent",
        *step[:2],
        "    event ChatResponseEvent",
        "  action react_finish on ChatResponseEvent",
        "    event OutputEvent",
    ]
    assert " ms" in lines[3]  # latency of the first model call

    assert main(["trace", str(path), "--run", "1"]) == 0
    assert capsys.readouterr().out == ""  # each city has one run, seq 0


def test_an_event_nobody_listened_to_is_marked_dropped(tmp_path: Path, capsys):
    path = tmp_path / "events.jsonl"
    inputs = [{"k": "a", "n": 1}]
    run_local(unheard_agent(), inputs, key="k", event_log=EventLogConfig(path=str(path)))

    assert main(["trace", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [_shape(line) for line in lines[1:]] == [
        "  action answer_and_send_unheard on InputEvent",
        "    event Unheard",
        "    event OutputEvent",
    ]
    assert lines[2].endswith("  dropped: no action listens to it")
    assert not lines[3].endswith("dropped: no action listens to it")


def _shape(line: str) -> str:
    """A tree line without its short id and timings: ``call <id> <kind> <outcome>`` for a call,
    else its head (``action <name> on <event type>``, ``event <type>``)."""
    indent = line[: len(line) - len(line.lstrip())]
    fields = line.strip().split("  ")
    if fields[0].startswith("call "):
        return indent + " ".join(fields[:3])
    head = fields[0].split(" ")
    return indent + " ".join(head[:-1])  # the last word is the event's short id


def test_a_replayed_run_shows_the_recorded_calls_as_replayed(tmp_path: Path, capsys):
    path = tmp_path / "events.jsonl"
    sink = JsonLinesSink(path)
    crash_and_replay(sink)
    sink.close()
    first, second = executions(read_records(path))
    assert first.finished is not None and first.finished.status == "cancelled"
    assert second.finished is not None and second.finished.status == "succeeded"

    def outcomes(execution):
        return [
            (call.call_id, call.outcome)
            for invocation in execution.invocations.values()
            for call in invocation.calls
        ]

    assert outcomes(first) == [("#0", "live"), ("#1", "live")]  # the third never finished
    assert outcomes(second) == [("#0", "replayed"), ("#1", "replayed"), ("#2", "live")]

    assert main(["trace", str(path)]) == 0
    out = capsys.readouterr().out
    assert 'run durable "k" #0  cancelled' in out
    assert 'run durable "k" #0 (execution 2)  succeeded' in out
    assert "call #0  function  replayed" in out
    assert "call #2  function  live" in out


def test_a_replayed_action_names_the_event_it_had_handled(tmp_path: Path, capsys):
    path = tmp_path / "events.jsonl"
    sink = JsonLinesSink(path)
    # prepare completes (its Prepared event recorded), then the crash comes in finish's call.
    crash_and_replay(sink, agent_plan(h.prepare, h.finish), hold="final")
    sink.close()

    assert main(["trace", str(path)]) == 0
    second = capsys.readouterr().out.split("(execution 2)")[1].splitlines()
    prepare = next(line for line in second if line.startswith("  action prepare"))
    # Its events come before its end in the log, and it has no start: the type is the end's.
    assert _shape(prepare) == "  action prepare on InputEvent"
    assert prepare.endswith("  replayed")
    assert "action finish on Prepared" in second[3]


def test_a_run_whose_process_was_killed_is_unfinished_and_cut_off(tmp_path: Path, capsys):
    path = tmp_path / "events.jsonl"
    sink = JsonLinesSink(path)
    crash_and_replay(sink, killed=True)
    sink.close()

    assert main(["trace", str(path)]) == 0
    out = capsys.readouterr().out
    assert 'run durable "k" #0  unfinished  cut off: no end record, executed again\n' in out
    assert "cancelled" not in out
    assert 'run durable "k" #0 (execution 2)  succeeded' in out


def test_a_killed_run_not_executed_again_yet_is_just_unfinished(tmp_path: Path):
    path = tmp_path / "events.jsonl"
    sink = JsonLinesSink(path)
    crash_and_replay(sink, killed=True)
    sink.close()
    records = list(read_records(path))
    restore = [n for n, record in enumerate(records) if isinstance(record, RunAdmitted)][1]

    first = render_trace(records[:restore]).splitlines()[0]  # the log before the restore
    assert first == 'run durable "k" #0  unfinished'


def test_a_reconciled_call_is_recorded_as_reconciled():
    plan = agent_plan(h.reconciled_call)
    store = InMemoryActionStateStore()
    seen = []

    class Keep:
        def on_record(self, record):
            if isinstance(record, CallFinished):
                seen.append(record.outcome)

    async def scenario():
        PROBE.hold = "charge"
        state = await h.crash_mid_run(plan, store, "k", {"n": 7})
        PROBE.reconcile_with = "found"
        log = build_event_log(None, [Keep()])
        engine = Runtime.build(plan, store=store, event_log=log).engine
        engine.restore_key("k", state)
        await engine.drain()
        return engine.take_results()

    [result] = asyncio.run(scenario())
    assert result.output_values == ["found"]
    assert seen == ["reconciled"]


def test_an_unreadable_event_log_is_a_usage_error(tmp_path: Path, capsys):
    assert main(["trace", str(tmp_path / "missing.jsonl")]) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind": "nothing"}\n')
    assert main(["trace", str(bad)]) == 2
    assert "flink-agents trace" in capsys.readouterr().err


def test_a_file_that_is_not_an_event_log_is_a_usage_error_naming_the_file_and_line(
    tmp_path: Path, capsys
):
    outputs = tmp_path / "outputs.jsonl"  # a job's outputs, say: JSON lines, but no records
    admitted = record_json(construct(RunAdmitted, time=1.0, agent="a", key="k", seq=0))
    outputs.write_text(f'{admitted}\n\n{{"agent": "a", "key": "k", "seq": 0, "output": 1}}\n')

    assert main(["trace", str(outputs)]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == (
        "",
        f"flink-agents trace: {outputs}:3: not an event log record: "
        'no "kind" field (every record has one: run_started, call, ...)\n',
    )
