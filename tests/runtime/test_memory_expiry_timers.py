"""Expired short-term memory of a key with no more runs is dropped from its state on a timer of
the key (docs/memory.md, "Expiry"), through the keyed logic: the visit that commits a run with
expiring entries asks for a timer at the earliest expiry; when it fires and no run of the key is
pending, the expired entries leave the key's state, and a timer is asked for the next one."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from flink_agents.durable.store import InMemoryLog
from flink_agents.plan import compile_agent
from flink_agents.runtime.keyed import SavedKey, Visit
from tests.runtime.test_keyed import Attempt, KeySlot, now_ms
from tests.sample_agents import remembering_agent

PLAN = compile_agent(remembering_agent())


class Expiring(Attempt):
    """An attempt that notes the expiry timers its visits ask for."""

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, checkpoint: dict | None = None, number: int = 0
    ) -> None:
        super().__init__(monkeypatch, InMemoryLog(), checkpoint or {}, number, plan=PLAN)
        self.expiry_timers: list[int] = []

    def fire(self, key: Any, at: int) -> list[dict]:
        flink_key = json.dumps(key)
        return self._took(
            self.logic.on_timer(flink_key, KeySlot(self.table, flink_key), at, now_ms)
        )

    def _took(self, visit: Visit) -> list[dict]:
        if visit.expiry_at is not None:
            self.expiry_timers.append(visit.expiry_at)
        return super()._took(visit)

    def memory(self, key: Any) -> tuple[dict[str, Any], dict[str, float]]:
        runs = SavedKey.model_validate_json(self.table[json.dumps(key)]).runs
        return runs.short_term_memory, runs.short_term_expiry


def test_expired_entries_of_an_idle_key_are_dropped_when_its_expiry_timer_fires(monkeypatch):
    with Expiring(monkeypatch) as attempt:
        attempt.send("k", {"set": {"brief": 1}, "ttl": 60})
        attempt.answers("k")
        attempt.send("k", {"set": {"longer": 2}, "ttl": 600})
        attempt.answers("k")
        kept, expiry = attempt.memory("k")
        first, later = sorted(expiry.values())
        assert set(attempt.expiry_timers) == {
            math.ceil(first)
        }  # the earliest, asked again: one timer

        assert attempt.fire("k", math.ceil(first) - 1) == []  # nothing expired yet
        assert attempt.memory("k") == (kept, expiry)
        attempt.fire("k", math.ceil(first))
        assert attempt.memory("k") == ({"longer": 2}, {"longer": later})
        assert attempt.expiry_timers[-1] == math.ceil(later)  # the next one's timer
        attempt.fire("k", math.ceil(later))
        assert attempt.memory("k") == ({}, {})


def test_an_entry_without_a_ttl_asks_for_no_timer_and_stays(monkeypatch):
    with Expiring(monkeypatch) as attempt:
        attempt.send("k", {"set": {"forever": 1}})
        attempt.answers("k")
        assert attempt.expiry_timers == []
        attempt.fire("k", now_ms() + 10**9)
        assert attempt.memory("k") == ({"forever": 1}, {})


def test_an_expiry_timer_restored_with_the_key_drops_its_entries_after_a_restart(monkeypatch):
    with Expiring(monkeypatch) as first:
        first.send("k", {"set": {"brief": 1}, "ttl": 60})
        first.answers("k")
        [at] = first.expiry_timers
        checkpoint = dict(first.table)

    with Expiring(monkeypatch, checkpoint, 1) as second:  # Flink restores the timer
        assert second.fire("k", at) == []
        assert second.memory("k") == ({}, {})


def test_a_pending_run_keeps_the_keys_memory_until_it_commits(monkeypatch):
    with Expiring(monkeypatch) as attempt:
        attempt.send("k", {"set": {"brief": 1}, "ttl": 60})
        attempt.answers("k")
        [at] = attempt.expiry_timers
        attempt.send("k", {"read": ["brief"]})  # pending while the timer fires
        [read] = attempt.fire("k", at) or attempt.answers("k")
        assert read["output"] == {"brief": 1}  # admitted before the expiry: its run sees it
        assert attempt.memory("k")[0] == {"brief": 1}  # the run committed it unexpired
