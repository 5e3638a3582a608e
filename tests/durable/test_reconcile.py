"""Reconcilers and the in-doubt policy, through ``DurableCalls`` over the in-memory store and
over Kafka, for durable calls and for delegations (declared in Python and in YAML).

| Contract                                                           | Test                       |
|--------------------------------------------------------------------|----------------------------|
| a reconciler gets a ``ReconcileRequest``: the call's id, its       | test_a_reconciler_gets_*   |
| idempotency key (``ctx.durable_call_key``, a delegation's          |                            |
| ``delegation_key``) and its arguments                              |                            |
| a reconciler's value is validated as the declared result type,     | test_a_reconciled_value_*  |
| recorded, and handed back the same by a later replay (a delegation |                            |
| gets a ``SubagentResult`` of its declared type, never a dict)      |                            |
| a value that does not fit is a ``PayloadError``: the call stays    | test_a_reconciled_value_   |
| ``PENDING``                                                        | that_does_not_fit_*        |
| a reconciler that raises: a failed delegation, byte-identical on   | test_a_failing_reconciler_*|
| a later replay                                                     |                            |
| ``in_doubt="fail"``: a ``PENDING`` record is written before the    | test_in_doubt_fail_*       |
| call is sent; unknown after a failover (no reconciler, or          |                            |
| ``NOT_DONE``) is recorded as failed (``InDoubtCallError``) and not |                            |
| sent again; a sub-agent's ``in_doubt`` (Python or YAML) too        |                            |
| ``in_doubt="resend"`` without a reconciler writes no record ahead  | test_resend_without_a_*    |
| and sends the call again                                           |                            |
| an async reconciler of a call in a synchronous action is awaited   | test_an_async_reconciler_* |
| (never recorded as the call's failure)                             |                            |
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from flink_agents.api import (
    NOT_DONE,
    Agent,
    InDoubtCallError,
    InfrastructureError,
    InputEvent,
    OutputEvent,
    ReconcileRequest,
    RecordedCallError,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents.api.subagents.delegation import (
    BaseSubagentCallable,
    Subagent,
    SubagentRequest,
    SubagentResult,
    SubagentSetup,
)
from flink_agents.durable.identity import canonical_json
from flink_agents.durable.store import (
    ActionStateStore,
    CallResult,
    CallStatus,
    PayloadError,
    RunKey,
)
from flink_agents.plan import compile_agent
from flink_agents.plan.models import AgentPlan
from flink_agents.runtime import ActionError, RunResult, Runtime
from flink_agents.testing import Stores, agent_plan, resume
from tests.durable import helpers as h
from tests.durable.helpers import PROBE
from tests.durable.test_typed_results import RECEIPT, RECEIPT_JSON, Receipt
from tests.subagent_samples import Review

HERE = "tests.durable.test_reconcile"

SEEN: list[Any] = []
"""What the action got back (or the error it caught), in order: live, then on each replay."""

KEYS: list[str] = []
"""The idempotency keys the action's context gave its calls."""


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    PROBE.reset()
    SEEN.clear()
    KEYS.clear()
    ReconciledSubagent.answer = NOT_DONE
    yield
    PROBE.reset()


def _calls(store: ActionStateStore, agent: str) -> list[CallResult]:
    run = RunKey(agent=agent, key=canonical_json("k"), seq=0)
    return [c for state in store.get_run(run) for c in state.calls]


# --- durable calls ---------------------------------------------------------------------------


@action(InputEvent)
async def charge_then_hold(event: InputEvent, ctx: RunnerContext) -> None:
    """A charge (a reconciler and an in-doubt policy as the input says), then a held call."""
    KEYS.append(ctx.durable_call_key("#0"))
    options: dict[str, Any] = {"in_doubt": event.input["in_doubt"]}
    if event.input.get("typed"):
        options["result_type"] = Receipt
    try:
        SEEN.append(
            await ctx.durable_execute_async(
                PROBE.call, "charge", event.input["n"], reconciler=PROBE.reconciler(), **options
            )
        )
    except (InDoubtCallError, RecordedCallError) as exc:
        SEEN.append(exc)
    await ctx.durable_execute_async(PROBE.call, "after", 0)
    ctx.send_event(OutputEvent(output=len(SEEN)))


def _charge_plan() -> AgentPlan:
    return agent_plan(charge_then_hold, name="charge")


def test_a_reconciler_gets_the_calls_identity_and_arguments(stores: Stores) -> None:
    PROBE.reconcile_with = 8
    h.crash_then_replay(_charge_plan(), stores, {"n": 7, "in_doubt": "resend"}, hold="charge")
    [request] = PROBE.reconciled
    assert request == ReconcileRequest(
        call_id="#0", idempotency_key=KEYS[0], args=("charge", 7), kwargs={}
    )
    assert KEYS[0] == KEYS[1]  # the same key on replay
    assert SEEN == [8] and PROBE.counts["charge"] == 0


