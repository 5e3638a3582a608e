"""The example services' witness: which requests count as completed calls made again."""

from __future__ import annotations

from examples.services import Counters


def test_a_repeat_of_a_call_answered_before_the_moment_is_a_reinvocation() -> None:
    counters = Counters()
    counters.add("model", "a", 1.0, 2.0)  # answered before 5
    counters.add("model", "a", 8.0, 9.0)  # made again after it
    counters.add("model", "b", 4.0, 6.0)  # in flight at 5: its repeat is allowed
    counters.add("model", "b", 8.0, 9.0)
    assert counters.repeated_after(5.0) == {"model": 1}


def test_since_leaves_out_the_repeats_of_an_earlier_fault() -> None:
    """Two savepoints, at 5 and 20: ``b`` was in flight at the first and sent again after its
    restore (at 8); at the second it had completed long before, but its repeat came before the
    second savepoint and is not a re-invocation there. ``c`` is one."""
    counters = Counters()
    counters.add("model", "b", 4.0, 6.0)
    counters.add("model", "b", 8.0, 9.0)
    counters.add("model", "c", 10.0, 11.0)
    counters.add("model", "c", 22.0, 23.0)
    assert counters.repeated_after(19.0) == {"model": 2}
    assert counters.repeated_after(19.0, since=20.0) == {"model": 1}
