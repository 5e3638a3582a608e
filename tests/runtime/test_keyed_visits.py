"""When the per-key logic comes back to a key: its timers, on a fake clock.

The test decides when each run ends (its action waits for a release), moves the clock there, and
fires the timers the logic asked for in order, the way Flink would: one timer per key and
timestamp. What is pinned: a key with inputs queued behind its running one is visited about once
per run, a run slower than every estimate is still emitted, a restored key is visited and keeps
one chain of timers, and the end-of-input timer is asked for once per key.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from flink_agents.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents.plan.compile import compile_agent
from flink_agents.runtime import OperatorOptions, RuntimeSettings, keyed
from flink_agents.runtime.host import EngineHost
from flink_agents.runtime.keyed import KeyedAgentLogic, Visit

RELEASES: dict[int, threading.Event] = {}
"""Per input number ``n``: set when its run may end."""


class ReleasedAgent(Agent):
    """Each run ends when the test releases its input's number."""

    @action(InputEvent)
    async def wait_for_release(event: InputEvent, ctx: RunnerContext) -> None:
        await asyncio.to_thread(RELEASES[event.input["n"]].wait, 30)
        ctx.send_event(OutputEvent(output=event.input["n"]))


PLAN = compile_agent(ReleasedAgent())
KEY = json.dumps("a")


class KeySlot:
    """The key's saved state in a dict (the logic's ``SavedState``)."""

    def __init__(self, table: dict[str, str]) -> None:
        self.table = table

    def value(self) -> str | None:
        return self.table.get(KEY)

    def update(self, value: str) -> None:
        self.table[KEY] = value


def wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "the engine did not get there"
        time.sleep(0.001)


class Clocked:
    """One attempt of the logic for key ``a`` on a fake clock (ms), firing its timers in order."""

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, checkpoint: dict[str, str], **options: Any
    ) -> None:
        self.now = 0
        self.hosts: list[EngineHost] = []

        def host_on_fake_clock(*args: Any, **kwargs: Any) -> EngineHost:
            host = EngineHost(*args, clock=lambda: self.now / 1000, **kwargs)
            self.hosts.append(host)
            return host

        monkeypatch.setattr(keyed, "EngineHost", host_on_fake_clock)
        self.table = dict(checkpoint)
        self.timers: list[int] = []  # a heap, one entry per timestamp
        self.visits = 0
        self.emitting_visits = 0
        self.outputs: list[int] = []
        self.end_timer_asked = 0
        self.clock_reads = 0
        self.logic = KeyedAgentLogic(PLAN, RuntimeSettings(operator=OperatorOptions(**options)))
        self.logic.open(attempt=1 if checkpoint else 0, subtask=0)

    def close(self) -> None:
        self.logic.close()

    @property
    def host(self) -> EngineHost:
        [host] = self.hosts
        return host

    def send(self, n: int) -> Visit:
        RELEASES[n] = threading.Event()
        visit = self.logic.on_input(KEY, json.dumps({"n": n}), KeySlot(self.table), self.clock)
        self._took(visit)
        return visit

    def finish(self, n: int, at: int) -> None:
        """Fire the timers due before ``at``, then end input ``n``'s run at ``at``."""
        self.run_until(at)
        unfinished = self.host.unfinished
        RELEASES[n].set()
        wait_for(lambda: self.host.unfinished < unfinished)

    def run_until(self, at: int) -> None:
        while self.timers and self.timers[0] <= at:
            self.fire(heapq.heappop(self.timers))
        self.now = max(self.now, at)

    def fire(self, timestamp: int) -> Visit:
        self.now = max(self.now, timestamp)
        self.visits += 1
        visit = self.logic.on_timer(KEY, KeySlot(self.table), timestamp, self.clock)
        self.emitting_visits += bool(visit.outputs)
        self._took(visit)
        return visit

    def clock(self) -> int:
        self.clock_reads += 1
        return self.now

    def _took(self, visit: Visit) -> None:
        if visit.poll_at is not None and visit.poll_at not in self.timers:
            heapq.heappush(self.timers, visit.poll_at)
        self.end_timer_asked += visit.until_end_of_input
        self.outputs += [json.loads(record)["output"] for record in visit.outputs]