def test_a_reconciled_value_is_validated_as_the_declared_type_and_recorded(stores: Stores) -> None:
    PROBE.reconcile_with = RECEIPT_JSON  # what a service's status endpoint answers
    value = {"n": 7, "in_doubt": "resend", "typed": True}
    result, _ = h.crash_then_replay(_charge_plan(), stores, value, hold="charge", then=["after"])
    assert result.error is None
    assert PROBE.counts["reconcile:charge"] == 0  # the last replay read the record
    reconciled, replayed = SEEN
    assert reconciled == replayed == RECEIPT
    assert type(reconciled) is type(replayed) is Receipt
    [charge, _] = _calls(stores.latest, "charge")
    assert charge.status is CallStatus.SUCCEEDED


def test_a_reconciled_value_that_does_not_fit_is_no_outcome(stores: Stores) -> None:
    PROBE.reconcile_with = {"id": "not a receipt"}
    value = {"n": 7, "in_doubt": "resend", "typed": True}
    with pytest.raises(ActionError) as caught:
        h.crash_then_replay(_charge_plan(), stores, value, hold="charge")
    assert isinstance(caught.value.__cause__, PayloadError)
    assert SEEN == []
    [charge] = _calls(stores.latest, "charge")
    assert charge.status is CallStatus.PENDING  # asked again by the next replay


@pytest.mark.parametrize("reconciled", [False, True], ids=["no-reconciler", "not-done"])
def test_in_doubt_fail_records_the_unknown_call_as_failed(stores: Stores, reconciled: bool) -> None:
    PROBE.use_reconciler = reconciled
    value = {"n": 7, "in_doubt": "fail"}
    result, _ = h.crash_then_replay(_charge_plan(), stores, value, hold="charge", then=["after"])
    assert result.error is None
    [pending] = [c for c in _calls(stores.first, "charge") if c.call_id == "#0"]
    assert pending.status is CallStatus.PENDING  # written before the call was sent
    assert PROBE.counts["charge"] == 0  # never sent again
    in_doubt, replayed = SEEN
    assert isinstance(in_doubt, InDoubtCallError)
    assert isinstance(replayed, RecordedCallError)
    assert replayed.error_type.endswith("InDoubtCallError")
    assert replayed.message == str(in_doubt)
    assert _calls(stores.latest, "charge")[0].status is CallStatus.FAILED


def test_resend_without_a_reconciler_writes_no_record_ahead_and_sends_again(
    stores: Stores,
) -> None:
    PROBE.use_reconciler = False
    h.crash_then_replay(_charge_plan(), stores, {"n": 7, "in_doubt": "resend"}, hold="charge")
    assert [c.call_id for c in _calls(stores.first, "charge")] == []  # no round trip ahead
    assert PROBE.counts["charge"] == 1 and SEEN == [8]


@action(InputEvent)
def sync_charge(event: InputEvent, ctx: RunnerContext) -> None:
    """A synchronous action whose call has an async reconciler."""
    value = ctx.durable_execute(_charge_once, event.input, reconciler=_async_status)
    ctx.send_event(OutputEvent(output=value))


def _charge_once(n: int) -> int:
    """Lost the first time (the machinery failed in flight: the call stays PENDING)."""
    PROBE.counts["charge"] += 1
    if PROBE.counts["charge"] == 1:
        raise InfrastructureError("the connection dropped mid-call")
    return n + 1


async def _async_status(request: ReconcileRequest) -> Any:
    PROBE.reconciled.append(request)
    await asyncio.sleep(0)
    return 41


def test_an_async_reconciler_in_a_sync_action_is_awaited(stores: Stores) -> None:
    plan = agent_plan(sync_charge, name="sync-charge")

    async def scenario() -> RunResult:
        engine = Runtime.build(plan, store=stores.first).engine
        engine.submit("k", 7)
        with pytest.raises(ActionError):
            await engine.drain()
        state = engine.snapshot_key("k")
        await engine.close()
        result, _ = await resume(plan, stores.restored(), "k", state)
        return result

    result = asyncio.run(scenario())
    assert result.error is None and result.output_values == [41]
    assert PROBE.counts["charge"] == 1 and len(PROBE.reconciled) == 1
    [charge] = _calls(stores.latest, "sync-charge")
    assert charge.status is CallStatus.SUCCEEDED


# --- delegations -----------------------------------------------------------------------------


