"""Memory: nested paths, references, and entries that expire on the run's clock."""

from datetime import timedelta

import pytest

from flink_agents.api import DanglingMemoryRefError, Event, Memory, MemoryPathError, MemoryRef
from flink_agents.api.memory import SHORT_TERM_MEMORY_TTL_KEY, memory_ttl_seconds

NOW = 1_000_000.0


def test_a_dotted_path_reaches_into_dicts_and_lists():
    memory = Memory()
    memory.set("order.id", "o-1")
    memory.set("order.items", [{"sku": "a", "qty": 1}])
    memory.set("order.items.0.qty", 3)
    memory.set("order.items.1", {"sku": "b", "qty": 1})  # at the list's length: appended
    assert memory.get("order") == {
        "id": "o-1",
        "items": [{"sku": "a", "qty": 3}, {"sku": "b", "qty": 1}],
    }
    assert memory.get("order.items.1.sku") == "b"
    assert memory.get(("order", "items", 0, "qty")) == 3
    assert "order.items.1" in memory
    assert "order.items.2" not in memory
    assert memory.get("order.items.5.qty", "none") == "none"
    assert list(memory) == ["order"]  # one entry


def test_delete_removes_what_the_path_names_and_ignores_what_is_not_there():
    memory = Memory({"order": {"items": ["a", "b", "c"], "note": "x"}})
    memory.delete("order.items.1")
    memory.delete("order.note")
    memory.delete("order.missing")
    memory.delete("nothing.at.all")
    assert memory.get("order") == {"items": ["a", "c"]}
    memory.delete("order")
    assert len(memory) == 0


def test_a_sequence_path_reaches_a_key_that_holds_a_dot():
    memory = Memory()
    memory.set(("hosts", "db.internal"), {"up": True})
    assert memory.get(("hosts", "db.internal", "up")) is True
    assert memory.get("hosts") == {"db.internal": {"up": True}}
    assert memory.get("hosts.db.internal") is None  # the dotted form means three segments


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("name.first", r"'name' holds a str, not a dict or a list, so it has no 'first'"),
        ("count.0", r"'count' holds an int"),
        ("nothing.x", r"'nothing' holds null"),
        ("items.first", r"'items' holds a list, indexed by numbers from 0, not by 'first'"),
    ],
)
def test_a_path_through_a_value_that_is_not_a_container_is_refused_naming_it(path, message):
    memory = Memory({"name": "Ada", "count": 3, "nothing": None, "items": [1]})
    for use in (memory.get, memory.delete, lambda p: memory.set(p, 1)):
        with pytest.raises(MemoryPathError, match=message):
            use(path)


def test_a_write_past_a_lists_end_and_bad_paths_are_refused():
    memory = Memory({"items": [1, 2]})
    with pytest.raises(MemoryPathError, match="a list of 2"):
        memory.set("items.3", 9)
    for bad in ("", "a..b", ("a", 1.5), (0, "a"), ()):
        with pytest.raises(MemoryPathError):
            memory.set(bad, 1)  # type: ignore[arg-type]
    assert memory.get("items") == [1, 2]


def test_a_reference_resolves_to_what_the_memory_holds_when_resolved_as_a_copy():
    memory = Memory({"order": {"items": [{"qty": 1}]}})
    ref = memory.ref("order.items.0")
    assert ref == MemoryRef(scope="short_term", path=("order", "items", "0"))
    memory.set("order.items.0.qty", 2)
    resolved = memory.resolve(ref)
    assert resolved == {"qty": 2}
    resolved["qty"] = 99
    assert memory.get("order.items.0.qty") == 2  # the receiver's copy is its own


def test_a_reference_travels_in_an_event_as_json():
    class Ship(Event):
        order: MemoryRef

    ref = Memory({"order": {"id": 1}}).ref("order")
    sent = Ship(order=ref)
    assert Ship.model_validate_json(sent.model_dump_json()).order == ref


def test_a_reference_to_nothing_or_into_another_memory_is_refused():
    memory = Memory({"a": 1})
    with pytest.raises(DanglingMemoryRefError):
        memory.ref("b")
    ref = memory.ref("a")
    memory.delete("a")
    with pytest.raises(DanglingMemoryRefError, match="short_term:a holds nothing"):
        memory.resolve(ref)
    with pytest.raises(ValueError, match="into short_term memory, resolved in sensory"):
        Memory({"a": 1}, scope="sensory").resolve(ref)


def test_an_entry_with_a_ttl_expires_on_the_runs_clock():
    run = Memory(now_ms=NOW)
    run.set("session.user", "u", ttl=30)
    run.set("window", [1], ttl=timedelta(minutes=1))
    run.set("forever", 1)
    assert run.expiry() == {"session": NOW + 30_000, "window": NOW + 60_000}
    committed, expiry = run.snapshot(), run.expiry()

    later = Memory(committed, expiry=expiry, now_ms=NOW + 45_000)
    assert later.get("session") is None  # invisible once its time has come
    assert "session" not in later
    assert list(later) == ["window", "forever"]
    assert later.snapshot() == {"window": [1], "forever": 1}  # dropped from what is committed
    assert later.expiry() == {"window": NOW + 60_000}

    before = Memory(committed, expiry=expiry, now_ms=NOW + 29_999)
    assert before.get("session.user") == "u"


def test_the_agents_ttl_is_renewed_by_every_write_of_an_entry():
    run = Memory({"a": {"n": 1}}, expiry={"a": NOW + 1}, now_ms=NOW, ttl_s=10)
    run.set("a.n", 2)
    run.set("b", 1)
    run.set("c", 1, ttl=1)  # its own ttl wins
    assert run.expiry() == {"a": NOW + 10_000, "b": NOW + 10_000, "c": NOW + 1_000}
    run.delete("a.n")  # a nested delete writes its entry too
    assert run.expires_at("a") == NOW + 10_000
    run.delete("b")
    assert run.expires_at("b") is None


def test_an_entry_written_without_a_ttl_and_no_agent_ttl_stops_expiring():
    run = Memory({"a": 1}, expiry={"a": NOW + 5}, now_ms=NOW)
    run.set("a", 2)
    assert run.expiry() == {}


def test_a_ttl_needs_a_clock_and_a_positive_number():
    with pytest.raises(ValueError, match="sensory memory has no clock"):
        Memory(scope="sensory").set("a", 1, ttl=5)
    for bad in (0, -1, True, "5"):
        with pytest.raises(ValueError, match="ttl must be a positive number"):
            Memory(now_ms=NOW).set("a", 1, ttl=bad)  # type: ignore[arg-type]


def test_the_agents_ttl_is_read_from_its_config():
    assert memory_ttl_seconds({}) is None
    assert memory_ttl_seconds({SHORT_TERM_MEMORY_TTL_KEY: 90}) == 90.0
    with pytest.raises(ValueError, match="short_term_memory_ttl_seconds must be a positive"):
        memory_ttl_seconds({SHORT_TERM_MEMORY_TTL_KEY: "1h"})