@pytest.fixture
def clocked(monkeypatch: pytest.MonkeyPatch):
    attempts: list[Clocked] = []

    def start(checkpoint: dict[str, str] | None = None, **options: Any) -> Clocked:
        attempts.append(Clocked(monkeypatch, checkpoint or {}, **options))
        return attempts[-1]

    yield start
    for attempt in attempts:
        for release in RELEASES.values():
            release.set()
        attempt.close()


def test_a_key_with_inputs_queued_behind_its_run_is_visited_about_once_per_run(clocked):
    key = clocked()
    for n in range(8):
        key.send(n)
    key.finish(0, at=100)  # the first run teaches the duration
    key.run_until(100)
    warm_up = key.visits

    for n in range(1, 8):  # each run starts when the one before ends and takes 100 ms
        key.finish(n, at=100 * (n + 1))
    key.run_until(10_000)

    assert key.outputs == list(range(8))
    assert key.visits - warm_up <= 7 + 1
    assert key.timers == []  # nothing left to visit: no timer chain goes on


def test_a_run_slower_than_every_estimate_is_still_emitted(clocked):
    key = clocked(max_poll_ms=100)
    for n in range(4):
        key.send(n)
    for n in range(3):
        key.finish(n, at=100 * (n + 1))
    key.finish(3, at=300 + 5_000)  # fifty times the usual run
    key.run_until(300 + 5_000 + 100)  # the next poll, at most max_poll_ms later, emits it

    assert key.outputs == [0, 1, 2, 3]


def test_inputs_to_a_key_with_a_timer_armed_register_none(clocked):
    key = clocked()
    key.send(0)
    key.finish(0, at=100)
    key.run_until(1_000)
    assert key.outputs == [0] and key.timers == []

    key.send(1)  # the key is idle: the input asks for a visit at its expected end
    assert len(key.timers) == 1
    reads = key.clock_reads
    for n in range(2, 6):
        key.now += 10
        key.send(n)  # queued behind input 1: the visit already armed comes first
    assert len(key.timers) == 1
    assert key.clock_reads == reads  # nor is the host's clock asked (a call into the JVM)


def test_the_end_of_input_timer_is_asked_for_with_a_keys_first_input_only(clocked):
    first = clocked()
    for n in range(3):
        first.send(n)
    assert first.end_timer_asked == 1
    checkpoint = dict(first.table)  # the end-of-input timer is checkpointed with this state
    first.close()

    second = clocked(checkpoint)
    second.send(3)
    assert second.end_timer_asked == 0

    # A bounded input's end still waits for all of the key's runs, restored ones included.
    for n in range(4):
        RELEASES[n].set()
    visit = second.logic.on_timer(KEY, KeySlot(second.table), 0, second.clock, end_of_input=True)
    assert [json.loads(record)["output"] for record in visit.outputs] == [0, 1, 2, 3]


def test_a_restored_key_is_visited_until_its_runs_are_emitted_with_one_chain_of_timers(clocked):
    first = clocked()
    for n in range(3):
        first.send(n)
    checkpoint = dict(first.table)  # taken with the three inputs in flight
    first.close()

    second = clocked(checkpoint)
    second.now = 50
    second.fire(50)  # a timer restored with the checkpoint: the key's runs start again
    assert len(second.timers) == 1  # it came back with a timer of its own
    second.fire(60)  # another restored timer (the old code armed several): no second chain
    assert len(second.timers) == 1

    for n in range(3):
        second.finish(n, at=100 * (n + 1))
    second.run_until(10_000)
    assert second.outputs == [0, 1, 2]
    assert second.timers == []


def test_visits_are_counted_and_those_that_emit_nothing_too(clocked):
    key = clocked()
    key.send(0)
    key.send(1)
    key.run_until(35)  # before the first run ends: the duration is not known yet, so polls
    key.finish(0, at=100)
    key.finish(1, at=200)
    key.run_until(10_000)

    counts = key.logic.visits
    assert counts.visits == key.visits
    assert counts.idle == key.visits - key.emitting_visits
    assert counts.idle >= 2  # the polls at 20 and 30 ms
