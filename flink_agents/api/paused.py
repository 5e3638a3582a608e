"""How a wait stops a run: :class:`WaitCall`, the function of a wait's durable call, raises
:class:`RunPaused` until the host hands the run the wait's decision (docs/waits.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flink_agents.api.context import InfrastructureError
from flink_agents.api.waits import Decision, WaitRequest


class RunPaused(InfrastructureError):
    """Not a failure: the run stops at a wait that has no decision yet.

    Raised by the wait call and carried out of the action (never recorded as the call's
    outcome, never captured into a tool result) to the engine, which ends the run's step as
    paused.
    """

    def __init__(self, request: WaitRequest) -> None:
        self.request = request
        super().__init__(f"the run waits for {request.kind} {request.wait_id}")


class WaitCall:
    """The function of a wait's durable call: the decision the host handed the run for this
    wait, else :class:`RunPaused`. The arguments of its call are the request, so a replay that
    waits for something else is a mismatch."""

    def __init__(self, request: WaitRequest, decisions: Mapping[str, Decision]) -> None:
        self.request = request
        self._decisions = decisions

    def __call__(self, request: dict[str, Any]) -> Decision:
        decision = self._decisions.get(self.request.wait_id)
        if decision is None or _made_on_another_request(decision, self.request):
            # Made on a request this plan no longer makes: not taken; the key's wait book
            # refuses it when the run registers the wait again (fail closed).
            raise RunPaused(self.request)
        return decision


class WaitNeedsStoreError(InfrastructureError):
    """A wait in a runtime without an action-state store: resuming would run every call before
    the wait again, so it is refused."""

    def __init__(self) -> None:
        super().__init__(
            "durable waits need an action-state store (settings.store; kind: memory for a "
            "local run): without one, resuming would make every call before the wait again"
        )


def _made_on_another_request(decision: Decision, request: WaitRequest) -> bool:
    made_on = decision.fingerprint
    return made_on is not None and made_on != request.fingerprint
