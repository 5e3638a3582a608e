"""Group commit for the action-state store: many waiters, one flush at a time.

Every finished durable call must be acknowledged before its result is handed back, but a flush
per call would serialize all keys behind the store's round trip. A :class:`GroupFlusher` runs
at most one ``store.aflush()`` at a time; callers arriving while one runs share the next one
(the running flush may have taken its batch before their write), so N concurrent callers cost
about two round trips, not N.
"""

from __future__ import annotations

import asyncio
import logging

from flink_agents.durable.store import ActionStateStore

logger = logging.getLogger(__name__)


class GroupFlusher:
    """Batches ``aflush`` calls of one store. Use from one event loop.

    A failed flush is sticky: its writes are lost, so every later :meth:`flush` raises the same
    error (the job must restart from its last checkpoint).
    """

    def __init__(self, store: ActionStateStore) -> None:
        self._store = store
        self._running: asyncio.Future[None] | None = None
        self._next: asyncio.Future[None] | None = None
        self._failure: BaseException | None = None

    async def flush(self) -> None:
        """Return once every write put before this call is acknowledged."""
        if self._failure is not None:
            raise self._failure
        if self._running is None:
            waiter = self._start()
        else:
            if self._next is None:
                self._next = asyncio.get_running_loop().create_future()
            waiter = self._next
        # Shielded: one waiter being cancelled must not cancel the flush the others share.
        await asyncio.shield(waiter)

    def flush_soon(self) -> None:
        """Have buffered writes flushed without waiting (a failure surfaces on the next flush)."""
        if self._running is None and self._failure is None:
            self._start()

    def _start(self) -> asyncio.Future[None]:
        task = asyncio.get_running_loop().create_task(self._store.aflush())
        self._running = task
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Future[None]) -> None:
        self._running = None
        error = None if task.cancelled() else task.exception()
        if error is not None and self._failure is None:
            logger.error("action-state store flush failed: %r", error)
            self._failure = error
        waiting, self._next = self._next, None
        if waiting is None:
            return
        if self._failure is not None:
            waiting.set_exception(self._failure)
            waiting.exception()  # retrieved here, so an unawaited waiter is not reported
            return
        self._start().add_done_callback(lambda done: _copy_outcome(done, waiting))


def _copy_outcome(source: asyncio.Future[None], target: asyncio.Future[None]) -> None:
    if target.done():
        return
    if source.cancelled():
        target.cancel()
        return
    error = source.exception()
    if error is None:
        target.set_result(None)
    else:
        target.set_exception(error)
        target.exception()
