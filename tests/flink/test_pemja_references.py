"""release_pemja_references drops exactly the references pemja 0.5 keeps, once each, and only
on a thread whose pemja record has the layout it reads. Here the record is built by hand on a
thread of the test (the real pemja, from Java: tests/bench/test_pemja_leak.py)."""

from __future__ import annotations

import ctypes
import logging
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import pytest

from flink_agents.flink import pemja_references
from flink_agents.flink.pemja_references import release_pemja_references, releasing

_api = ctypes.PyDLL(None)
_api.PyThreadState_Get.restype = ctypes.c_void_p
_api.PyThreadState_GetDict.restype = ctypes.c_void_p
_api.PyCapsule_New.restype = ctypes.py_object  # a new reference, as ctypes takes it
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.Py_IncRef.argtypes = [ctypes.py_object]


class PyJMultiMethod:
    """Stands for pemja's multi-method type (matched by name)."""


class PyJMethod:
    """Stands for pemja's single-method type, which pemja owns correctly."""


def leaked(value: Any) -> Any:
    """``value`` with one reference more, as pemja leaves it."""
    _api.Py_IncRef(value)
    return value


@contextmanager
def pemja_record(module: ModuleType, table: dict[str, Any] | None) -> Iterator[None]:
    """This thread as a pemja interpreter's: a JcpThread record in its thread state's dict."""
    fields = (ctypes.c_void_p * 9)()
    fields[1] = _api.PyThreadState_Get()
    fields[3] = id(module)
    fields[8] = 0 if table is None else id(table)
    thread_dict = ctypes.cast(_api.PyThreadState_GetDict(), ctypes.py_object).value
    thread_dict["jcp"] = _api.PyCapsule_New(ctypes.addressof(fields), None, None)
    try:
        yield
    finally:
        del thread_dict["jcp"]


def on_a_new_thread(work: Callable[[], Any]) -> Any:
    """What ``work`` returns, run on a thread of its own (its own thread state)."""
    result: list[Any] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            result.append(work())
        except BaseException as exc:  # handed to the test's thread
            failure.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]


@pytest.fixture(autouse=True)
def _leaking_pemja(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pemja_references, "_ENABLED", True)


def test_it_drops_the_modules_and_each_multi_methods_extra_reference_once() -> None:
    module = leaked(ModuleType("_pemja"))
    wait, emit, single = leaked(PyJMultiMethod()), leaked(PyJMultiMethod()), PyJMethod()
    table = {"Context": {"wait": wait, "emit": emit, "toString": single}}
    before = [sys.getrefcount(module), sys.getrefcount(wait), sys.getrefcount(emit)]
    single_before = sys.getrefcount(single)

    def work() -> tuple[int, int, int]:
        with pemja_record(module, table):
            first = release_pemja_references()
            again = release_pemja_references()
            counted = leaked(PyJMultiMethod())
            table["Counter"] = {"inc": counted}
            later = release_pemja_references()
            assert sys.getrefcount(counted) == 3  # the table's, this name's, the call's
            return first, again, later

    assert on_a_new_thread(work) == (3, 0, 1)
    after = [sys.getrefcount(module), sys.getrefcount(wait), sys.getrefcount(emit)]
    assert after == [count - 1 for count in before]
    assert sys.getrefcount(single) == single_before


def test_an_interpreter_that_cached_no_class_yet_gives_up_only_its_module() -> None:
    module = leaked(ModuleType("_pemja"))
    before = sys.getrefcount(module)

    def work() -> int:
        with pemja_record(module, None):
            return release_pemja_references()

    assert on_a_new_thread(work) == 1
    assert sys.getrefcount(module) == before - 1


def test_a_record_of_another_layout_is_left_alone_and_said_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    not_pemjas = leaked(ModuleType("json_helpers"))  # the module field names another module
    method = leaked(PyJMultiMethod())
    before = sys.getrefcount(not_pemjas), sys.getrefcount(method)

    def work() -> int:
        with pemja_record(not_pemjas, {"Context": {"wait": method}}):
            return release_pemja_references()

    with caplog.at_level(logging.WARNING, logger=pemja_references.__name__):
        assert on_a_new_thread(work) == 0
    assert (sys.getrefcount(not_pemjas), sys.getrefcount(method)) == before
    assert "does not have the layout expected" in caplog.text


def test_a_thread_that_is_not_a_pemja_interpreters_is_left_alone() -> None:
    assert on_a_new_thread(release_pemja_references) == 0


def test_the_switch_and_the_version_decide_whether_it_acts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pemja_references.metadata, "version", lambda name: "0.5.7")
    assert pemja_references._leaking_pemja()
    monkeypatch.setenv(pemja_references.SWITCH_VARIABLE, "off")
    assert not pemja_references._leaking_pemja()
    monkeypatch.delenv(pemja_references.SWITCH_VARIABLE)
    for unread in ("0.4.2", "0.7.0", "1.0"):
        monkeypatch.setattr(pemja_references.metadata, "version", lambda name, v=unread: v)
        assert not pemja_references._leaking_pemja(), unread


def test_releasing_hands_the_value_through() -> None:
    assert releasing(str.upper)("key") == "KEY"
