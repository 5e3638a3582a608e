"""The durable calls a run has in flight, ended with the run (structured concurrency).

An action may make calls concurrently (``asyncio.gather`` of delegations, the built-in
tool-call action's tools): each then runs in a task of its own. When one of them fails the run
(an infrastructure error, say), ``gather`` hands that error up at once and leaves the others
running; so does a run cancelled by the engine. A :class:`CallScope` keeps the tasks with a
call of its run in flight; the engine ends it (:meth:`CallScope.end`) before the run's result
leaves: every such task is cancelled and awaited, and a call started afterwards is refused.

A call cancelled in flight records no outcome: its record stays as it was (``PENDING`` if one
was written ahead, for a reconciler or ``in_doubt="fail"``, else none), so a replay of the run
sends it again or applies its in-doubt policy (docs/durable-execution.md).
"""

from __future__ import annotations

import asyncio

from flink_agents.api.context import InfrastructureError


class RunEndedError(InfrastructureError):
    """A durable call was started after its run had ended (e.g. from a context kept past its
    action): refused, so nothing is sent or written for a run whose result has left."""


class CallScope:
    """The tasks with a durable call of one run in flight (see the module docstring)."""

    __slots__ = ("_ended", "_tasks")

    def __init__(self) -> None:
        # A task may hold nested calls (a delegation's calls inside the delegation): counted.
        self._tasks: dict[asyncio.Task[object], int] = {}
        self._ended = False

    def check_open(self, what: str) -> None:
        """Raise :class:`RunEndedError` if the run has ended."""
        if self._ended:
            raise RunEndedError(f"{what}: the run has ended; its calls are closed")

    def enter(self) -> asyncio.Task[object] | None:
        """A call starts in the current task; returns the task for :meth:`leave`."""
        task = asyncio.current_task()
        if task is not None:
            self._tasks[task] = self._tasks.get(task, 0) + 1
        return task

    def leave(self, task: asyncio.Task[object] | None) -> None:
        """The call that :meth:`enter` returned ``task`` for has ended."""
        if task is None:
            return
        left = self._tasks.get(task, 0) - 1
        if left > 0:
            self._tasks[task] = left
        else:
            self._tasks.pop(task, None)

    async def end(self) -> None:
        """End the run's calls: no new call starts; every task with a call in flight, other
        than the current one (the run's own), is cancelled and awaited, even if the current
        task is cancelled meanwhile (then that cancellation is raised afterwards)."""
        self._ended = True
        current = asyncio.current_task()
        pending = {task for task in self._tasks if task is not current and not task.done()}
        for task in pending:
            task.cancel()
        cancelled = False
        while pending:
            try:
                await asyncio.wait(pending)
            except asyncio.CancelledError:
                cancelled = True
            pending = {task for task in pending if not task.done()}
        self._tasks.clear()
        if cancelled:
            raise asyncio.CancelledError
