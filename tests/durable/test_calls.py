"""Durable execution with the in-memory store: replay, completed actions, reconcile,
determinism, retry budgets, recorded failures and typed payloads."""

import asyncio
import logging
from typing import Any

import pytest

from flink_agents.api import InputEvent, OutputEvent, RunnerContext, action
from flink_agents.api.context import RecordedCallError
from flink_agents.api.tools import FunctionTool
from flink_agents.durable.calls import DurableCalls
from flink_agents.durable.identity import ActionInvocation, RunId, canonical_json, event_id
from flink_agents.durable.mismatch import CallMismatchError
from flink_agents.durable.store import (
    ActionState,
    ActionStateKey,
    CallResult,
    CallStatus,
    InMemoryActionStateStore,
    InMemoryLog,
    RecordCodec,
    RunKey,
)
from flink_agents.observability import CallFinished, build_event_log
from flink_agents.plan.models import AgentPlan
from flink_agents.providers._http_errors import AttemptFailure, CallLabel
from flink_agents.providers._retry import RetryPolicy, call_with_retries
from flink_agents.runtime import ActionError, Runtime, run_local
from flink_agents.runtime.engine import RunResult
from flink_agents.runtime.state import KeyState
from flink_agents.testing import agent_plan, resume
from tests.durable import helpers as h
from tests.durable.helpers import PROBE

pytestmark = pytest.mark.usefixtures("fresh_probe")


def _input_state_key(plan_name: str, key: Any, action_name: str) -> ActionStateKey:
    run = RunId(plan_name, key, 0)
    return RunKey(agent=plan_name, key=canonical_json(key), seq=0).action(
        action_name, event_id(run, None, None, 0)
    )


def _store_after_crash(restored: bool, log: InMemoryLog, store: InMemoryActionStateStore, marker):
    """The store a new engine gets: the same object, or a new one restored from the log."""
    if not restored:
        return store
    fresh = InMemoryActionStateStore(log)
    fresh.restore(marker)
    return fresh


async def _crash_then_restore(plan, value: Any) -> tuple[Any, InMemoryActionStateStore]:
    """Crash a run at its held "third" call; return the key state a checkpoint would hold and
    a new store restored from the log (the probe's counts cleared)."""
    log = InMemoryLog()
    store = InMemoryActionStateStore(log)
    marker = store.recovery_marker()  # the checkpoint before the input arrived
    PROBE.hold = "third"
    state = await h.crash_mid_run(plan, store, "k", value)
    PROBE.counts.clear()
    return state, _store_after_crash(True, log, store, marker)


def _crash_at_third_then_replay(
    plan: AgentPlan, *, variant: str | None = None
) -> tuple[RunResult, KeyState]:
    """Run ``{}`` on a new in-memory store until its held "third" call and crash; then set
    ``PROBE.variant`` (the code as it is now) if given, clear the probe's counts and replay on
    the same store. Returns the replay's result and key state."""
    store = InMemoryActionStateStore()

    async def scenario() -> tuple[RunResult, KeyState]:
        PROBE.hold = "third"
        state = await h.crash_mid_run(plan, store, "k", {})
        if variant is not None:
            PROBE.variant = variant
        PROBE.counts.clear()
        return await resume(plan, store, "k", state)

    return asyncio.run(scenario())


@pytest.mark.parametrize("restored", [False, True], ids=["same-store", "restored-store"])
def test_replay_hands_back_completed_calls_and_runs_the_rest_once(restored):
    plan = agent_plan(h.three_calls)
    log = InMemoryLog()
    store = InMemoryActionStateStore(log)
    marker = store.recovery_marker()  # the checkpoint before the input arrived

    async def scenario():
        PROBE.hold = "third"
        state = await h.crash_mid_run(plan, store, "k", {"n": 1})
        assert [p.seq for p in state.pending] == [0]
        assert PROBE.counts == {"first": 1, "second": 1, "third": 1}
        PROBE.counts.clear()
        again = _store_after_crash(restored, log, store, marker)
        return await resume(plan, again, "k", state)

    result, _ = asyncio.run(scenario())
    assert PROBE.counts == {"third": 1}  # first and second were not called again
    assert result.output_values == [[2, 3, 4]]
    assert result.output_values == run_local(plan, [{"k": "k", "n": 1}], key="k")[0].output_values


