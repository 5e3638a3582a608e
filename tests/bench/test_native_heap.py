"""The allocator's own figures (bench/native_heap.py) on glibc and on a preloaded jemalloc: a
block handed out and not freed shows in use, and in what the allocator holds."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.native_heap import smaps_classes_mb

REPO = Path(__file__).resolve().parents[2]
JEMALLOC = sorted(glob.glob("/usr/lib/*-linux-gnu/libjemalloc.so.2"))
# 64 MB from malloc, touched, then the figures; the block stays alive until they are read.
PROGRAM = """
import ctypes, json
from bench.native_heap import allocator_figures
before = allocator_figures()
libc = ctypes.CDLL(None)  # the global malloc: jemalloc when preloaded
libc.malloc.restype = ctypes.c_void_p
block = libc.malloc(64 << 20)
ctypes.memset(block, 1, 64 << 20)
print(json.dumps([before, allocator_figures()]))
"""


def _figures(preload: str | None) -> tuple[dict[str, object], dict[str, object]]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = preload
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, check=True
    )
    before, after = json.loads(done.stdout)
    return before, after


@pytest.mark.parametrize(
    "preload",
    [None, pytest.param(JEMALLOC[0] if JEMALLOC else "", id="jemalloc")],
    ids=["glibc", "jemalloc"],
)
def test_a_block_not_freed_is_in_use_and_held(preload: str | None) -> None:
    if preload == "":
        pytest.skip("no libjemalloc.so.2 here (Debian's libjemalloc2)")
    before, after = _figures(preload)
    assert after["malloc"] == ("jemalloc" if preload else "glibc")
    grown_in_use = float(after["malloc_in_use_mb"]) - float(before["malloc_in_use_mb"])  # type: ignore[arg-type]
    assert 63 < grown_in_use < 70
    assert float(after["malloc_held_mb"]) >= float(after["malloc_in_use_mb"])  # type: ignore[arg-type]


def test_this_process_rss_is_split_by_kind_of_mapping() -> None:
    kinds = smaps_classes_mb(os.getpid())
    assert kinds["file"] > 0  # the interpreter and its libraries
    rss_kb = next(
        int(line.split()[1])
        for line in Path("/proc/self/status").read_text().splitlines()
        if line.startswith("VmRSS:")
    )
    assert abs(sum(kinds.values()) - rss_kb / 1024) < 0.05 * rss_kb / 1024 + 2