class ReconciledSubagent(SubagentSetup):
    """Answers through the probe (which can hold it); reconciles with :attr:`answer`."""

    answer: ClassVar[Any] = NOT_DONE
    reconcile: bool = True

    async def invoke(self, request: SubagentRequest, ctx: RunnerContext) -> Any:
        return await PROBE.call("delegate", request.input)

    def make_callable(self, request: SubagentRequest, ctx: RunnerContext) -> BaseSubagentCallable:
        reconciler = self.status if self.reconcile else None
        return BaseSubagentCallable(
            self, request, ctx, reconciler=reconciler, in_doubt=self.in_doubt
        )

    @staticmethod
    def status(request: ReconcileRequest) -> Any:
        PROBE.reconciled.append(request)
        if isinstance(ReconciledSubagent.answer, Exception):
            raise ReconciledSubagent.answer
        return ReconciledSubagent.answer


@action(InputEvent)
async def delegate_then_hold(event: InputEvent, ctx: RunnerContext) -> None:
    SEEN.append(await Subagent(ctx, "rec").call(event.input))
    await ctx.durable_execute_async(PROBE.call, "after", 0)
    ctx.send_event(OutputEvent(output=len(SEEN)))


def _delegating_plan(**arguments: Any) -> AgentPlan:
    agent = Agent(name="delegating").add_action(delegate_then_hold)
    descriptor = ResourceDescriptor.of(f"{HERE}:ReconciledSubagent", **arguments)
    return compile_agent(agent.add_resource("rec", ResourceType.AGENT, descriptor))


def _delegating_yaml(tmp_path: Path, arguments: str) -> AgentPlan:
    return h.yaml_plan(
        tmp_path,
        "delegating",
        f"{HERE}:delegate_then_hold",
        "rec",
        f"{HERE}:ReconciledSubagent",
        arguments,
    )


def test_a_delegations_reconciler_gets_its_request(stores: Stores) -> None:
    ReconciledSubagent.answer = {"success": True, "result": {"verdict": "ok", "score": 1}}
    h.crash_then_replay(_delegating_plan(), stores, "task", hold="delegate")
    [request] = PROBE.reconciled
    [delegation] = request.args
    assert isinstance(delegation, SubagentRequest) and delegation.input == "task"
    assert request.idempotency_key == delegation.delegation_key
    assert request.call_id == delegation.durable_call_id


@pytest.mark.parametrize("form", ["python", "yaml"])
def test_a_reconciled_delegation_is_a_result_of_its_declared_type(
    stores: Stores, tmp_path: Path, form: str
) -> None:
    ReconciledSubagent.answer = {"success": True, "result": {"verdict": "ok", "score": 1}}
    review = "tests.subagent_samples:Review"
    plan = (
        _delegating_plan(result_type=review)
        if form == "python"
        else _delegating_yaml(tmp_path, f'{{result_type: "{review}"}}')
    )
    result, _ = h.crash_then_replay(plan, stores, "task", hold="delegate", then=["after"])
    assert result.error is None
    reconciled, replayed = SEEN
    assert isinstance(reconciled, SubagentResult) and isinstance(replayed, SubagentResult)
    assert reconciled == replayed
    assert reconciled.result == Review(verdict="ok", score=1)
    assert type(reconciled.result) is type(replayed.result) is Review
    assert PROBE.counts["delegate"] == 0  # reconciled, not sent again


def test_a_failing_reconciler_is_a_failed_delegation_byte_identical_on_replay(
    stores: Stores,
) -> None:
    ReconciledSubagent.answer = ValueError("status endpoint says: declined")
    result, _ = h.crash_then_replay(
        _delegating_plan(), stores, "task", hold="delegate", then=["after"]
    )
    assert result.error is None
    reconciled, replayed = SEEN
    assert reconciled.success is False
    assert reconciled.reason == "ValueError: status endpoint says: declined"
    assert replayed.error_message == reconciled.error_message


@pytest.mark.parametrize("form", ["python", "yaml"])
def test_in_doubt_fail_of_a_sub_agent_is_a_failed_delegation_not_sent_again(
    stores: Stores, tmp_path: Path, form: str
) -> None:
    plan = (
        _delegating_plan(reconcile=False, in_doubt="fail")
        if form == "python"
        else _delegating_yaml(tmp_path, "{reconcile: false, in_doubt: fail}")
    )
    result, _ = h.crash_then_replay(plan, stores, "task", hold="delegate", then=["after"])
    assert result.error is None
    assert PROBE.counts["delegate"] == 0
    in_doubt, replayed = SEEN
    assert in_doubt.success is False and in_doubt.reason.startswith("call ")
    assert "its in-doubt policy is 'fail'" in in_doubt.reason
    assert replayed.error_message == in_doubt.error_message
