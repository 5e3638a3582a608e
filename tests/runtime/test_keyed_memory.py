"""The keyed-state backend of long-term memory: a run's writes staged over the committed sets,
exhaustive cosine search, and commits that never change the memory a run started from."""

from __future__ import annotations

import pytest

from flink_agents.api.long_term_memory import MemoryWrite, StoredMemory
from flink_agents.runtime import KeyState
from flink_agents.runtime.keyed import SavedKey, _read_saved, _saved_text
from flink_agents.runtime.keyed_memory import CommittedMemory, KeyedStateMemory


def item(text: str, vector: list[float], **metadata: str | int) -> StoredMemory:
    return StoredMemory(text=text, metadata=dict(metadata), embedding=vector)


def committed() -> CommittedMemory:
    return CommittedMemory.from_state(
        {
            "facts": {
                "a": item("east", [1.0, 0.0], topic="x"),
                "b": item("north", [0.0, 1.0], topic="y"),
                "c": item("north-east", [1.0, 1.0], topic="x"),
            }
        }
    )


def test_search_ranks_by_cosine_and_filters_on_metadata() -> None:
    memory = KeyedStateMemory(committed())
    hits = memory.search("facts", [2.0, 0.1], k=2, where=None)
    assert [hit.id for hit in hits] == ["a", "c"]
    assert hits[0].score == pytest.approx(0.99875, abs=1e-4)
    assert [hit.id for hit in memory.search("facts", [0.0, 1.0], 5, {"topic": "x"})] == ["c", "a"]
    assert memory.search("other", [1.0, 0.0], 3, None) == []


def test_equal_scores_come_out_by_id() -> None:
    memory = KeyedStateMemory(
        CommittedMemory.from_state({"s": {i: item(i, [1.0, 0.0]) for i in ("z", "m", "b")}})
    )
    memory.apply(MemoryWrite(set="s", id="a", item=item("a", [3.0, 0.0])))
    assert [hit.id for hit in memory.search("s", [1.0, 0.0], 4, None)] == ["a", "b", "m", "z"]


def test_staged_writes_are_seen_by_the_run_and_committed_only_on_commit() -> None:
    start = committed()
    memory = KeyedStateMemory(start)
    memory.apply(MemoryWrite(set="facts", id="a", item=item("west", [-1.0, 0.0])))
    memory.apply(MemoryWrite(set="facts", id="b"))
    memory.apply(MemoryWrite(set="notes", id="n", item=item("note", [0.0, 1.0])))
    assert memory.get("facts", "a") == item("west", [-1.0, 0.0])
    assert memory.get("facts", "b") is None
    assert (memory.count("facts"), memory.count("notes")) == (2, 1)
    assert [hit.id for hit in memory.search("facts", [-1.0, 0.0], 1, None)] == ["a"]
    # The committed memory the run started from is untouched.
    assert start.to_state()["facts"]["a"].text == "east"
    assert "b" in start.to_state()["facts"]
    after = memory.commit().to_state()
    assert {name: sorted(items) for name, items in after.items()} == {
        "facts": ["a", "c"],
        "notes": ["n"],
    }
    assert after["facts"]["a"].text == "west"


def test_a_run_without_writes_commits_the_same_memory() -> None:
    start = committed()
    assert KeyedStateMemory(start).commit() is start


def test_delete_key_drops_every_set_and_later_writes_start_from_nothing() -> None:
    memory = KeyedStateMemory(committed())
    memory.apply(MemoryWrite())
    assert (memory.count("facts"), memory.get("facts", "a")) == (0, None)
    assert memory.search("facts", [1.0, 0.0], 3, None) == []
    memory.apply(MemoryWrite(set="facts", id="new", item=item("again", [1.0, 0.0])))
    assert list(memory.commit().to_state()["facts"]) == ["new"]


def test_a_set_emptied_by_deletes_leaves_the_state() -> None:
    memory = KeyedStateMemory(committed())
    for item_id in ("a", "b", "c"):
        memory.apply(MemoryWrite(set="facts", id=item_id))
    assert memory.commit().to_state() == {}


def test_a_zero_query_or_item_vector_scores_zero() -> None:
    memory = KeyedStateMemory(CommittedMemory.from_state({"s": {"z": item("z", [0.0, 0.0])}}))
    assert [hit.score for hit in memory.search("s", [1.0, 0.0], 1, None)] == [0.0]
    assert [hit.score for hit in memory.search("s", [0.0, 0.0], 1, None)] == [0.0]


def test_a_set_committed_over_a_searched_one_searches_like_one_built_afresh() -> None:
    start = committed()
    run = KeyedStateMemory(start)
    run.search("facts", [1.0, 0.0], 1, None)  # the set's matrix is built
    run.apply(MemoryWrite(set="facts", id="a"))
    run.apply(MemoryWrite(set="facts", id="c", item=item("south-east", [1.0, -1.0])))
    run.apply(MemoryWrite(set="facts", id="d", item=item("west", [-1.0, 0.0])))
    derived = KeyedStateMemory(run.commit())
    afresh = KeyedStateMemory(CommittedMemory.from_state(run.commit().to_state()))
    for query in ([1.0, 0.0], [0.0, 1.0], [-1.0, 0.2], [1.0, -1.0]):
        assert derived.search("facts", query, 3, None) == afresh.search("facts", query, 3, None)


def test_two_sets_committed_over_one_base_do_not_see_each_others_rows() -> None:
    start = committed()
    KeyedStateMemory(start).search("facts", [1.0, 0.0], 1, None)
    first, second = KeyedStateMemory(start), KeyedStateMemory(start)
    first.apply(MemoryWrite(set="facts", id="x", item=item("south", [0.0, -1.0])))
    second.apply(MemoryWrite(set="facts", id="y", item=item("south too", [0.1, -1.0])))
    one, two = KeyedStateMemory(first.commit()), KeyedStateMemory(second.commit())
    assert one.search("facts", [0.0, -1.0], 5, None)[0].id == "x"
    assert two.search("facts", [0.0, -1.0], 5, None)[0].id == "y"
    assert {hit.id for hit in one.search("facts", [0.0, -1.0], 5, None)} == {"a", "b", "c", "x"}
    assert {hit.id for hit in two.search("facts", [0.0, -1.0], 5, None)} == {"a", "b", "c", "y"}
    base = KeyedStateMemory(start)
    assert {hit.id for hit in base.search("facts", [0.0, -1.0], 5, None)} == {"a", "b", "c"}


def test_a_key_state_saves_its_memory_sets_and_reads_them_back() -> None:
    saved = SavedKey(runs=KeyState(next_seq=2, long_term_memory=committed().to_state()))
    restored = _read_saved(_saved_text(saved))
    assert restored == saved
    assert "long_term_memory" not in _saved_text(SavedKey(runs=KeyState(next_seq=2)))
    # Vectors are packed in the saved text (base64 float64s), not written out number by number.
    assert '"embedding":"AAAAAAAA8D8AAAAAAAAAAA=="' in _saved_text(saved)
