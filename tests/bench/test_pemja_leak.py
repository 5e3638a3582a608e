"""What a closed pemja interpreter keeps (``bench/pemja_leak.py``): the reason the number of
embedded Python operators per attempt is held down (docs/reliability.md, "What the Python
blocks are"). Pinned on the pemja PyFlink ships: if a release stops keeping them, this fails and
the docs' account of the Python blocks per restart must be measured again."""

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
