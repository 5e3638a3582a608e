"""The one hook through which every durable call passes.

``RunnerContext.durable_execute`` / ``durable_execute_async`` build a :class:`DurableCall` and
hand it to the engine's :class:`CallRunner`. :class:`DirectCallRunner` simply calls the function;
the durable-execution work replaces it with a runner that looks the call up in the action-state
store, returns a recorded outcome, or calls and records.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from flink_agents.api.context import InDoubtPolicy, Reconciler, ReconcileRequest
from flink_agents.durable.freeze_fence import FreezeFence
from flink_agents.durable.identity import CallIdentity, RunId
from flink_agents.durable.journal import ActionJournal
from flink_agents.observability import EventLog, observed_direct, observed_direct_async


@dataclass(frozen=True)
class DurableCall:
    """A call to make (or to find the recorded outcome of)."""

    identity: CallIdentity
    function: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    reconciler: Reconciler | None = None
    result_type: type | None = None
    in_doubt: InDoubtPolicy = "resend"

    def invoke(self) -> Any:
        return self.function(*self.args, **self.kwargs)

    def reconcile_request(self) -> ReconcileRequest:
        """What the reconciler is asked about: this call's identity and arguments."""
        return ReconcileRequest(
            call_id=self.identity.call_id,
            idempotency_key=self.identity.digest(),
            args=self.args,
            kwargs=self.kwargs,
        )


class CallRunner(Protocol):
    """Executes durable calls for the engine.

    ``journal`` is the engine's one hook for replaying completed actions: None (the default)
    means every action runs and nothing is recorded.
    """

    event_log: EventLog | None
    """Where the outcome of every call is recorded (the engine sets it), or None."""

    # Read-only, so a runner may narrow it: StoreCallRunner is its own journal.
    @property
    def journal(self) -> ActionJournal | None:
        """The hook for replaying completed actions, or None."""

    def run_admitted(self, run: RunId, input: Any) -> None:
        """The run's ``input`` is queued to execute (first time or replay), perhaps behind
        others."""

    def run(self, call: DurableCall) -> Any:
        """Execute a call from a synchronous action."""

    async def run_async(self, call: DurableCall) -> Any:
        """Execute a call from an async action (the function may be sync or async)."""

    def run_finished(self, run: RunId) -> None:
        """The run ended (outputs emitted); its call records may be released."""


class DirectCallRunner:
    """Calls the function and records nothing.

    A keyed host sets ``fence``: a process frozen past the cluster's heartbeat timeout then
    sends no more calls (its task runs again elsewhere), store or not.
    """

    journal: ActionJournal | None = None
    event_log: EventLog | None = None
    fence: FreezeFence | None = None

    def run_admitted(self, run: RunId, input: Any) -> None:
        return None

    @observed_direct
    def run(self, call: DurableCall) -> Any:
        if self.fence is not None:
            self.fence.check()
        return call.invoke()

    @observed_direct_async
    async def run_async(self, call: DurableCall) -> Any:
        if self.fence is not None:
            self.fence.check()
        result = call.invoke()
        if inspect.isawaitable(result):
            result = await result
        return result

    def run_finished(self, run: RunId) -> None:
        return None
