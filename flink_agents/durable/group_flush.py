"""Group commit for the action-state store: writes numbered, flushed in batches, waited on
only where a result must be durable.

Every write put into the store is announced with :meth:`GroupFlusher.wrote`, which hands back
its ticket (1, 2, 3, ...) and makes sure a flush is running. At most one flush (the store's
``flush`` in a worker thread) runs at a time; the writes put after it took the store's buffer are
taken by the next one, started as soon as it ends. So the store is flushed continuously while
writes come, in batches as large as the writes of one round trip, and no write waits for anyone
to ask.

Waiting is separate: :meth:`GroupFlusher.durable` returns once the write with a given ticket
(and every earlier one) is acknowledged. A flush covers every ticket handed out before its worker
counted them, just before the store takes its buffer (a write is put before it is announced, so
each of those is in the batch or an earlier one), and flushes end in the order they started, so
"acknowledged up to ticket N" is one number.
"""

from __future__ import annotations

import asyncio
import logging

from flink_agents.durable.store import ActionStateStore

logger = logging.getLogger(__name__)


class GroupFlusher:
    """Numbers the writes of one store and flushes them in batches. Use from one event loop.

    A failed flush is sticky: its writes are lost, so every later :meth:`durable` raises the
    same error (the job must restart from its last checkpoint).
    """

    def __init__(self, store: ActionStateStore) -> None:
        self._store = store
        self._written = 0  # tickets handed out
        self._acknowledged = 0  # every write with a ticket up to this one is acknowledged
        self._running: asyncio.Future[int] | None = None
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._failure: BaseException | None = None

    @property
    def written(self) -> int:
        """The ticket of the latest write announced."""
        return self._written

    def acknowledged(self, ticket: int) -> bool:
        """Whether the write with ``ticket`` is known to be acknowledged."""
        return ticket <= self._acknowledged

    def wrote(self) -> int:
        """Announce a write just put into the store; returns its ticket. Starts a flush unless
        one is running (then the next one, started when it ends, takes this write)."""
        self._written += 1
        if self._running is None and self._failure is None:
            self._start()
        return self._written

    async def durable(self, ticket: int) -> None:
        """Return once the write with ``ticket`` and every earlier one are acknowledged."""
        if self._failure is not None:
            raise self._failure
        if self.acknowledged(ticket):
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append((ticket, waiter))
        if self._running is None:
            self._start()
        # Shielded: one waiter being cancelled must not cancel the flush the others share.
        await asyncio.shield(waiter)

    def flushed(self, ticket: int) -> None:
        """The store was flushed synchronously after the write with ``ticket`` was put."""
        self._advance(ticket)

    def _start(self) -> None:
        task = asyncio.get_running_loop().create_task(self._flush())
        self._running = task
        task.add_done_callback(self._finished)

    async def _flush(self) -> int:
        """One flush in a worker thread; returns the last ticket it covers."""
        return await asyncio.to_thread(self._flush_in_worker)

    def _flush_in_worker(self) -> int:
        # Counted here, not when the task first ran: the writes announced during the hand-off
        # to this thread are in the buffer the store takes next, and counted then they would
        # ride in this batch but be released only by the next flush (9 % of the writes at
        # 200 ms, bench/results/analysis.md).
        covers = self._written
        self._store.flush()
        return covers

    def _finished(self, task: asyncio.Future[int]) -> None:
        self._running = None
        if task.cancelled():  # the loop is closing: nothing is known to be acknowledged
            for _, waiter in self._take_waiters():
                waiter.cancel()
            return
        error = task.exception()
        if error is not None:
            if self._failure is None:
                logger.error("action-state store flush failed: %r", error)
                self._failure = error
            for _, waiter in self._take_waiters():
                waiter.set_exception(self._failure)
                waiter.exception()  # retrieved here, so an unawaited waiter is not reported
            return
        covers = task.result()
        self._advance(covers)
        if self._written > covers:
            self._start()

    def _take_waiters(self) -> list[tuple[int, asyncio.Future[None]]]:
        waiting, self._waiters = self._waiters, []
        return [(ticket, waiter) for ticket, waiter in waiting if not waiter.done()]

    def _advance(self, ticket: int) -> None:
        if ticket <= self._acknowledged:
            return
        self._acknowledged = ticket
        still: list[tuple[int, asyncio.Future[None]]] = []
        for wanted, waiter in self._waiters:
            if wanted > ticket:
                still.append((wanted, waiter))
            elif not waiter.done():
                waiter.set_result(None)
        self._waiters = still
