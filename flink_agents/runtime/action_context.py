"""The engine's :class:`RunnerContext`: one per action invocation.

It is also the engine's side of delegation (:class:`~flink_agents.api.subagents.delegation.
Delegating`), a seam built-in sub-agents reach and user actions do not see."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from flink_agents.api.budgets import BudgetApprovalNeeded
from flink_agents.api.context import (
    IN_DOUBT_POLICIES,
    InDoubtPolicy,
    Reconciler,
    RunnerContext,
)
from flink_agents.api.events import Event
from flink_agents.api.long_term_memory import LongTermMemory
from flink_agents.api.memory import Memory
from flink_agents.api.resources import Resource, ResourceType
from flink_agents.api.waits import Decision, OnTimeout, ScheduledInput, WaitKind, WaitTimedOutError
from flink_agents.durable.call import CallRunner, DurableCall
from flink_agents.durable.identity import (
    AUTO_CALL_PREFIX,
    CallIdentity,
    RunId,
    event_id,
)
from flink_agents.plan.models import ActionPlan
from flink_agents.runtime import delegated_calls
from flink_agents.runtime.budget_meter import deciding
from flink_agents.runtime.call_scope import CallScope
from flink_agents.runtime.memory_backends import RunLongTermMemory
from flink_agents.runtime.resource_registry import ResourceRegistry
from flink_agents.runtime.run_bounds import RunBudget
from flink_agents.runtime.wait_calls import event_data, schedule_call, wait_call

if TYPE_CHECKING:
    import asyncio

    from flink_agents.api.subagents import SubagentResult, SubagentSetup

T = TypeVar("T")

ChildRunner = Callable[[str, Any, str], Awaitable[list[Any]]]
"""Runs an internal sub-agent: ``(scope, input, delegation_key) -> outputs``."""


class DuplicateCallIdError(ValueError):
    """Two durable calls of one action invocation asked for the same call id."""


@dataclass
class RunState:
    """What lives for one run: its id, sensory memory and a working copy of the key's memory."""

    run_id: RunId
    short_term_memory: Memory
    sensory_memory: Memory = field(default_factory=lambda: Memory(scope="sensory"))
    calls: CallScope = field(default_factory=CallScope)
    """The run's calls in flight, ended with the run (an internal sub-agent's scope shares
    its parent run's)."""
    budget: RunBudget = field(default_factory=RunBudget)
    """The actions and events the run may still spend (shared like ``calls``)."""
    decisions: Mapping[str, Decision] = field(default_factory=dict)
    """The decisions the host handed the run for its waits, by wait id (shared like
    ``calls``)."""
    long_term_memory: RunLongTermMemory = field(default_factory=RunLongTermMemory)
    """The key's long-term memory with the run's writes staged (shared like ``calls``)."""
    scheduled: list[ScheduledInput] = field(default_factory=list)
    """The follow-ups the run's actions scheduled, in order: the key's to keep once the run
    succeeds (shared like ``calls``)."""


