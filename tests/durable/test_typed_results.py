"""Typed results: any type pydantic validates round-trips, live and replayed, with the same type,
through ``DurableCalls`` over the in-memory store and over Kafka.

| Contract                                                           | Test                       |
|--------------------------------------------------------------------|----------------------------|
| a sub-agent's declared result type (a dataclass, a model with      | test_a_declared_sub_agent_ |
| datetime, Enum, UUID and Decimal fields) is the result, live and   | result_*                   |
| replayed; Python and YAML declarations alike                       |                            |
| a durable call's ``result_type`` is what the action gets, live and | test_a_durable_call_gets_* |
| replayed: the value is dumped as JSON and validated back           |                            |
| a value that does not fit the declared type is a ``PayloadError``  | test_a_value_that_does_*   |
| (an infrastructure error), not a recorded outcome                  |                            |
"""

from __future__ import annotations

import datetime
import enum
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel

from flink_agents.api import (
    Agent,
    InputEvent,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents.api.subagents.delegation import (
    Subagent,
    SubagentRequest,
    SubagentSetup,
)
from flink_agents.durable.identity import canonical_json
from flink_agents.durable.store import CallStatus, PayloadError, RunKey
from flink_agents.plan import compile_agent
from flink_agents.plan.models import AgentPlan
from flink_agents.runtime import ActionError
from flink_agents.testing import Stores, agent_plan, run_live
from tests.durable import helpers as h
from tests.durable.helpers import PROBE

HERE = "tests.durable.test_typed_results"


class Verdict(enum.Enum):
    APPROVE = "approve"
    REJECT = "reject"


class Receipt(BaseModel):
    id: uuid.UUID
    at: datetime.datetime
    verdict: Verdict
    amount: Decimal


@dataclass
class Stamp:
    at: datetime.date
    verdict: Verdict


RECEIPT = Receipt(
    id=uuid.UUID("12345678-1234-5678-1234-567812345678"),
    at=datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
    verdict=Verdict.APPROVE,
    amount=Decimal("12.30"),
)
STAMP = Stamp(at=datetime.date(2026, 1, 2), verdict=Verdict.REJECT)
RECEIPT_JSON = {
    "id": str(RECEIPT.id),
    "at": "2026-01-02T03:04:05Z",
    "verdict": "approve",
    "amount": "12.30",
}

SEEN: list[Any] = []
"""What the action got back, in order (live, then on replay)."""


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    PROBE.reset()
    TypedSubagent.calls = 0
    SEEN.clear()
    yield
    PROBE.reset()


class TypedSubagent(SubagentSetup):
    """Answers with Python objects (not JSON): the receipt, the stamp, or a receipt's JSON."""

    calls: ClassVar[int] = 0

    async def invoke(self, request: SubagentRequest, ctx: RunnerContext) -> Any:
        TypedSubagent.calls += 1
        return {"receipt": RECEIPT, "stamp": STAMP, "json": RECEIPT_JSON}[request.input]


@action(InputEvent)
async def delegate_then_hold(event: InputEvent, ctx: RunnerContext) -> None:
    """Delegates its input to ``typed``, then makes a held call."""
    SEEN.append(await Subagent(ctx, "typed").call(event.input))
    await ctx.durable_execute_async(PROBE.call, "after", 0)
    ctx.send_event(OutputEvent(output=len(SEEN)))


def _python_plan(result_type: str) -> AgentPlan:
    agent = Agent(name="typed", error_policy="fail").add_action(delegate_then_hold)
    descriptor = ResourceDescriptor.of(f"{HERE}:TypedSubagent", result_type=result_type)
    agent.add_resource("typed", ResourceType.AGENT, descriptor)
    return compile_agent(agent)


@pytest.mark.parametrize("form", ["python", "yaml"])
@pytest.mark.parametrize(
    ("answer", "result_type", "expected"),
    [
        ("receipt", "Receipt", RECEIPT),
        ("json", "Receipt", RECEIPT),
        ("stamp", "Stamp", STAMP),
    ],
)
def test_a_declared_sub_agent_result_keeps_its_type_live_and_replayed(
    stores: Stores, tmp_path: Path, form: str, answer: str, result_type: str, expected: Any
) -> None:
    declared = f"{HERE}:{result_type}"
    if form == "python":
        plan = _python_plan(declared)
    else:
        arguments = f'{{result_type: "{declared}"}}'
        plan = h.yaml_plan(
            tmp_path,
            "typed",
            f"{HERE}:delegate_then_hold",
            "typed",
            f"{HERE}:TypedSubagent",
            arguments,
        )
    result, _ = h.crash_then_replay(plan, stores, answer, hold="after", then=["after"])
    assert result.error is None
    assert TypedSubagent.calls == 1  # the live call; both replays handed it back
    live, replayed, replayed_again = SEEN
    assert live.success, live.error_message
    assert live.result == replayed.result == replayed_again.result == expected
    assert type(live.result) is type(replayed.result) is type(expected)
    assert replayed == live == replayed_again


# --- plain durable calls --------------------------------------------------------------------


async def fetch(kind: str) -> Any:
    """What a service client returns: JSON data, or objects."""
    PROBE.counts["fetch"] += 1
    return {"json": RECEIPT_JSON, "stamp": STAMP, "when": RECEIPT.at, "bad": {"id": "x"}}[kind]


DECLARED: dict[str, Any] = {
    "json": Receipt,
    "stamp": Stamp,
    "when": datetime.datetime,
    "bad": Receipt,
}


@action(InputEvent)
async def fetch_then_hold(event: InputEvent, ctx: RunnerContext) -> None:
    kind = event.input
    SEEN.append(await ctx.durable_execute_async(fetch, kind, result_type=DECLARED[kind]))
    await ctx.durable_execute_async(PROBE.call, "after", 0)
    ctx.send_event(OutputEvent(output=len(SEEN)))


@pytest.mark.parametrize(
    ("kind", "expected"),
    [("json", RECEIPT), ("stamp", STAMP), ("when", RECEIPT.at)],
)
def test_a_durable_call_gets_its_declared_type_live_and_replayed(
    stores: Stores, kind: str, expected: Any
) -> None:
    plan = agent_plan(fetch_then_hold, name="typed")
    result, _ = h.crash_then_replay(plan, stores, kind, hold="after")
    assert result.error is None
    assert PROBE.counts["fetch"] == 0  # the replay handed the recorded value back
    live, replayed = SEEN
    assert live == replayed == expected
    assert type(live) is type(replayed) is type(expected)


def test_a_value_that_does_not_fit_the_declared_type_is_no_recorded_outcome(
    stores: Stores,
) -> None:
    with pytest.raises(ActionError) as caught:
        run_live(agent_plan(fetch_then_hold, name="typed"), stores.first, "bad")
    assert isinstance(caught.value.__cause__, PayloadError)
    assert SEEN == []
    run = RunKey(agent="typed", key=canonical_json("k"), seq=0)
    statuses = {c.status for s in stores.first.get_run(run) for c in s.calls}
    assert statuses <= {CallStatus.PENDING}  # not recorded as the call's outcome
