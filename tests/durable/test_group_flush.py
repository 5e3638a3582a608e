"""Group commit: concurrent waiters share flushes; a failed flush is reported to all."""

import asyncio

import pytest

from flink_agents.durable.group_flush import GroupFlusher
from flink_agents.durable.store import StoreWriteError


class CountingStore:
    """Only what GroupFlusher uses: ``aflush``, counted; the first may be made to fail."""

    def __init__(self, fail: bool = False) -> None:
        self.flushes = 0
        self.fail = fail

    async def aflush(self, timeout: float | None = None) -> None:
        self.flushes += 1
        await asyncio.sleep(0)
        if self.fail:
            raise StoreWriteError("broker gone")


def test_concurrent_waiters_share_flushes():
    store = CountingStore()

    async def scenario() -> None:
        flusher = GroupFlusher(store)  # type: ignore[arg-type]
        await asyncio.gather(*(flusher.flush() for _ in range(100)))
        await flusher.flush()

    asyncio.run(scenario())
    assert store.flushes == 3  # one running, one for everyone who came while it ran, then one


def test_a_failed_flush_fails_every_waiter_and_stays_failed():
    store = CountingStore(fail=True)

    async def scenario() -> list:
        flusher = GroupFlusher(store)  # type: ignore[arg-type]
        outcomes = await asyncio.gather(
            *(flusher.flush() for _ in range(10)), return_exceptions=True
        )
        with pytest.raises(StoreWriteError):
            await flusher.flush()
        return outcomes

    outcomes = asyncio.run(scenario())
    assert all(isinstance(o, StoreWriteError) for o in outcomes)
    assert store.flushes == 1