def test_a_replay_waiting_in_the_queue_keeps_its_states_through_a_prune():
    # After a restore, a key's pending input is handed back to the engine but may wait behind
    # the in-flight bound; the store must count it as begun, or the first prune after the
    # restore lets its states go and the replay calls everything again.
    plan = agent_plan(h.three_calls)

    async def scenario():
        state, again = await _crash_then_restore(plan, {"n": 1})
        engine = Runtime.build(plan, store=again).engine
        engine.restore_key("k", state)  # queued, not started: nothing pumps the engine yet
        again.prune(again.recovery_marker())
        await engine.drain()
        return engine.take_results()

    [result] = asyncio.run(scenario())
    assert PROBE.counts == {"third": 1}  # first and second still handed back
    assert result.output_values == [[2, 3, 4]]


def test_a_run_begins_and_ends_in_the_store():
    plan = agent_plan(h.three_calls)
    store = InMemoryActionStateStore()
    run = RunKey(agent=plan.name, key=canonical_json("k"), seq=0)
    runner = DurableCalls(store, agent=plan.name)
    run_local(plan, [{"k": "k", "n": 1}], key="k", call_runner=runner)
    assert store.recovery_marker().open_runs == []  # begun, then ended
    [state] = store.get_run(run)
    assert state.completed
    assert [c.call_id for c in state.calls] == ["#0", "#1", "#2"]
    assert all(c.status is CallStatus.SUCCEEDED for c in state.calls)


def test_completed_actions_are_not_rerun_their_events_and_memory_are_reapplied():
    plan = agent_plan(h.prepare, h.finish)
    store = InMemoryActionStateStore()

    async def scenario():
        PROBE.hold = "final"
        state = await h.crash_mid_run(plan, store, "k", {"n": 5}, {"stale": "earlier run"})
        assert state.short_term_memory == {"stale": "earlier run"}  # the run did not commit
        PROBE.counts.clear()
        return await resume(plan, store, "k", state)

    result, key_state = asyncio.run(scenario())
    # prepare completed before the crash: not called, and neither was its durable call
    assert PROBE.counts == {"action:finish": 1, "final": 1}
    # finish saw prepare's event and sensory memory; the run committed prepare's writes
    assert result.output_values == [{"out": 6 + 10 + 1, "seen": 5}]
    assert key_state.short_term_memory == {"seen": 5, "last": 17}
    journal = store.get(_input_state_key(plan.name, "k", "prepare"))
    assert journal is not None and journal.completed
    assert [e["value"]["type"] for e in journal.events] == [h.Prepared.event_type()]


@pytest.mark.parametrize(
    ("answer", "expected_output", "expected_counts"),
    [
        ("recorded elsewhere", "recorded elsewhere", {"reconcile:charge": 1}),
        (ValueError("declined"), None, {"reconcile:charge": 1}),
        ("NOT_DONE", 8, {"reconcile:charge": 1, "charge": 1}),
        ("no reconciler", 8, {"charge": 1}),
    ],
    ids=["result", "raise", "not-done", "no-reconciler"],
)
def test_a_pending_call_is_reconciled_or_sent_again(answer, expected_output, expected_counts):
    plan = agent_plan(h.reconciled_call, error_policy="emit")
    store = InMemoryActionStateStore()
    key = _input_state_key(plan.name, "k", "reconciled_call")

    async def scenario():
        PROBE.hold = "charge"
        state = await h.crash_mid_run(plan, store, "k", {"n": 7})
        [pending] = store.get(key).calls  # written (and flushed) before the call was sent
        assert pending.status is CallStatus.PENDING
        PROBE.counts.clear()
        if answer == "no reconciler":
            PROBE.use_reconciler = False
        elif answer != "NOT_DONE":
            PROBE.reconcile_with = answer
        return await resume(plan, store, "k", state)

    result, _ = asyncio.run(scenario())
    assert PROBE.counts == expected_counts
    [call] = store.get(key).calls
    if isinstance(answer, Exception):
        assert result.error is not None and "declined" in result.error.message
        assert call.status is CallStatus.FAILED and call.error.message == "declined"
    else:
        assert result.output_values == [expected_output]
        assert call.status is CallStatus.SUCCEEDED


