"""Group commit: writes are flushed in shared batches without anyone asking; a waiter returns
once its write is acknowledged; a failed flush is reported to all and stays failed."""

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from flink_agents.durable.group_flush import GroupFlusher
from flink_agents.durable.store import StoreWriteError


class CountingStore:
    """Only what GroupFlusher uses: ``flush`` (in its worker thread), counted; each may be made
    to fail or to wait until ``gate`` is set (``taken`` is set once one has taken its batch)."""

    def __init__(self, fail: bool = False) -> None:
        self.flushes = 0
        self.fail = fail
        self.gate: threading.Event | None = None
        self.taken = threading.Event()

    def flush(self, timeout: float | None = None) -> None:
        self.flushes += 1
        self.taken.set()
        if self.gate is not None:
            self.gate.wait(5)
        if self.fail:
            raise StoreWriteError("broker gone")


def test_concurrent_waiters_share_flushes():
    store = CountingStore()

    async def scenario() -> None:
        flusher = GroupFlusher(store)  # type: ignore[arg-type]
        tickets = [flusher.wrote() for _ in range(100)]
        await asyncio.gather(*(flusher.durable(ticket) for ticket in tickets))
        await flusher.durable(flusher.wrote())

    asyncio.run(scenario())
    assert store.flushes == 2  # one for the hundred writes, one for the write after them


def test_writes_during_a_flush_are_taken_by_the_next_one_unasked():
    store = CountingStore()

    async def scenario() -> list[bool]:
        store.gate = threading.Event()
        flusher = GroupFlusher(store)  # type: ignore[arg-type]
        first = flusher.wrote()
        await asyncio.to_thread(store.taken.wait, 5)  # the first flush has taken its batch
        second = flusher.wrote()
        store.gate.set()
        await flusher.durable(first)
        seen = [flusher.acknowledged(first), flusher.acknowledged(second)]
        await asyncio.sleep(0.01)  # nobody waits for the second write: it is flushed anyway
        return [*seen, flusher.acknowledged(second)]

    assert asyncio.run(scenario()) == [True, False, True]
    assert store.flushes == 2


def test_a_flush_covers_the_writes_announced_until_its_worker_takes_the_buffer():
    store = CountingStore()
    hold = threading.Event()

    async def scenario() -> bool:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(max_workers=1))
        busy = loop.run_in_executor(None, hold.wait, 5)  # the flush's worker cannot start yet
        flusher = GroupFlusher(store)  # type: ignore[arg-type]
        first = flusher.wrote()
        await asyncio.sleep(0)  # the flush has started and handed its work to the executor
        second = flusher.wrote()  # announced before the worker takes the buffer: in the batch
        hold.set()
        await busy
        await flusher.durable(first)
        return flusher.acknowledged(second)

    assert asyncio.run(scenario()) is True
    assert store.flushes == 1


def test_a_waiter_does_not_return_before_its_write_is_acknowledged():
    store = CountingStore()

    async def scenario() -> bool:
        store.gate = threading.Event()
        flusher = GroupFlusher(store)  # type: ignore[arg-type]
        waiter = asyncio.ensure_future(flusher.durable(flusher.wrote()))
        await asyncio.sleep(0.01)
        early = waiter.done()
        store.gate.set()
        await waiter
        return early

    assert asyncio.run(scenario()) is False


def test_a_failed_flush_fails_every_waiter_and_stays_failed():
    store = CountingStore(fail=True)

    async def scenario() -> list:
        flusher = GroupFlusher(store)  # type: ignore[arg-type]
        tickets = [flusher.wrote() for _ in range(10)]
        outcomes = await asyncio.gather(
            *(flusher.durable(ticket) for ticket in tickets), return_exceptions=True
        )
        with pytest.raises(StoreWriteError):
            await flusher.durable(flusher.wrote())
        return outcomes

    outcomes = asyncio.run(scenario())
    assert all(isinstance(o, StoreWriteError) for o in outcomes)
    assert store.flushes == 1
