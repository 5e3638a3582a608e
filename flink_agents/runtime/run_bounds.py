"""Bounds on one run: how many actions it may invoke, how many events its actions may send and,
if set, how long it may take.

An agent whose actions keep sending events to each other (an action that answers its own event
with two more) would otherwise run without end, growing its event queue and its store records
until the process dies. The bounds are read from the agent's config (``max_actions_per_run``,
``max_events_per_run``; plans, YAML agents and job specs all carry it) and enforced by the
engine per run, an internal sub-agent's actions counted with its parent run's. A run past one
ends with :class:`RunBoundError` as its action's failure, under the agent's ``error_policy``
(an error output under ``emit``). Completed actions handed back on a replay count as they did
live, so a replay ends where the live run did.

``max_run_seconds`` (none by default) bounds a run's wall time from when it starts executing:
the action awaited at the deadline is cancelled, with the calls it awaits, and the run ends
with :class:`RunBoundError`; no action starts after it. A synchronous action is not
interrupted (it holds the event loop), only stopped from being followed. A replay after a
restore starts a new clock: wall time is the one bound a replay need not end at.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

_T = TypeVar("_T")

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
    max_seconds: float | None = None
    deadline: float | None = None
    """When the run must end, in the event loop's clock: set by its first action."""

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> RunBudget:
        """The bounds an agent's config sets, the defaults for those it does not."""
        seconds = config.get("max_run_seconds")
        return cls(
            max_actions=int(config.get("max_actions_per_run", DEFAULT_MAX_ACTIONS_PER_RUN)),
            max_events=int(config.get("max_events_per_run", DEFAULT_MAX_EVENTS_PER_RUN)),
            max_seconds=None if seconds is None else float(seconds),
        )

    def spend_action(self) -> None:
        """Count one action invocation; :class:`RunBoundError` past a bound. The first one
        starts the run's clock."""
        if self.max_seconds is not None:
            now = asyncio.get_running_loop().time()
            if self.deadline is None:
                self.deadline = now + self.max_seconds
            elif now >= self.deadline:
                raise self._out_of_time()
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

    async def within(self, action: Awaitable[_T]) -> _T:
        """Await ``action`` (an action's coroutine) until the run's deadline, if it has one:
        cancelled then, :class:`RunBoundError`."""
        if self.deadline is None:
            return await action
        loop = asyncio.get_running_loop()
        try:  # wait_for, not asyncio.timeout_at: Python 3.10 is supported
            return await asyncio.wait_for(action, max(0.0, self.deadline - loop.time()))
        except asyncio.TimeoutError:
            if loop.time() >= self.deadline:  # the run's deadline, not the action's own
                raise self._out_of_time() from None
            raise

    def _out_of_time(self) -> RunBoundError:
        return RunBoundError(
            f"the run took longer than {self.max_seconds} seconds (max_run_seconds); the "
            "action running then was cancelled, with its calls"
        )
