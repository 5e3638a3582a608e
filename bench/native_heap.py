"""What a process's native memory is made of (issue 37): the C allocator's own figures, read from
inside the process, and its resident memory by kind of mapping, read from ``/proc`` outside it.

In thread mode the interpreter runs inside the TaskManager's JVM, so its RSS holds the JVM (its
heap, code cache, metaspace, thread stacks) and the C heap that Python and the native libraries
(librdkafka, numpy) allocate from. When RSS steps up, the question is which of them: bytes the
allocator hands out and nobody frees (a leak), bytes it keeps after they were freed
(fragmentation, decay not yet done), or the JVM's heap pages touched for the first time.

:func:`allocator_figures` answers for the allocator this process runs on: jemalloc when it was
preloaded (``FLINK_MALLOC=jemalloc``, the image), read through its ``mallctl``; glibc's
``mallinfo2`` otherwise. Python's small objects are not among them: pymalloc maps its arenas
itself (``python_blocks`` in bench/soak_heap.py counts those). :func:`smaps_classes_mb` splits a
process's RSS by the shape of its mappings, with no symbols needed.
"""

from __future__ import annotations

import ctypes
from functools import cache
from pathlib import Path

MB = 2**20


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


@cache
def libc() -> ctypes.CDLL:
    library = ctypes.CDLL("libc.so.6")
    library.mallinfo2.restype = _MallInfo2
    library.malloc_trim.argtypes = [ctypes.c_size_t]
    return library


@cache
def _mallctl() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    """jemalloc's ``mallctl`` when jemalloc is this process's malloc (preloaded), else None."""
    try:
        function = ctypes.CDLL(None).mallctl  # the global namespace: what LD_PRELOAD put there
    except AttributeError:
        return None
    function.argtypes = [
        ctypes.c_char_p,
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.c_void_p,
        ctypes.c_size_t,
    ]
    function.restype = ctypes.c_int
    return function


#: The figures `allocator_figures` may give, for those who record them.
MALLOC_FIGURES = ("malloc_in_use_mb", "malloc_held_mb", "malloc_active_mb", "malloc_dirty_mb")
_ALL_ARENAS = 4096  # jemalloc's MALLCTL_ARENAS_ALL: the sum over its arenas


def _jemalloc_stat(mallctl: ctypes._CFuncPtr, name: str) -> int:  # type: ignore[name-defined]
    value = ctypes.c_size_t(0)
    size = ctypes.c_size_t(ctypes.sizeof(value))
    if mallctl(name.encode(), ctypes.byref(value), ctypes.byref(size), None, 0) != 0:
        raise OSError(f"jemalloc mallctl({name!r}) failed")
    return value.value


def mallinfo_mb() -> dict[str, float]:
    """glibc's figures in MB: bytes it has from the system (``arena``: heap arenas, ``hblkhd``:
    its own mmaps), in use (``uordblks``) and free in its arenas (``fordblks``)."""
    info = libc().mallinfo2()
    return {name: getattr(info, name) / MB for name in ("arena", "hblkhd", "uordblks", "fordblks")}


def allocator_figures() -> dict[str, float | str]:
    """The allocator's own view, in MB: ``malloc_in_use_mb`` (handed out, not freed) and
    ``malloc_held_mb`` (what it keeps from the system for that: in use plus what it holds freed;
    jemalloc's ``stats.resident``, glibc's arenas and mmaps), and ``malloc`` (which one).

    jemalloc also tells why it holds more than is in use: ``malloc_active_mb`` (pages with a
    live allocation: well above in use means fragmentation) and ``malloc_dirty_mb`` (freed pages
    not yet given back: they go back as they decay, which without ``background_thread`` happens
    only when the arena that holds them is used again)."""
    mallctl = _mallctl()
    if mallctl is None:
        info = libc().mallinfo2()
        return {
            "malloc": "glibc",
            "malloc_in_use_mb": (info.uordblks + info.hblkhd) / MB,
            "malloc_held_mb": (info.arena + info.hblkhd) / MB,
        }
    epoch = ctypes.c_uint64(1)  # writing the epoch refreshes jemalloc's cached statistics
    mallctl(b"epoch", None, None, ctypes.byref(epoch), ctypes.sizeof(epoch))
    return {
        "malloc": "jemalloc",
        "malloc_in_use_mb": _jemalloc_stat(mallctl, "stats.allocated") / MB,
        "malloc_held_mb": _jemalloc_stat(mallctl, "stats.resident") / MB,
        "malloc_active_mb": _jemalloc_stat(mallctl, "stats.active") / MB,
        "malloc_dirty_mb": _jemalloc_stat(mallctl, f"stats.arenas.{_ALL_ARENAS}.pdirty")
        * _jemalloc_stat(mallctl, "arenas.page")
        / MB,
    }


def smaps_classes_mb(pid: int) -> dict[str, float]:
    """RSS of ``pid`` by kind of mapping, told apart by shape: the Java heap (anon, below 4 GiB
    with compressed oops), glibc's main arena (``[heap]``) and its other arenas (64 MiB-aligned
    anon mappings; jemalloc's chunks are aligned so too), 1 MiB anon mappings (pymalloc arenas,
    and some of the JVM's), executable anon (code caches), other anon, and file-backed."""
    out: dict[str, float] = {}
    kind = "file"
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        parts = line.split()
        if parts and "-" in parts[0] and not parts[0].endswith(":"):
            start, end = (int(x, 16) for x in parts[0].split("-"))
            name = parts[5] if len(parts) > 5 else ""
            size = end - start
            if name == "[heap]":
                kind = "glibc_main_arena"
            elif name.startswith("["):
                kind = "other_special"
            elif name:
                kind = "file"
            elif end <= 1 << 32:
                kind = "java_heap"
            elif start % (64 << 20) == 0 and size <= 64 << 20:
                kind = "glibc_arena"
            elif "x" in parts[1]:
                kind = "anon_exec"
            elif size == 1 << 20:
                kind = "anon_1mib"
            else:
                kind = "anon_other"
        elif parts and parts[0] == "Rss:":
            out[kind] = out.get(kind, 0.0) + int(parts[1]) / 1024
    return out
