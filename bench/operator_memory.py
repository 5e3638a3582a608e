"""What the keyed operator's Python heap keeps per run and per key (issue 37: "nothing grows").

Drives the keyed logic the way a Flink task does (keyed state in a dict standing in for
Flink's, timers fired by hand) with the echo agent, no store and no model, and counts Python's
allocated blocks (``sys.getallocatedblocks``) kept after a warm-up:

- **per run**: ``--runs`` inputs over 40 keys that come back again and again;
- **per new key**: ``--keys`` inputs, each of a key never seen before (a job keyed by order
  id), whose Flink state is thrown away after its answer (it is Flink's memory, not ours).

    PYTHONPATH=. .venv/bin/python -m bench.operator_memory --idle-key-ms 60000 --idle-key-ms 0

Prints one line per ``--idle-key-ms`` setting. Counts, not times: the figures are stable from
run to run on one code base.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from flink_agents.plan.compile import compile_agent
from flink_agents.runtime import OperatorOptions, RuntimeSettings
from flink_agents.runtime.keyed import KeyedAgentLogic
from tests.runtime.test_keyed import KeySlot, now_ms
from tests.sample_agents import EchoAgent


@contextmanager
def _operator(idle_key_ms: int) -> Iterator[KeyedAgentLogic]:
    settings = RuntimeSettings(operator=OperatorOptions(idle_key_ms=idle_key_ms))
    logic = KeyedAgentLogic(compile_agent(EchoAgent(name="echo")), settings)
    logic.open(attempt=0, subtask=0)
    try:
        yield logic
    finally:
        logic.close()


def _answer(logic: KeyedAgentLogic, table: dict[str, str], key: str, n: int) -> None:
    """One input of ``key``, visited until its answer came out."""
    flink_key = json.dumps(key)
    slot = KeySlot(table, flink_key)
    logic.on_input(flink_key, json.dumps({"n": n}), slot, now_ms)
    deadline = time.monotonic() + 10
    while not logic.on_timer(flink_key, slot, now_ms(), now_ms).outputs:
        if time.monotonic() > deadline:
            raise SystemExit(f"no answer for {key!r} within 10 s")
        time.sleep(0.001)


def _kept_blocks(before: int) -> int:
    gc.collect()
    return sys.getallocatedblocks() - before


def measure(idle_key_ms: int, runs: int, keys: int) -> tuple[float, float]:
    """Blocks kept per run (keys coming back) and per new key (each seen once)."""
    with _operator(idle_key_ms) as logic:
        table: dict[str, str] = {}
        for n in range(400):  # warm-up: imports, caches, the loop's first tasks
            _answer(logic, table, f"warm-{n % 40}", n)
        gc.collect()
        before = sys.getallocatedblocks()
        for n in range(runs):
            _answer(logic, table, f"customer-{n % 40}", n)
        per_run = _kept_blocks(before) / runs
        before = sys.getallocatedblocks()
        for n in range(keys):
            _answer(logic, table, f"order-{n}", n)
            table.pop(json.dumps(f"order-{n}"), None)
        time.sleep(0.05)
        _answer(logic, table, "customer-0", 0)  # a visit: lets go of the keys idle by now
        per_key = _kept_blocks(before) / keys
    return per_run, per_key


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4000)
    parser.add_argument("--keys", type=int, default=2000)
    parser.add_argument(
        "--idle-key-ms", type=int, action="append", help="operator.idle_key_ms (repeatable)"
    )
    args = parser.parse_args()
    for idle in args.idle_key_ms or [60_000, 0]:
        per_run, per_key = measure(idle, args.runs, args.keys)
        print(
            f"idle_key_ms={idle}: {per_run:.2f} blocks kept per run, "
            f"{per_key:.1f} per new key ({args.runs} runs, {args.keys} keys)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