@pytest.mark.parametrize(("variant", "what"), [("b", "order"), ("c", "arguments")])
def test_a_changed_call_fails_the_replay_showing_both_sides(variant, what):
    with pytest.raises(ActionError) as info:
        _crash_at_third_then_replay(agent_plan(h.variant_calls), variant=variant)
    mismatch = info.value.__cause__
    assert isinstance(mismatch, CallMismatchError)
    assert mismatch.requested is not None
    # calls are compared position by position: the swap shows at #0, the new argument at #1
    position = 0 if what == "order" else 1
    assert (mismatch.position, mismatch.recorded.call_id) == (position, f"#{position}")
    assert mismatch.requested.call_id == f"#{position}"
    assert "" not in (mismatch.recorded.args_digest, mismatch.requested.args_digest)
    assert mismatch.recorded.args_digest != mismatch.requested.args_digest
    text = str(mismatch)
    assert "recorded: id=" in text and "now:      id=" in text
    assert mismatch.recorded.args_digest[:16] in text
    assert mismatch.requested.args_digest[:16] in text
    assert PROBE.counts["third"] == 0


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def subtract(a: int, b: int) -> int:
    """Subtract b from a."""
    return a - b


TOOLS = {
    "add": FunctionTool(function=f"{__name__}:add", name="calc"),
    "subtract": FunctionTool(function=f"{__name__}:subtract", name="calc"),
}
"""Two tools offered under one name, ``calc``: the one the code uses is ``PROBE.variant``."""


@action(InputEvent)
async def call_calc(event: InputEvent, ctx: RunnerContext) -> None:
    tool = TOOLS[PROBE.variant]
    value = await ctx.durable_execute_async(tool.call_with_key, {"a": 3, "b": 1}, "key")
    held = await ctx.durable_execute_async(PROBE.call, "third", 0)
    ctx.send_event(OutputEvent(output=[value, held]))


def test_another_tool_behind_the_same_offered_name_is_a_mismatch_naming_both():
    PROBE.variant = "add"
    with pytest.raises(ActionError) as info:
        _crash_at_third_then_replay(agent_plan(call_calc), variant="subtract")
    mismatch = info.value.__cause__
    assert isinstance(mismatch, CallMismatchError) and mismatch.requested is not None
    assert (mismatch.position, mismatch.recorded.call_id) == (0, "#0")
    assert mismatch.recorded.function == f"{__name__}:add"
    assert mismatch.requested.function == f"{__name__}:subtract"
    assert f"{__name__}:subtract" in str(mismatch)


def test_a_changed_call_under_warn_is_logged_with_both_sides_and_called_again(caplog):
    plan = agent_plan(h.variant_calls, config={"durable.mismatch_policy": "warn"})
    with caplog.at_level(logging.WARNING, logger="flink_agents.durable.calls"):
        result, _ = _crash_at_third_then_replay(plan, variant="c")
    # first(1) matched its record; second(99) differs: it and everything after run again
    assert PROBE.counts == {"second": 1, "third": 1}
    assert result.output_values == [[2, 100, 1]]
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert (
        "recorded: id='#1'" in warning.getMessage() and "now:      id='#1'" in warning.getMessage()
    )
    assert "made again" in warning.getMessage()


@action(InputEvent)
async def shrinking(event: InputEvent, ctx: RunnerContext) -> None:
    if PROBE.variant == "a":
        await ctx.durable_execute_async(PROBE.call, "first", 1)
        await ctx.durable_execute_async(PROBE.call, "third", 1)
    ctx.send_event(OutputEvent(output="done"))


def test_recorded_calls_the_code_no_longer_makes_are_a_mismatch():
    with pytest.raises(ActionError) as info:
        _crash_at_third_then_replay(agent_plan(shrinking), variant="gone")
    mismatch = info.value.__cause__
    assert isinstance(mismatch, CallMismatchError)
    assert (mismatch.position, mismatch.recorded.call_id, mismatch.requested) == (0, "#0", None)
    assert "no call" in str(mismatch)


@action(InputEvent)
async def flaky_model(event: InputEvent, ctx: RunnerContext) -> None:
    async def model_call() -> str:
        async def attempt() -> str:
            PROBE.counts["attempt"] += 1
            if PROBE.counts["attempt"] == PROBE.fail_attempts + 1 and PROBE.hold == "attempt":
                assert PROBE.reached is not None
                PROBE.reached.set()
                await asyncio.Event().wait()
            raise AttemptFailure("overloaded", retryable=True, status=529)

        policy = RetryPolicy(max_attempts=5, initial_backoff_seconds=0, jitter=0)
        return await call_with_retries(attempt, policy, CallLabel("fake", "m", 0))

    await ctx.durable_execute_async(model_call)


