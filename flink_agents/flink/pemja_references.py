"""Drop the references pemja keeps of every interpreter it closes (thread mode, issue 37).

In thread mode PyFlink runs each Python operator in a pemja interpreter: a thread state of the
TaskManager's one CPython, made when the operator opens and finalized when it closes, so at
every restart of the job. pemja 0.5 (pyjobject.c, pylib.c) takes two references per
interpreter that nothing ever drops, so what they hold outlives the interpreter:

- each *multi-method* (a Java method name with overloads, ``wait`` of every class among them)
  of every Java class whose objects reach Python, cached per interpreter in its class table:
  created with one reference, stored in the table with a second;
- the interpreter's ``_pemja`` module: created with one reference, then imported, which takes
  another into the same pointer.

Measured with ``python -m bench.pemja_leak``: 7 pymalloc blocks a multi-method and 8 for the
module; the TaskManager of the support desk keeps some 60 multi-methods per attempt.

:func:`release_pemja_references` drops, on the thread of a live interpreter, the one reference
too many of each (its bookkeeping makes it idempotent), so the interpreter's own teardown frees
them. It reads pemja's per-thread record (``JcpThread``) through ``ctypes``, and acts only on
the pemja versions read and measured here, on a 64-bit CPython, after checking the record's
layout; anything else leaves pemja as it is. ``FLINK_AGENTS_PEMJA_RELEASE=off`` turns it off.
Operators call it from callbacks pemja runs (``open``, each element): PyFlink does not call a
function's ``close`` when an attempt fails, and the table grows while the first elements pass.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import threading
from collections.abc import Callable
from importlib import metadata
from types import ModuleType
from typing import Any, TypeVar

_LOG = logging.getLogger(__name__)

_In = TypeVar("_In")
_Out = TypeVar("_Out")

SWITCH_VARIABLE = "FLINK_AGENTS_PEMJA_RELEASE"

LEAKING_VERSIONS = ((0, 5), (0, 7))
"""The pemja versions ``[from, to)`` whose sources keep both references (0.5.5 and 0.7.dev0
were read; 0.5.7, the one PyFlink 1.20 and 2.3 install, measured)."""

_THREAD_KEY = "jcp"
"""Where pemja keeps its ``JcpThread`` record: a capsule in the thread state's dict."""

# Byte offsets of the JcpThread's fields used here (eight-byte pointers, in declaration order:
# globals, tstate, env, pemja_module, three name caches, cache_callable, name_to_attrs).
_TSTATE = 8
_MODULE = 24
_CLASS_TABLE = 64
_TYPE = 8
"""Offset of an object's type pointer (after its reference count)."""

# A handle of our own (what ``ctypes.pythonapi`` is on POSIX), so that setting the signatures
# below changes nobody else's. Not ``py_object`` for a result: ctypes takes it for a new reference,
# and the thread state's dict is borrowed.
_api = ctypes.PyDLL(None)
_api.PyThreadState_GetDict.restype = ctypes.c_void_p
_api.PyThreadState_GetDict.argtypes = []
_api.PyThreadState_Get.restype = ctypes.c_void_p
_api.PyThreadState_Get.argtypes = []
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.Py_DecRef.restype = None
_api.Py_DecRef.argtypes = [ctypes.py_object]


class _Released(threading.local):
    """What this interpreter thread has released (a ``threading.local`` lives per thread
    state, so per pemja interpreter, and goes with it)."""

    record: int | None = None
    """The JcpThread's address; 0 on a thread that is not a pemja interpreter's."""
    module: bool = False
    classes: int = 0
    """How many classes of the table were gone through."""

    def __init__(self) -> None:
        self.methods: set[int] = set()
        """The multi-methods released, by id: each lives in the table until the interpreter
        ends, so an id is not reused meanwhile."""


_released = _Released()


def _leaking_pemja() -> bool:
    if os.environ.get(SWITCH_VARIABLE, "").lower() in {"off", "0", "false", "no"}:
        return False
    if sys.implementation.name != "cpython" or ctypes.sizeof(ctypes.c_void_p) != 8:
        return False
    try:
        found = metadata.version("pemja")
    except metadata.PackageNotFoundError:
        return False
    try:
        version = tuple(int(part) for part in found.split(".")[:2])
    except ValueError:
        return False
    return LEAKING_VERSIONS[0] <= version < LEAKING_VERSIONS[1]


_ENABLED = _leaking_pemja()


def release_pemja_references() -> int:
    """On a pemja interpreter's thread, drop the references pemja would keep of it once
    closed (the module's, and every multi-method's cached so far); returns how many.

    Cheap when nothing is new (a look at the class table's size): callers may call it for
    every element. Elsewhere (another thread, process mode, another pemja) it does nothing.
    """
    if not _ENABLED:
        return 0
    state = _released
    if state.record is None:
        state.record = _this_threads_record()
    if not state.record:
        return 0
    dropped = 0
    if not state.module:
        _api.Py_DecRef(_object_at(_pointer_at(state.record + _MODULE)))
        state.module = True
        dropped += 1
    table_address = _pointer_at(state.record + _CLASS_TABLE)
    if not table_address:
        return dropped
    table: dict[Any, dict[Any, Any]] = _object_at(table_address)
    if len(table) == state.classes:
        return dropped
    for attributes in list(table.values()):
        for value in list(attributes.values()):
            if type(value).__name__ == "PyJMultiMethod" and id(value) not in state.methods:
                _api.Py_DecRef(value)
                state.methods.add(id(value))
                dropped += 1
    state.classes = len(table)
    return dropped


def releasing(function: Callable[[_In], _Out]) -> Callable[[_In], _Out]:
    """``function`` (a key selector, a map) releasing first: for the functions PyFlink runs in
    an interpreter of their own, with no ``open`` of ours to call it from."""

    def call(value: _In) -> _Out:
        release_pemja_references()
        return function(value)

    return call


def _this_threads_record() -> int:
    """The address of this thread's JcpThread, once its layout checks out; else 0."""
    thread_dict_address = _api.PyThreadState_GetDict()
    if not thread_dict_address:
        return 0
    capsule = _object_at(thread_dict_address).get(_THREAD_KEY)
    if capsule is None:
        return 0  # not a pemja interpreter's thread
    record = _api.PyCapsule_GetPointer(capsule, None)
    module = _pointer_at(record + _MODULE) if record else 0
    table = _pointer_at(record + _CLASS_TABLE) if record else 0
    fits = (
        bool(record)
        and _pointer_at(record + _TSTATE) == _api.PyThreadState_Get()
        and bool(module)
        and _pointer_at(module + _TYPE) == id(ModuleType)
        and (table == 0 or _pointer_at(table + _TYPE) == id(dict))
    )
    if fits and getattr(_object_at(module), "__name__", None) == "_pemja":
        return int(record)
    _LOG.warning(
        "pemja's interpreter record does not have the layout expected of pemja %s: its "
        "references are left as they are (docs/flink-runtime.md, 'Pitfalls')",
        metadata.version("pemja"),
    )
    return 0


def _pointer_at(address: int) -> int:
    return ctypes.c_void_p.from_address(address).value or 0


def _object_at(address: int) -> Any:
    return ctypes.cast(address, ctypes.py_object).value
