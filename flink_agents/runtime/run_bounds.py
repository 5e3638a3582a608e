"""Bounds on one run: how many actions it may invoke and how many events its actions may send.

An agent whose actions keep sending events to each other (an action that answers its own event
with two more) would otherwise run without end, growing its event queue and its store records
until the process dies. The bounds are read from the agent's config (``max_actions_per_run``,
``max_events_per_run``; plans, YAML agents and job specs all carry it) and enforced by the
engine per run, an internal sub-agent's actions counted with its parent run's. A run past one
ends with :class:`RunBoundError` as its action's failure, under the agent's ``error_policy``
(an error output under ``emit``). Completed actions handed back on a replay count as they did
live, so a replay ends where the live run did.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_MAX_ACTIONS_PER_RUN = 10_000
DEFAULT_MAX_EVENTS_PER_RUN = 10_000


class RunBoundError(RuntimeError):
    """A run went past one of its bounds (``max_actions_per_run``, ``max_events_per_run``)."""


@dataclass
class RunBudget:
    """What one run may still spend; shared by the scopes of the run."""

    max_actions: int = DEFAULT_MAX_ACTIONS_PER_RUN
    max_events: int = DEFAULT_MAX_EVENTS_PER_RUN
    actions: int = 0
    events: int = 0

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> RunBudget:
        """The bounds an agent's config sets, the defaults for those it does not."""
        return cls(
            max_actions=int(config.get("max_actions_per_run", DEFAULT_MAX_ACTIONS_PER_RUN)),
            max_events=int(config.get("max_events_per_run", DEFAULT_MAX_EVENTS_PER_RUN)),
        )

    def spend_action(self) -> None:
        """Count one action invocation; :class:`RunBoundError` past the bound."""
        self.actions += 1
        if self.actions > self.max_actions:
            raise RunBoundError(
                f"the run invoked more than {self.max_actions} actions (max_actions_per_run); "
                "do its actions keep sending each other events?"
            )

    def spend_events(self, sent: int) -> None:
        """Count ``sent`` events sent by an action; :class:`RunBoundError` past the bound."""
        self.events += sent
        if self.events > self.max_events:
            raise RunBoundError(
                f"the run's actions sent more than {self.max_events} events "
                "(max_events_per_run); do its actions keep sending each other events?"
            )
