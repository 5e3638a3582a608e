"""Which of the package's modules one run's calls pass through, grouped by package.

    .venv/bin/python -m bench.call_path          # from the repository root

Two measures behind "following a model call crosses N packages" (issue "The durable core, one
owner"), both over the weather ReAct agent (two tool calls, three model calls, scripted) run once
through ``run_local`` with the in-memory store:

* the modules the whole run entered, per package (a profile hook notes every function entered
  in a ``flink_agents`` module): plan loading and event-log setup included;
* the call path: the Python stacks of the first model call, each as the packages its frames are
  in, outermost first: when the provider is entered (the called function: the model setup in
  ``api`` and its connection in ``providers``), when its outcome is recorded into its action's
  state (``ActionState.record_call``), and when that state is written to the store (``put``).
  The path a call crosses from the host to its store write is the last two: the measure
  ``tests/bench/test_call_path.py`` pins.

Through ``run_local`` the stacks start in ``runtime``. Under Flink the operator's thread
(``flink/operator.py`` -> ``runtime/keyed.py`` -> ``runtime/host.py``) hands each input to the
engine's own loop thread, where the same stacks run from ``runtime/host.py``: ``flink`` is one
package more on the way in, none on the write.
"""

from __future__ import annotations

import sys
import threading
from collections import defaultdict
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import Any

_PACKAGE = "/flink_agents/"
_WEATHER = "examples/weather.yaml"


def modules_entered() -> dict[str, list[str]]:
    """Package -> the modules of it that one weather run entered, in first-entered order."""
    from flink_agents.durable.store import InMemoryActionStateStore
    from flink_agents.plan.sources import load_plan
    from flink_agents.runtime.local import run_local

    plan = load_plan(_WEATHER, None)
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


@dataclass(frozen=True)
class Frame:
    """One frame of a stack: the package it is in (``flink_agents``'s subpackage, or
    ``(outside)`` for asyncio, the standard library and the caller) and where."""

    package: str
    where: str  # module path (relative to flink_agents/ when inside it) and function


@dataclass(frozen=True)
class CallPath:
    """The stacks of the first model call (outermost frame first): its provider entered, its
    outcome recorded, and written to the store."""

    invoked: list[Frame]
    recorded: list[Frame]
    written: list[Frame]

    @staticmethod
    def packages(*stacks: list[Frame]) -> list[str]:
        """The ``flink_agents`` packages ``stacks`` cross, in first-entered order."""
        return list(dict.fromkeys(f.package for s in stacks for f in s if f.package != "(outside)"))

    def to_store(self) -> list[str]:
        """The packages from the host to the store write: the recording's and the write's."""
        return self.packages(self.recorded, self.written)


def _stack(frame: FrameType | None) -> list[Frame]:
    frames: list[Frame] = []
    while frame is not None:
        path = frame.f_code.co_filename
        if _PACKAGE in path:
            module = path.split(_PACKAGE, 1)[1]
            package = module.split("/", 1)[0] if "/" in module else "(top)"
        else:
            module, package = path.rsplit("/", 1)[-1], "(outside)"
        frames.append(Frame(package, f"{module}:{frame.f_code.co_name}"))
        frame = frame.f_back
    return frames[::-1]


def model_call_path() -> CallPath:
    """Run the weather agent once; the stacks at the recording and the store write of its first
    model call's outcome."""
    from flink_agents.durable.store import ActionState, CallStatus, InMemoryActionStateStore
    from flink_agents.plan.sources import load_plan
    from flink_agents.runtime.local import run_local

    store = InMemoryActionStateStore()
    record_call: CodeType = ActionState.record_call.__code__
    put: CodeType = type(store).put.__code__
    found: dict[str, list[Frame]] = {}

    def answered(calls: list[Any]) -> bool:
        return any(c.kind == "model" and c.status is CallStatus.SUCCEEDED for c in calls)

    def note(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or "written" in found:
            return
        if "invoked" not in found:
            if f"{_PACKAGE}providers/" in frame.f_code.co_filename:
                stack = _stack(frame)  # the model called, not the connection opened:
                if "durable" in CallPath.packages(stack):  # called through a durable call
                    found["invoked"] = stack
        elif "recorded" not in found:
            if frame.f_code is record_call and answered([frame.f_locals["result"]]):
                found["recorded"] = _stack(frame)
        elif frame.f_code is put and answered(frame.f_locals["state"].calls):
            found["written"] = _stack(frame)

    plan = load_plan(_WEATHER, None)
    threading.setprofile(note)
    sys.setprofile(note)
    try:
        run_local(plan, [{"city": "Oslo"}], key="city", store=store)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return CallPath(found["invoked"], found["recorded"], found["written"])


def _print_stack(title: str, stack: list[Frame]) -> None:
    packages = CallPath.packages(stack)
    print(f"{title}: {len(packages)} packages ({', '.join(packages)}), {len(stack)} frames")
    for frame in stack:
        print(f"  {frame.package:14} {frame.where}")


def main() -> None:
    by_package = modules_entered()
    total = sum(len(modules) for modules in by_package.values())
    print(f"whole run: {len(by_package)} packages, {total} modules")
    for package, modules in sorted(by_package.items(), key=lambda item: -len(item[1])):
        print(f"{package:14} {len(modules):3}  {' '.join(modules)}")
    path = model_call_path()
    print()
    _print_stack("first model call: its provider entered", path.invoked)
    _print_stack("its outcome recorded", path.recorded)
    _print_stack("and written to the store", path.written)
    to_store = path.to_store()
    print(f"\nhost to store write: {len(to_store)} packages ({', '.join(to_store)})")


if __name__ == "__main__":
    main()