def test_a_restart_keeps_the_failed_attempts_and_forgives_the_one_it_ended():
    """Failed attempts are counted across a restart; the attempt the restart ended (in flight,
    never seen to fail) spends ``max_interrupted_attempts`` instead."""
    plan = agent_plan(flaky_model, error_policy="emit")
    store = InMemoryActionStateStore()
    key = _input_state_key(plan.name, "k", "flaky_model")

    async def scenario():
        PROBE.hold, PROBE.fail_attempts = "attempt", 2  # two attempts fail, the third hangs
        state = await h.crash_mid_run(plan, store, "k", {})
        [pending] = store.get(key).calls
        # Counted before each attempt was sent, and as each failure was seen.
        assert (pending.attempts, pending.failed_attempts) == (3, 2)
        PROBE.counts.clear()
        PROBE.hold = None
        return await resume(plan, store, "k", state)

    result, _ = asyncio.run(scenario())
    assert PROBE.counts["attempt"] == 3  # 5 may fail, 2 failed before the restart
    assert result.error is not None and "budget of 5 spent" in result.error.message
    [call] = store.get(key).calls
    assert (call.status, call.attempts, call.failed_attempts) == (CallStatus.FAILED, 6, 5)


def test_a_recorded_failure_is_raised_without_calling_and_payloads_keep_their_types():
    plan = agent_plan(h.typed_and_failed)

    async def scenario():
        state, again = await _crash_then_restore(plan, {})
        return await resume(plan, again, "k", state)

    result, _ = asyncio.run(scenario())
    assert PROBE.counts == {"third": 1}
    [[reply_type, text, point_type, y, failure]] = result.output_values
    assert (reply_type, text, point_type, y) == ("Reply", "hi", "Point", 6)
    assert failure.startswith(f"{RecordedCallError.__name__}|builtins.ValueError|")
    assert "builtins.ValueError: boom" in failure
    assert PROBE.counts["boom"] == 0


def test_the_mismatch_policy_comes_from_the_agent_config():
    store = InMemoryActionStateStore()
    assert DurableCalls.for_plan(store, "a", {}).mismatch_policy == "fail"
    warn = DurableCalls.for_plan(store, "a", {"durable.mismatch_policy": "warn"})
    assert warn.mismatch_policy == "warn"
    with pytest.raises(ValueError, match="mismatch policy 'ignore'"):
        DurableCalls.for_plan(store, "a", {"durable.mismatch_policy": "ignore"})


@pytest.mark.parametrize("record_arguments", [True, False])
def test_a_call_records_its_arguments_unless_switched_off(record_arguments):
    from flink_agents.durable.call import DurableCall
    from flink_agents.durable.identity import CallIdentity

    store = InMemoryActionStateStore()
    runner = DurableCalls(store, agent="a", record_arguments=record_arguments)
    identity = CallIdentity(RunId("a", "k", 0), "e", "act", "#0")
    asyncio.run(runner.run_async(DurableCall(identity, PROBE.call, ("argued", 1))))
    state = store.get(_state_key_of(identity))
    assert state is not None
    [call] = state.calls
    assert call.args_digest  # compared on replay either way
    if record_arguments:
        assert call.arguments is not None and '"argued"' in call.arguments
    else:
        assert call.arguments is None
    # Off, a changed call is still a mismatch (its digest differs), shown without arguments.
    changed = DurableCall(identity, PROBE.call, ("argued", 2))
    with pytest.raises(CallMismatchError) as info:
        asyncio.run(DurableCalls(store, agent="a").run_async(changed))
    assert ("arguments are unknown" in str(info.value)) is not record_arguments


def _state_key_of(identity) -> ActionStateKey:
    run = identity.invocation.run
    return RunKey(agent=run.agent, key=canonical_json(run.key), seq=run.seq).action(
        identity.invocation.action, identity.invocation.event_id
    )


