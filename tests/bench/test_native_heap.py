"""The allocator's own figures (bench/native_heap.py) on glibc and on a preloaded jemalloc: a
block handed out and not freed shows in use, and in what the allocator holds."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.native_heap import smaps_classes_mb

REPO = Path(__file__).resolve().parents[2]
JEMALLOC = sorted(glob.glob("/usr/lib/*-linux-gnu/libjemalloc.so.2"))
# 64 MB in 4 KB blocks from malloc, touched: the figures before, while held and once freed.
PROGRAM = """
import ctypes, json
from bench.native_heap import allocator_figures
libc = ctypes.CDLL(None)  # the global malloc: jemalloc when preloaded
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
before = allocator_figures()
blocks = [libc.malloc(4096) for _ in range(16384)]
for block in blocks:
    ctypes.memset(block, 1, 4096)
held = allocator_figures()
for block in blocks:
    libc.free(block)
print(json.dumps([before, held, allocator_figures()]))
"""


def _figures(preload: str | None, malloc_conf: str = "") -> list[dict[str, Any]]:
    env = dict(os.environ, PYTHONPATH=str(REPO), MALLOC_CONF=malloc_conf)
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = preload
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


@pytest.mark.parametrize(
    "preload",
    [None, pytest.param(JEMALLOC[0] if JEMALLOC else "", id="jemalloc")],
    ids=["glibc", "jemalloc"],
)
def test_blocks_not_freed_are_in_use_and_held(preload: str | None) -> None:
    if preload == "":
        pytest.skip("no libjemalloc.so.2 here (Debian's libjemalloc2)")
    before, held, _ = _figures(preload)
    assert held["malloc"] == ("jemalloc" if preload else "glibc")
    assert 63 < held["malloc_in_use_mb"] - before["malloc_in_use_mb"] < 70
    assert held["malloc_held_mb"] >= held["malloc_in_use_mb"]


@pytest.mark.skipif(not JEMALLOC, reason="no libjemalloc.so.2 here (Debian's libjemalloc2)")
def test_jemalloc_holds_freed_pages_as_dirty_until_they_decay() -> None:
    # What tells fragmentation (active far above in use) from freed pages jemalloc keeps
    # (dirty) when a soak's TaskManager holds more than it uses; `dirty_decay_ms:0` gives
    # them back at once.
    _, held, freed = _figures(JEMALLOC[0])
    assert held["malloc_active_mb"] - held["malloc_in_use_mb"] < 8
    assert freed["malloc_active_mb"] < held["malloc_active_mb"] - 60
    assert freed["malloc_dirty_mb"] > 32
    assert freed["malloc_held_mb"] - freed["malloc_in_use_mb"] >= freed["malloc_dirty_mb"]

    _, _, given_back = _figures(JEMALLOC[0], "dirty_decay_ms:0")
    assert given_back["malloc_dirty_mb"] < 8
    assert given_back["malloc_held_mb"] < freed["malloc_held_mb"] - 32


def test_this_process_rss_is_split_by_kind_of_mapping() -> None:
    kinds = smaps_classes_mb(os.getpid())
    assert kinds["file"] > 0  # the interpreter and its libraries
    rss_kb = next(
        int(line.split()[1])
        for line in Path("/proc/self/status").read_text().splitlines()
        if line.startswith("VmRSS:")
    )
    assert abs(sum(kinds.values()) - rss_kb / 1024) < 0.05 * rss_kb / 1024 + 2
