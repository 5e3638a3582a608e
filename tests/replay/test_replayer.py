"""Replaying recorded runs against the agent as it is now: the verdicts and what they show.

Runs are recorded through a DurableCalls into an in-memory store, as a job records them;
the same contract over Kafka and the command line is in tests/cli/test_replay_command.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from flink_agents.durable.calls import DurableCalls
from flink_agents.durable.store import ActionState, InMemoryActionStateStore
from flink_agents.plan.compile import compile_agent
from flink_agents.replay.recorded import group_runs, read_store
from flink_agents.replay.replayer import ReplayReport, Verdict, replay_runs
from flink_agents.runtime import run_local
from flink_agents.runtime.engine import ActionError
from tests.replay import agents
from tests.subagent_samples import caller_agent, react_child


def record(store: InMemoryActionStateStore | None = None) -> list[ActionState]:
    """Run the inputs live into ``store``; returns every state of the topic."""
    store = store or InMemoryActionStateStore()
    plan = agents.plan()
    run_local(plan, agents.INPUTS, key="user", call_runner=DurableCalls(store, agent=plan.name))
    store.flush()
    return read_store(store)


def replay(states: list[ActionState], **options: Any) -> ReplayReport:
    agents.CALLS.clear()
    return replay_runs(agents.plan(), group_runs(states), **options)


def test_unchanged_code_replays_every_run_the_same_making_no_call() -> None:
    report = replay(record())
    assert [run.verdict for run in report.runs] == [Verdict.SAME] * 3
    assert sum(run.served for run in report.runs) == 6
    assert report.ok and report.live_calls == 0 and not agents.CALLS
    assert report.summary() == "3 runs: 3 same outputs; 0 calls made"


def test_a_changed_prompt_diverges_at_the_first_model_call_showing_both_requests() -> None:
    states = record()
    agents.NOW.prompt = "You answer in French."
    report = replay(states)
    assert not report.ok and not agents.CALLS
    assert {run.verdict for run in report.runs} == {Verdict.DIVERGED}
    divergence = report.runs[0].divergence
    assert divergence is not None
    assert (divergence.index, divergence.position, divergence.kind) == (0, 0, "function")
    assert divergence.recorded is not None and divergence.requested is not None
    assert divergence.recorded.args_digest != divergence.requested.args_digest
    text = report.runs[0].describe()
    assert f"function {agents.__name__}.chat" in text
    assert '-    "content": "You answer in one sentence."' in text
    assert '+    "content": "You answer in French."' in text


def test_a_change_after_the_last_call_gives_different_outputs_with_identical_calls() -> None:
    states = record()
    agents.NOW.output_format = "{weather}: {reply}"
    report = replay(states)
    assert [run.verdict for run in report.runs] == [Verdict.DIFFERENT] * 3
    assert all(run.divergence is None and run.served == 2 for run in report.runs)
    first = report.runs[0]
    assert first.recorded_outputs == ["It is nice in Oslo. (12 degrees)"]
    assert first.outputs == ["12 degrees: It is nice in Oslo."]
    assert not report.ok and not agents.CALLS


def test_a_new_tool_call_with_no_record_is_reported_and_not_made() -> None:
    states = record()
    agents.NOW.ask_time_too = True
    report = replay(states)
    assert {run.verdict for run in report.runs} == {Verdict.DIVERGED}
    divergence = report.runs[0].divergence
    assert divergence is not None and divergence.recorded is None
    assert (divergence.index, divergence.position, divergence.kind) == (2, 2, "function")
    assert "a call with no record (not made)" in report.runs[0].describe()
    assert agents.CALLS["local_time"] == 0 and not agents.CALLS


def test_live_missing_makes_the_new_call_and_still_reports_it() -> None:
    states = record()
    agents.NOW.ask_time_too = True
    report = replay(states, live="missing")
    assert report.live_calls == 3 and agents.CALLS == {"local_time": 3}
    assert {run.verdict for run in report.runs} == {Verdict.DIVERGED}
    text = report.runs[0].describe()
    assert "function tests.replay.agents.local_time (a call with no record (made live))" in text
    assert (
        "  made live: #2 of the run, #2 of action 'answer': "
        "function tests.replay.agents.local_time\n"
        "    recorded: - (no outcome recorded)\n"
        '    live:     "12:00"'
    ) in text


def test_live_missing_does_not_make_a_changed_call_live_changed_does() -> None:
    states = record()
    agents.NOW.prompt = "You answer in French."
    missing = replay(states, live="missing")
    assert missing.live_calls == 0 and not agents.CALLS
    assert {run.verdict for run in missing.runs} == {Verdict.DIVERGED}

    changed = replay(states, live="changed")
    assert changed.live_calls == 3 and agents.CALLS == {"chat": 3}
    first = changed.runs[0]
    assert first.verdict is Verdict.DIVERGED and first.served == 1  # the tool: from its record
    [live] = first.live
    assert (live.index, live.kind, live.returned) == (0, "function", "Il fait beau à Oslo.")
    assert live.recorded is not None and live.recorded.payload == "It is nice in Oslo."
    assert first.outputs == ["Il fait beau à Oslo. (12 degrees)"]
    assert first.recorded_outputs == ["It is nice in Oslo. (12 degrees)"]


def test_a_live_call_that_raises_shows_its_error_and_the_run_failing_after_it() -> None:
    states = record()
    agents.NOW.prompt = "You answer in French."
    agents.NOW.chat_error = "model unavailable"
    report = replay(states, live="changed")
    run = report.runs[0]
    assert run.verdict is Verdict.DIVERGED and not report.ok
    assert run.note == "then failed: RuntimeError: model unavailable"
    assert run.live[0].raised is not None and run.outputs is None
    text = run.describe()
    assert "    live:     raised RuntimeError: model unavailable" in text
    assert "outputs now" not in text  # the run did not finish: no outputs to show


def test_a_recorded_failure_is_shown_against_the_live_answer() -> None:
    store = InMemoryActionStateStore()
    agents.NOW.chat_error = "model unavailable"
    with pytest.raises(ActionError):  # recorded: the model call failed
        record(store)
    agents.NOW = agents.Behaviour(prompt="You answer in French.")
    report = replay(read_store(store), live="changed")
    text = report.runs[0].describe()
    assert '    recorded: failed builtins.RuntimeError: "model unavailable"' in text
    assert '    live:     "Il fait beau à Oslo."' in text


def test_a_run_replayed_only_to_rebuild_memory_makes_no_live_call() -> None:
    agents.NOW.count_visits = True
    recorded = group_runs(record())
    agents.NOW.prompt = "You answer in French."
    agents.CALLS.clear()
    second = [run for run in recorded if (run.run_id.key, run.run_id.seq) == ("ann", 1)]
    report = replay_runs(agents.plan(), second, earlier=recorded, live="changed")
    assert agents.CALLS == {"chat": 1} and report.live_calls == 1  # the chosen run's only


def test_an_action_that_now_raises_fails_the_run_and_the_report() -> None:
    states = record()
    agents.NOW.fail_after_calls = True
    report = replay(states)
    assert [run.verdict for run in report.runs] == [Verdict.FAILED] * 3
    assert report.runs[0].note == "ValueError: no forecast format for Oslo"
    assert report.runs[0].divergence is None and report.runs[0].served == 2
    assert not report.ok and not agents.CALLS
    assert report.summary() == "3 runs: 3 failed; 0 calls made"


def test_a_call_the_code_no_longer_makes_is_a_divergence() -> None:
    agents.NOW.ask_time_too = True
    states = record()
    agents.NOW.ask_time_too = False
    report = replay(states)
    divergence = report.runs[0].divergence
    assert divergence is not None and divergence.requested is None
    assert divergence.recorded is not None and divergence.recorded.call_id == "tool:time"


def test_runs_without_a_recorded_input_are_reported_not_replayed() -> None:
    states = [s.model_copy(update={"run_input": None}) for s in record()]
    report = replay(states)
    assert {run.verdict for run in report.runs} == {Verdict.NOT_REPLAYABLE}
    assert report.ok  # nothing could be checked, nothing differs


def test_a_keys_runs_replay_in_order_each_from_the_memory_the_previous_one_left() -> None:
    agents.NOW.count_visits = True
    states = record()
    report = replay(states)
    assert [(run.run.run_id.key, run.run.run_id.seq) for run in report.runs] == [
        ("ann", 0),
        ("ann", 1),
        ("bob", 0),
    ]
    assert report.runs[1].outputs == ["It is nice in Lima. (12 degrees) visit 2"]
    assert [run.verdict for run in report.runs] == [Verdict.SAME] * 3


def test_runs_pruned_by_the_job_are_still_read_until_compaction_removes_them() -> None:
    store = InMemoryActionStateStore()
    record(store)
    assert store.prune(store.recovery_marker()) == 3  # every run had ended: tombstoned
    assert store.state_count == 0
    report = replay(read_store(store))
    assert [run.verdict for run in report.runs] == [Verdict.SAME] * 3


def test_a_run_chosen_without_its_keys_earlier_runs_starts_from_the_memory_they_left() -> None:
    agents.NOW.count_visits = True
    recorded = group_runs(record())
    agents.CALLS.clear()
    second = [run for run in recorded if (run.run_id.key, run.run_id.seq) == ("ann", 1)]
    report = replay_runs(agents.plan(), second, earlier=recorded)
    [run] = report.runs  # the earlier run replayed silently: not reported
    assert run.verdict is Verdict.SAME
    assert run.outputs == ["It is nice in Lima. (12 degrees) visit 2"]
    assert run.note == "memory rebuilt by replaying the key's earlier runs #0"
    assert report.live_calls == 0 and not agents.CALLS

    alone = replay_runs(agents.plan(), second)  # without them: the memory starts empty
    assert alone.runs[0].verdict is Verdict.DIFFERENT


def test_a_run_whose_earlier_runs_are_not_recorded_says_it_depends_on_them() -> None:
    agents.NOW.count_visits = True
    recorded = [
        run for run in group_runs(record()) if run.run_id.seq == 1 or run.run_id.key == "bob"
    ]
    report = replay_runs(agents.plan(), recorded, earlier=recorded)
    ann = next(run for run in report.runs if run.run.run_id.key == "ann")
    assert ann.note == (
        "depends on the key's earlier runs #0, which are not recorded: "
        "replayed without the memory they left"
    )
    assert ann.verdict is Verdict.DIFFERENT  # visit 1 now, visit 2 as recorded
    assert "depends on the key's earlier runs #0" in ann.describe()


def without_arguments(states: list[ActionState]) -> list[ActionState]:
    """The states as a store that does not record call arguments writes them (digests only)."""
    return [
        state.model_copy(
            update={"calls": [call.model_copy(update={"arguments": None}) for call in state.calls]}
        )
        for state in states
    ]


def test_calls_recorded_without_arguments_still_compare_by_their_digest() -> None:
    states = without_arguments(record())
    assert all(call.arguments is None and call.args_digest for s in states for call in s.calls)
    assert [run.verdict for run in replay(states).runs] == [Verdict.SAME] * 3

    agents.NOW.prompt = "You answer in French."
    report = replay(states)
    assert {run.verdict for run in report.runs} == {Verdict.DIVERGED} and not agents.CALLS
    divergence = report.runs[0].divergence
    assert divergence is not None and divergence.recorded and divergence.requested
    text = report.runs[0].describe()
    # Both digests, no diff: the recorded side's arguments are unknown.
    assert f"recorded: id='chat' function={divergence.recorded.function!r} args=" in text
    assert f"args={divergence.recorded.args_digest[:16]}" in text
    assert f"args={divergence.requested.args_digest[:16]}" in text
    assert divergence.recorded.args_digest != divergence.requested.args_digest
    assert "(arguments not shown: the recorded call's arguments are unknown)" in text
    assert "You answer in" not in text and "+++" not in text


def test_a_delegation_replays_from_the_sub_agent_calls_record_without_running_the_child() -> None:
    # The child's own invocation (a model call) is recorded in the parent's run; serving the
    # delegation's record means the child does not run, and its recorded call is not missed.
    parent = caller_agent(researcher=react_child("replay_child", [{"content": "found: $input"}]))
    plan = compile_agent(parent)
    store = InMemoryActionStateStore()
    inputs = [{"k": "a", "calls": [["researcher", "tides", None]]}]
    run_local(plan, inputs, key="k", call_runner=DurableCalls(store, agent=plan.name))
    store.flush()
    recorded = group_runs(read_store(store))
    assert {state.key.action for state in recorded[0].states} >= {"delegate", "chat_action"}

    report = replay_runs(plan, recorded)
    [run] = report.runs
    assert run.verdict is Verdict.SAME, run.describe()
    assert (run.served, report.live_calls) == (1, 0)


def test_the_recorded_outputs_of_a_run_follow_its_events_through_every_action() -> None:
    # A ReAct run: input -> chat request -> chat response -> output, over three actions.
    plan = compile_agent(react_child("replay_react", [{"content": "answer: $input"}]))
    store = InMemoryActionStateStore()
    run_local(plan, ["tides"], key=lambda _: "k", call_runner=DurableCalls(store, agent=plan.name))
    store.flush()
    [recorded] = group_runs(read_store(store))
    assert recorded.outputs() == ["answer: tides"]
    [run] = replay_runs(plan, [recorded]).runs
    assert run.verdict is Verdict.SAME and run.outputs == ["answer: tides"]


def test_a_synchronous_actions_changed_call_is_made_live_with_its_outcome_kept() -> None:
    plan = compile_agent(agents.sync_agent())
    store = InMemoryActionStateStore()
    run_local(plan, agents.INPUTS, key="user", call_runner=DurableCalls(store, agent=plan.name))
    recorded = group_runs(read_store(store))
    agents.NOW.prompt = "Bonjour"
    agents.CALLS.clear()

    report = replay_runs(plan, recorded, live="changed")
    assert agents.CALLS == {"sync_chat": 3}
    first = report.runs[0]
    assert first.verdict is Verdict.DIVERGED
    assert first.live[0].returned == "Bonjour Oslo" and first.outputs == ["Bonjour Oslo"]

    agents.NOW.chat_error = "model unavailable"
    failing = replay_runs(plan, recorded, live="changed").runs[0]
    assert isinstance(failing.live[0].raised, RuntimeError)
    assert failing.note == "then failed: RuntimeError: model unavailable"