class ActionContext(RunnerContext):
    """Context for one invocation of ``action`` on ``event`` within ``run``."""

    def __init__(
        self,
        run: RunState,
        action: ActionPlan,
        event: Event,
        agent_config: Mapping[str, Any],
        resources: ResourceRegistry,
        call_runner: CallRunner,
        child_runner: ChildRunner | None = None,
    ) -> None:
        self._run = run
        self._action = action
        self._event = event
        self._agent_config = agent_config
        self._resources = resources
        self._call_runner = call_runner
        self._call_ids: set[str] = set()
        self._child_runner = child_runner
        self._delegation_ids: delegated_calls.DelegationIds | None = None
        self._long_term_memory: LongTermMemory | None = None
        self.sent_events: list[Event] = []

    @property
    def key(self) -> Any:
        return self._run.run_id.key

    def send_event(self, event: Event) -> None:
        if not isinstance(event, Event):
            raise TypeError(f"send_event takes an Event, got {type(event).__name__}")
        ordinal = len(self.sent_events)
        self.sent_events.append(
            event.model_copy(
                update={
                    "id": event_id(self._run.run_id, self._event.id, self._action.name, ordinal),
                    "upstream_id": self._event.id,
                    "upstream_action": self._action.name,
                }
            )
        )

    def get_resource(self, name: str, resource_type: ResourceType) -> Resource:
        return self._resources.get(name, ResourceType(resource_type))

    @property
    def sensory_memory(self) -> Memory:
        return self._run.sensory_memory

    @property
    def short_term_memory(self) -> Memory:
        return self._run.short_term_memory

    @property
    def long_term_memory(self) -> LongTermMemory:
        if self._long_term_memory is None:  # one per invocation: it numbers the writes
            self._long_term_memory = LongTermMemory(self, self._run.long_term_memory)
        return self._long_term_memory

    @property
    def config(self) -> Mapping[str, Any]:
        return self._agent_config

    @property
    def action_config(self) -> Mapping[str, Any]:
        return self._action.config

    def durable_call_key(self, call_id: str) -> str:
        return CallIdentity(self._run.run_id, self._event.id, self._action.name, call_id).digest()

    def delegate(
        self, name: str, setup: SubagentSetup, input: Any, session_id: str | None
    ) -> asyncio.Future[SubagentResult[Any]]:
        if self._delegation_ids is None:  # made on first use: most actions never delegate
            self._delegation_ids = delegated_calls.DelegationIds(
                self._run.run_id, self._event.id, self._action.name
            )
        return delegated_calls.submit(self, self._delegation_ids, name, setup, input, session_id)

    async def run_child_scope(self, scope: str, input: Any, *, delegation_key: str) -> list[Any]:
        if self._child_runner is None:
            raise RuntimeError("this context cannot run internal sub-agents")
        return await self._child_runner(scope, input, delegation_key)

    def _durable_call(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        call_id: str | None,
        reconciler: Reconciler | None,
        result_type: type | None,
        in_doubt: InDoubtPolicy,
    ) -> DurableCall:
        if in_doubt not in IN_DOUBT_POLICIES:
            raise ValueError(f"in_doubt {in_doubt!r}: expected one of {IN_DOUBT_POLICIES}")
        identity = self._call_identity(call_id)
        return DurableCall(identity, fn, args, kwargs, reconciler, result_type, in_doubt)

    def _call_identity(self, call_id: str | None) -> CallIdentity:
        """The identity of this invocation's next durable call (``call_id``: its own name)."""
        if call_id is None:
            call_id = f"{AUTO_CALL_PREFIX}{len(self._call_ids)}"
        elif call_id.startswith(AUTO_CALL_PREFIX):
            raise ValueError(
                f"call id {call_id!r}: ids starting with {AUTO_CALL_PREFIX!r} are reserved"
            )
        if call_id in self._call_ids:
            raise DuplicateCallIdError(
                f"action {self._action.name!r} made two durable calls with call id {call_id!r} "
                f"while handling event {self._event.id}"
            )
        self._call_ids.add(call_id)
        return CallIdentity(self._run.run_id, self._event.id, self._action.name, call_id)

    def durable_execute(
        self,
        fn: Callable[..., T],
        *args: Any,
        call_id: str | None = None,
        reconciler: Reconciler | None = None,
        result_type: type | None = None,
        in_doubt: InDoubtPolicy = "resend",
        **kwargs: Any,
    ) -> T:
        if inspect.iscoroutinefunction(fn):
            raise TypeError(f"{fn!r} is async; use durable_execute_async")
        self._run.calls.check_open(f"durable call of action {self._action.name!r}")
        call = self._durable_call(fn, args, kwargs, call_id, reconciler, result_type, in_doubt)
        return self._call_runner.run(call)

    async def durable_execute_async(
        self,
        fn: Callable[..., Awaitable[T]],
        *args: Any,
        call_id: str | None = None,
        reconciler: Reconciler | None = None,
        result_type: type | None = None,
        in_doubt: InDoubtPolicy = "resend",
        **kwargs: Any,
    ) -> T:
        calls = self._run.calls
        calls.check_open(f"durable call of action {self._action.name!r}")
        call = self._durable_call(fn, args, kwargs, call_id, reconciler, result_type, in_doubt)
        task = calls.enter()
        try:
            try:
                return await self._call_runner.run_async(call)
            except BudgetApprovalNeeded as needed:
                decision = await self._budget_approval(call, needed)
            with deciding(call, decision):  # approved: it goes; else it is refused, recorded
                return await self._call_runner.run_async(call)
        finally:
            calls.leave(task)

    async def _budget_approval(self, call: DurableCall, needed: BudgetApprovalNeeded) -> Decision:
        """The decision on ``call``, which does not fit a budget of ``on_exhausted: approve``:
        a durable wait for approval named after the call (the run pauses until a decision or
        the budget's timeout; a replay hands the recorded decision back)."""
        budget = needed.budget
        wait_id, decision = await self._wait(
            f"budget-approval:{call.identity.call_id}",
            "approval",
            needed.request,
            None,
            None,
            budget.approval_timeout_s,
        )
        if decision.verdict == "timed_out" and budget.on_approval_timeout == "raise":
            raise WaitTimedOutError(wait_id)
        return decision

    async def wait_for_approval(
        self,
        request: Any,
        *,
        timeout_s: float | None = None,
        on_timeout: OnTimeout = "reject",
        call_id: str | None = None,
        deciders: Sequence[str] | None = None,
        contract: Any = None,
    ) -> Decision:
        if on_timeout not in ("reject", "raise"):
            raise ValueError(f"on_timeout {on_timeout!r}: expected 'reject' or 'raise'")
        if contract is None:  # what a person approves is what this action then does
            contract = {"action": self._action.function, "config": self._action.config}
        wait_id, decision = await self._wait(
            call_id, "approval", request, None, None, timeout_s, deciders, contract
        )
        if decision.verdict == "timed_out" and on_timeout == "raise":
            raise WaitTimedOutError(wait_id)
        return decision

    async def wait_for_event(
        self,
        event_type: str | type[T],
        *,
        match: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
        call_id: str | None = None,
    ) -> Any:
        name = event_type if isinstance(event_type, str) else event_type.__name__
        wait_id, decision = await self._wait(call_id, "event", None, name, match, timeout_s)
        if decision.verdict == "timed_out":
            raise WaitTimedOutError(wait_id)
        return event_data(event_type, decision)

    async def sleep(self, duration_s: float, *, call_id: str | None = None) -> None:
        if not duration_s > 0:
            raise ValueError(f"duration_s {duration_s!r}: a sleep must be positive")
        await self._wait(call_id, "timer", None, None, None, duration_s)

    async def schedule(
        self,
        input: Any,
        *,
        delay_s: float | None = None,
        at_ms: int | None = None,
        call_id: str | None = None,
    ) -> ScheduledInput:
        calls = self._run.calls
        calls.check_open(f"schedule of action {self._action.name!r}")
        call = schedule_call(self._call_identity(call_id), input, delay_s, at_ms)
        task = calls.enter()
        try:
            scheduled: ScheduledInput = await self._call_runner.run_async(call)
        finally:
            calls.leave(task)
        self._run.scheduled.append(scheduled)
        return scheduled

    async def _wait(
        self,
        call_id: str | None,
        kind: WaitKind,
        request: Any,
        event_type: str | None,
        match: Mapping[str, Any] | None,
        timeout_s: float | None,
        deciders: Sequence[str] | None = None,
        contract: Any = None,
    ) -> tuple[str, Decision]:
        """A wait, as a durable call of kind ``wait`` (runtime/wait_calls.py): its id, and the
        decision."""
        calls = self._run.calls
        calls.check_open(f"wait of action {self._action.name!r}")
        identity = self._call_identity(call_id)
        call = wait_call(
            identity,
            kind,
            request,
            event_type,
            match,
            timeout_s,
            self._run.decisions,
            deciders,
            contract,
        )
        task = calls.enter()
        try:
            decision: Decision = await self._call_runner.run_async(call)
        finally:
            calls.leave(task)
        return identity.digest(), decision
