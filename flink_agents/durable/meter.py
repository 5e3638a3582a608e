"""What durable calls ask of a meter: the seam budgets plug into (docs/budgets.md).

:class:`~flink_agents.durable.calls.DurableCalls` knows whether a call is new or recorded; a
:class:`CallMeter` knows what calls cost and what a key may spend. Before a *new* call is
sent, the calls ask the meter to :meth:`~CallMeter.reserve` it (the meter may refuse it by
raising, which is recorded as the call's failure, or send it elsewhere); a live result is
settled into the spend recorded with it (:attr:`CallResult.spend`); a recorded outcome is
:meth:`~CallMeter.replayed` (its recorded spend counted, never checked: it was paid).
The implementation is the runtime's (``flink_agents.runtime.budget_meter``).
"""

from __future__ import annotations

from typing import Any, Protocol

from flink_agents.api.budgets import CallSpend
from flink_agents.durable.call import DurableCall
from flink_agents.durable.identity import RunId
from flink_agents.durable.store import CallResult


class Reservation(Protocol):
    """A new call's reserved worst case, until it is settled or released."""

    @property
    def call(self) -> DurableCall:
        """The call to send: the one asked for, or its fallback."""

    def settle(self, value: Any) -> CallSpend | None:
        """The call returned ``value``: what it spent (recorded with it), the reservation
        replaced by it."""

    def release(self) -> CallSpend | None:
        """The call failed or was cancelled: the reservation freed; what it spent all the same
        (recorded with its failure: a delegation's calls made before it failed), else None."""


class CallMeter(Protocol):
    """Counts what calls spend per run and key, and checks new calls against budgets."""

    def run_admitted(self, run: RunId, input: Any) -> None:
        """``run`` of ``input`` starts (first time or replay): its own spend starts from
        nothing."""

    def run_finished(self, run: RunId) -> None:
        """``run`` ended with a result (outputs or an error output): its spend is the key's."""

    def reserve(self, call: DurableCall) -> Reservation | None:
        """Reserve a new call's worst case (None: the call is not metered); raises when it
        does not fit a budget that fails."""

    def replayed(self, run: RunId, recorded: CallResult) -> None:
        """A call of ``run`` was handed back from its record (alone, or with its completed
        action): count the spend recorded with it."""
