"""MemoryWatch: the memory writes an action made, told by a diff of before and after."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flink_agents.api.long_term_memory import MemoryWrite, StoredMemory
from flink_agents.api.memory import Memory
from flink_agents.api.waits import ScheduledInput
from flink_agents.durable.journal import MemoryUpdate, MemoryWatch, RecordedAction
from flink_agents.runtime.keyed_memory import KeyedStateMemory


class CountingMemory(Memory):
    """A memory that counts its snapshots (each one a deep copy of the content)."""

    def __init__(self, content: dict[str, Any] | None = None, **clock: Any) -> None:
        super().__init__(content, **clock)
        self.snapshots = 0

    def snapshot(self) -> dict[str, Any]:
        self.snapshots += 1
        return super().snapshot()


@dataclass
class Run:
    short_term_memory: CountingMemory = field(default_factory=CountingMemory)
    sensory_memory: CountingMemory = field(default_factory=CountingMemory)
    long_term_memory: KeyedStateMemory = field(default_factory=KeyedStateMemory)
    scheduled: list[ScheduledInput] = field(default_factory=list)


def test_writes_deletes_and_in_place_mutations_are_updates():
    run = Run(short_term_memory=CountingMemory({"kept": 1, "gone": 2, "listed": [1]}))
    watch = MemoryWatch(run)
    run.short_term_memory.set("new", {"a": 1})
    run.short_term_memory.delete("gone")
    run.short_term_memory.get("listed").append(2)  # mutated in place, not set again
    run.sensory_memory.set("seen", True)
    assert watch.updates() == [
        MemoryUpdate(scope="short_term", key="gone", delete=True),
        MemoryUpdate(scope="short_term", key="listed", value=[1, 2]),
        MemoryUpdate(scope="short_term", key="new", value={"a": 1}),
        MemoryUpdate(scope="sensory", key="seen", value=True),
    ]


def test_an_empty_memory_is_not_copied():
    run = Run()
    watch = MemoryWatch(run)
    assert watch.updates() == []
    assert (run.short_term_memory.snapshots, run.sensory_memory.snapshots) == (0, 0)


def test_a_memory_that_is_empty_before_the_action_still_shows_its_writes():
    run = Run()
    watch = MemoryWatch(run)
    run.sensory_memory.set("k", [1])
    assert watch.updates() == [MemoryUpdate(scope="sensory", key="k", value=[1])]
    assert run.sensory_memory.snapshots == 1  # after the action only: it was empty before


def test_long_term_writes_are_the_actions_own_in_order_and_reapply():
    run = Run()
    run.long_term_memory.apply(MemoryWrite(set="facts", id="earlier", item=_item("old")))
    watch = MemoryWatch(run)
    written = MemoryWrite(set="facts", id="a", item=_item("new"))
    run.long_term_memory.apply(written)
    run.long_term_memory.apply(MemoryWrite(set="facts", id="earlier"))
    updates = watch.updates()
    assert updates == [
        MemoryUpdate(scope="long_term", key="facts", value=written),
        MemoryUpdate(scope="long_term", key="facts", value=MemoryWrite(set="facts", id="earlier")),
    ]
    replayed = Run()
    RecordedAction(memory_updates=updates).reapply(replayed)
    assert replayed.long_term_memory.writes == run.long_term_memory.writes[1:]


def test_follow_ups_scheduled_by_the_action_are_its_writes_and_reapply():
    run = Run(scheduled=[ScheduledInput(schedule_id="earlier", at_ms=1)])
    watch = MemoryWatch(run)
    mine = ScheduledInput(schedule_id="mine", at_ms=2, input={"n": 1})
    run.scheduled.append(mine)
    updates = watch.updates()
    assert updates == [MemoryUpdate(scope="scheduled", key="mine", value=mine)]
    replayed = Run()
    RecordedAction(memory_updates=updates).reapply(replayed)
    assert replayed.scheduled == [mine]


def _item(text: str) -> StoredMemory:
    return StoredMemory(text=text, embedding=[1.0, 0.0])


def test_a_renewed_expiry_is_an_update_and_is_reapplied_as_it_was():
    run = Run(short_term_memory=CountingMemory({"a": 1, "b": 2}, expiry={"a": 5.0}, now_ms=0.0))
    watch = MemoryWatch(run)
    run.short_term_memory.set("a", 1, ttl=1)  # same value, another expiry
    run.short_term_memory.set("b", 2)  # same value, still no expiry: no update
    updates = watch.updates()
    assert updates == [MemoryUpdate(scope="short_term", key="a", value=1, expires_at=1000.0)]
    replayed = Run(short_term_memory=CountingMemory({"a": 1}, expiry={"a": 5.0}, now_ms=0.0))
    RecordedAction([], updates).reapply(replayed)
    assert replayed.short_term_memory.expiry() == {"a": 1000.0}


def test_a_journaled_entry_name_with_a_dot_is_reapplied_as_one_entry():
    run = Run()
    RecordedAction(
        [],
        [
            MemoryUpdate(scope="short_term", key="a.b", value=1),
            MemoryUpdate(scope="short_term", key="gone.x", delete=True),
        ],
    ).reapply(run)
    assert run.short_term_memory.snapshot() == {"a.b": 1}