def test_without_a_journal_the_runner_still_records_calls():
    """A call made outside the engine's journal hook opens its invocation on demand."""
    from flink_agents.durable.call import DurableCall
    from flink_agents.durable.identity import CallIdentity

    store = InMemoryActionStateStore()
    runner = DurableCalls(store, agent="a")
    identity = CallIdentity(RunId("a", "k", 0), "e", "act", "#0")
    call = DurableCall(identity, PROBE.call, ("direct", 1))
    assert asyncio.run(runner.run_async(call)) == 2
    assert asyncio.run(DurableCalls(store, agent="a").run_async(call)) == 2
    assert PROBE.counts == {"direct": 1}
    invocation = ActionInvocation(identity.run, "e", "act")
    assert runner.recorded(invocation) is None  # calls recorded, the action not completed


def _counted(name: str) -> str:
    PROBE.counts[name] += 1
    return name.upper()


@action(InputEvent)
async def sync_then_held(event: InputEvent, ctx: RunnerContext) -> None:
    first = ctx.durable_execute(_counted, "sync")
    held = await ctx.durable_execute_async(PROBE.call, "third", 1)
    ctx.send_event(OutputEvent(output=[first, held]))


def test_synchronous_durable_calls_are_recorded_and_replayed():
    result, _ = _crash_at_third_then_replay(agent_plan(sync_then_held))
    assert PROBE.counts == {"third": 1}
    assert result.output_values == [["SYNC", 2]]


# --- one object, its outcomes and the call kind in the record ---------------------------------


class _Outcomes:
    """An event-log listener keeping each call's (outcome, kind)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def on_record(self, record: Any) -> None:
        if isinstance(record, CallFinished):
            self.seen.append((record.outcome, record.call_kind))


def test_an_unknown_call_under_in_doubt_fail_is_told_as_in_doubt():
    from tests.durable.test_reconcile import charge_then_hold

    plan = agent_plan(charge_then_hold, name="charge")
    store = InMemoryActionStateStore()
    PROBE.hold, PROBE.use_reconciler = "charge", False
    state = asyncio.run(h.crash_mid_run(plan, store, "k", {"n": 7, "in_doubt": "fail"}))
    outcomes = _Outcomes()
    log = build_event_log(None, [outcomes])
    result, _ = asyncio.run(resume(plan, store, "k", state, event_log=log))
    assert result.error is None
    # The charge was in flight at the crash: recorded as failed, told as in doubt; then live.
    assert outcomes.seen == [("in-doubt", "function"), ("live", "function")]


def test_each_call_records_its_kind_and_a_record_without_one_still_decodes():
    from tests.sample_agents import react_agent

    turns = [
        {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]},
        {"content": '{"city": "Oslo", "total": 3}'},
    ]
    store = InMemoryActionStateStore()
    [result] = run_local(react_agent(turns), [{"city": "Oslo"}], key="city", store=store)
    assert result.error is None
    run = RunKey(agent="react_test", key=canonical_json("Oslo"), seq=0)
    kinds = [(c.call_id.split(":")[0], c.kind) for s in store.get_run(run) for c in s.calls]
    assert kinds == [("chat", "model"), ("tool", "tool"), ("chat", "model")]
    # A record without a kind is written as earlier versions wrote it, and decodes with None.
    codec = RecordCodec()
    older = ActionState(key=run.action("act", "e"))
    older.record_call(CallResult.pending("chat", started_at=1.0).succeed("hi"))
    envelope = codec.envelope(older)
    assert envelope.count(b'"kind"') == 1  # the envelope's own (action_state), not the call's
    key = older.key.canonical().encode()
    decoded = codec.decode(key, codec.seal(key, envelope), topic="t", partition=0, offset=0)
    assert isinstance(decoded, ActionState) and decoded.calls[0].kind is None


def test_durable_calls_refuse_a_mode_without_what_it_needs():
    store = InMemoryActionStateStore()
    with pytest.raises(ValueError, match="recorded-only durable calls read records"):
        DurableCalls(store, agent="a", mode="recorded-only")
    with pytest.raises(ValueError, match="for recorded-only calls"):
        DurableCalls(store, agent="a", records={})
    with pytest.raises(ValueError, match="need the agent"):
        DurableCalls(store)
    with pytest.raises(ValueError, match="mode 'replay'"):
        DurableCalls(mode="replay")  # type: ignore[arg-type]
