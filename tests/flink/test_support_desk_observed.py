"""The example job's run, observed: the support desk (jobs/support_desk.yaml) on the
mini-cluster with its event log on and one injected task failure, as ``make run`` runs it.

``flink-agents trace`` rebuilds every ticket's tree from the event log, and marks ``replayed``
exactly the calls the store topic had recorded before the execution that shows them began (the
re-execution after the restore). The run is the session's ``support_desk`` fixture
(tests/conftest.py): the console's tests read the same one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from flink_agents.cli.trace_tree import executions
from flink_agents.durable.store.inspect import open_store
from flink_agents.observability import read_records
from tests.flink.support_desk_run import SupportDeskRun

pytestmark = [pytest.mark.flink, pytest.mark.kafka]

CallPlace = tuple[str, int, str, str, str]
"""Where a call stands: the run's key (JSON) and seq, the action, the first 8 characters of the
event id it handled, and the call id."""


def flink_agents(*args: str) -> subprocess.CompletedProcess[str]:
    """The ``flink-agents`` command as a user runs it (a process of its own)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PYFLINK_")}
    return subprocess.run(
        [sys.executable, "-m", "flink_agents.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        env=environ,
    )


@dataclass(frozen=True)
class TracedRun:
    key: str  # as JSON
    seq: int
    execution: int
    status: str


@dataclass(frozen=True)
class TracedCall:
    run: TracedRun
    place: CallPlace
    outcome: str


_RUN = re.compile(
    r'^run support_desk (?P<key>"[^"]+") #(?P<seq>\d+)(?: \(execution (?P<n>\d+)\))?  '
    r"(?P<status>\w+)"
)
_ACTION = re.compile(r"^  action (?P<action>\w+) on \w+ (?P<event>[0-9a-f]{8})")
_CALL = re.compile(r"^    call (?P<id>.+?)  (?:model|tool|subagent|function)  (?P<outcome>\w+)  ")


def parse_trace(text: str) -> tuple[list[TracedRun], list[TracedCall]]:
    """The runs and the calls of ``flink-agents trace``'s output."""
    runs: list[TracedRun] = []
    calls: list[TracedCall] = []
    action = event = ""
    for line in text.splitlines():
        if found := _RUN.match(line):
            runs.append(
                TracedRun(found["key"], int(found["seq"]), int(found["n"] or 1), found["status"])
            )
        elif found := _ACTION.match(line):
            action, event = found["action"], found["event"]
        elif found := _CALL.match(line):
            run = runs[-1]
            place = (run.key, run.seq, action, event, found["id"])
            calls.append(TracedCall(run, place, found["outcome"]))
    return runs, calls


def first_recorded(run: SupportDeskRun, bootstrap: str) -> dict[CallPlace, float]:
    """When each call of the store topic was first recorded as finished (seconds); a call
    recorded as pending (a model call, before it is sent) is not finished."""
    store, corrupt = open_store(bootstrap, run.store_topic)
    assert corrupt == 0
    recorded: dict[CallPlace, float] = {}
    for state in store.history():
        key = state.key
        for call in state.calls:
            if call.finished_at is None:
                continue
            place = (key.key, key.seq, key.action, (key.event_id or "")[:8], call.call_id)
            recorded[place] = min(recorded.get(place, call.finished_at), call.finished_at / 1000)
    return recorded


def execution_starts(event_log: Path) -> dict[tuple[str, int, int], float]:
    """When each execution of each run began, from the event log."""
    return {
        (execution.run[1], execution.run[2], execution.number): execution.started.time
        for execution in executions(read_records(event_log))
    }


def test_trace_rebuilds_every_ticket_and_marks_the_calls_recorded_before_the_failure(
    support_desk: SupportDeskRun, kafka_bootstrap: str
) -> None:
    shown = flink_agents("trace", str(support_desk.event_log))
    assert shown.returncode == 0, shown.stderr
    runs, calls = parse_trace(shown.stdout)

    # Every ticket has a tree: its run (the customer's n-th ticket), finished in the end.
    tickets: list[tuple[str, int]] = []
    for ticket in support_desk.tickets:
        customer = f'"{ticket["customer"]}"'
        tickets.append((customer, sum(1 for c, _ in tickets if c == customer)))
    last = {(run.key, run.seq): run for run in runs}  # a later execution replaces an earlier
    assert sorted(last) == sorted(tickets)
    assert {run.status for run in last.values()} == {"succeeded"}
    assert any(run.execution > 1 for run in runs), "no run was executed again after the failure"

    # A call shows `replayed` exactly when the store had recorded it before its execution began.
    recorded = first_recorded(support_desk, kafka_bootstrap)
    starts = execution_starts(support_desk.event_log)
    wrong = []
    for call in calls:
        assert call.place in recorded, f"a traced call the store never recorded: {call}"
        began = starts[(call.run.key, call.run.seq, call.run.execution)]
        expected = "replayed" if recorded[call.place] < began else ("live", "failed")
        if call.outcome not in expected:
            wrong.append((call, recorded[call.place] - began))
    assert not wrong, wrong
    replayed = [call for call in calls if call.outcome == "replayed"]
    print(f"\n[support desk trace] {len(runs)} trees, {len(calls)} calls, {len(replayed)} replayed")
    assert replayed, "no call recorded before the failure was replayed"
    assert all(call.run.execution > 1 for call in replayed)


def replay(agent: Path, run: SupportDeskRun, bootstrap: str, *more: str) -> str:
    """``flink-agents replay`` of the run's store topic against ``agent``; its output."""
    done = flink_agents(
        "replay", str(agent), "--topic", run.store_topic, "--bootstrap-servers", bootstrap, *more
    )
    assert done.returncode in (0, 1), done.stderr
    return done.stdout + f"exit {done.returncode}\n"


def test_replaying_the_recorded_topic_against_unchanged_code_makes_no_call(
    support_desk: SupportDeskRun, kafka_bootstrap: str
) -> None:
    # The services are down: a call made would fail, and show as a difference.
    out = replay(support_desk.agent_file, support_desk, kafka_bootstrap)
    tickets = len(support_desk.tickets)
    assert out.endswith(f"{tickets} runs: {tickets} same outputs; 0 calls made\nexit 0\n"), out
    assert out.count("0 made)") == tickets


def test_a_changed_prompt_diverges_at_the_first_model_call_of_every_ticket(
    support_desk: SupportDeskRun, kafka_bootstrap: str, tmp_path: Path
) -> None:
    recorded_prompt = 'ticket: "{question} (customer {customer}, ticket {ticket})"'
    changed = tmp_path / "agent.yaml"
    text = support_desk.agent_file.read_text()
    assert recorded_prompt in text
    changed.write_text(text.replace(recorded_prompt, 'ticket: "Urgent: {question} ({customer})"'))

    out = replay(changed, support_desk, kafka_bootstrap)
    tickets = len(support_desk.tickets)
    assert out.endswith(f"{tickets} runs: {tickets} diverged; 0 calls made\nexit 1\n"), out
    first = support_desk.tickets[0]
    customer = first["customer"]
    # The first ticket's report: its first call, the desk's model call, with both requests.
    report = out[out.index(f'run support_desk/"{customer}"/0: diverged') :].split("\nrun ")[0]
    assert "first differing call: #0 of the run, #0 of action 'chat_action'" in report, report
    assert "): model flink_agents.api.chat_models.ChatModelSetup.chat" in report
    assert (
        f'-    "content": "{first["question"]} (customer {customer}, ticket {first["ticket"]})",'
        in report
    )
    assert f'+    "content": "Urgent: {first["question"]} ({customer})",' in report
