"""A durable call, and what the engine asks of the object that makes them.

``RunnerContext.durable_execute`` / ``durable_execute_async`` build a :class:`DurableCall` and
hand it to the engine's :class:`CallRunner`: :class:`~flink_agents.durable.calls.DurableCalls`,
which looks the call up in the action-state store (if it has one), hands back a recorded
outcome, or calls and records.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from flink_agents.api.context import InDoubtPolicy, Reconciler, ReconcileRequest
from flink_agents.durable.identity import CallIdentity, RunId
from flink_agents.durable.journal import ActionJournal


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
    """What the engine asks of its durable calls; :class:`~flink_agents.durable.calls.
    DurableCalls` is the one implementation.

    ``journal`` is the engine's one hook for replaying completed actions: None means every
    action runs and nothing is recorded.
    """

    # Read-only, so an implementation may narrow it (DurableCalls is its own journal).
    @property
    def journal(self) -> ActionJournal | None:
        """The hook for replaying completed actions, or None."""

    def run_admitted(self, run: RunId, input: Any, admitted_at: float | None = None) -> None:
        """The run's ``input`` is queued to execute (first time or replay), perhaps behind
        others; ``admitted_at`` (epoch ms, now if None) is when it got its ``seq``."""

    def run(self, call: DurableCall) -> Any:
        """Execute a call from a synchronous action."""

    async def run_async(self, call: DurableCall) -> Any:
        """Execute a call from an async action (the function may be sync or async)."""

    def run_finished(self, run: RunId) -> None:
        """The run ended (outputs emitted); its call records may be released."""
