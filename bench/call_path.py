"""Which of the package's modules one run's calls pass through, grouped by package.

    .venv/bin/python -m bench.call_path          # from the repository root

Runs the weather ReAct agent (two tool calls, three model calls, scripted) once through
``run_local`` with the in-memory store, with a profile hook that notes every function entered in
a ``flink_agents`` module; prints, per package, how many modules were entered and which. The
measure behind "following a call crosses N packages" (issue "The durable core, one owner").
"""

from __future__ import annotations

import sys
import threading
from collections import defaultdict
from types import FrameType
from typing import Any

_PACKAGE = "/flink_agents/"


def modules_entered() -> dict[str, list[str]]:
    """Package -> the modules of it that one weather run entered, in first-entered order."""
    from flink_agents.durable.store import InMemoryActionStateStore
    from flink_agents.plan.sources import load_plan
    from flink_agents.runtime.local import run_local

    plan = load_plan("examples/weather.yaml", None)
    entered: dict[str, None] = {}

    def note(frame: FrameType, event: str, arg: Any) -> None:
        path = frame.f_code.co_filename
        if event == "call" and _PACKAGE in path:
            entered.setdefault(path.split(_PACKAGE, 1)[1], None)

    threading.setprofile(note)
    sys.setprofile(note)
    try:
        run_local(plan, [{"city": "Oslo"}], key="city", store=InMemoryActionStateStore())
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    by_package: dict[str, list[str]] = defaultdict(list)
    for module in entered:
        package = module.split("/", 1)[0] if "/" in module else "(top)"
        by_package[package].append(module)
    return dict(by_package)


def main() -> None:
    by_package = modules_entered()
    total = sum(len(modules) for modules in by_package.values())
    print(f"{len(by_package)} packages, {total} modules")
    for package, modules in sorted(by_package.items(), key=lambda item: -len(item[1])):
        print(f"{package:14} {len(modules):3}  {' '.join(modules)}")


if __name__ == "__main__":
    main()
