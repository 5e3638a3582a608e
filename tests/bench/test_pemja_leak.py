"""What a closed pemja interpreter keeps (``bench/pemja_leak.py``), and that
:func:`~flink_agents.flink.pemja_references.release_pemja_references` leaves nothing of it
(docs/reliability.md, "What the Python blocks are"). Pinned on the pemja PyFlink ships: if a
release stops keeping them, the first test fails, and the release must stop acting on it."""

from __future__ import annotations

import shutil

import pytest

from bench.pemja_leak import run


@pytest.mark.flink
@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK")
def test_each_closed_interpreter_keeps_its_module_and_its_overload_lists() -> None:
    first, *_, last = run(interpreters=20, every=10)

    assert (first["closed"], last["closed"]) == (0, 20)
    # One _pemja module, and one list per overloaded method of the Java object set into it
    # (the object's own method and java.lang.Object's wait).
    assert last["pemja_modules"] - first["pemja_modules"] == 20
    assert last["method_lists"] - first["method_lists"] == 2 * 20


@pytest.mark.flink
@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK")
def test_released_interpreters_leave_neither_their_module_nor_their_overload_lists() -> None:
    _, first, last = run(interpreters=20, every=10, wide=True, release=True)

    # From the second sample (after the first interpreter closed, released) to the last: ten
    # closed interpreters more, and the same modules and lists (the live interpreter's).
    assert (first["closed"], last["closed"]) == (10, 20)
    assert last["pemja_modules"] == first["pemja_modules"]
    assert last["method_lists"] == first["method_lists"] == 12 + 1
