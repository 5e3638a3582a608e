"""Agents and a probe for the durable-execution tests.

The probe counts every invocation of the functions the agents call durably and can hold one
call open (``hold``) so a test can throw the engine away in the middle of a run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import textwrap
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from flink_agents.api import (
    NOT_DONE,
    Event,
    InputEvent,
    OutputEvent,
    ReconcileRequest,
    RunnerContext,
    action,
)
from flink_agents.durable.store import ActionStateStore
from flink_agents.plan import compile_yaml
from flink_agents.plan.models import AgentPlan
from flink_agents.runtime import KeyState, RunResult, Runtime
from flink_agents.testing import Stores, resume


class Reply(BaseModel):
    text: str


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Prepared(Event):
    value: int


class Probe:
    """Invocation counters, a call that can be held open, and a scripted reconciler."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.hold: str | None = None  # name of the call to hold open
        self.reached: asyncio.Event | None = None
        self.reconcile_with: Any = NOT_DONE  # a value, NOT_DONE, or an exception to raise
        self.use_reconciler = True
        self.variant = "a"
        self.fail_attempts = 0
        self.reconciled: list[ReconcileRequest] = []

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]

    async def call(self, name: str, value: Any) -> Any:
        self.counts[name] += 1
        if name == self.hold:
            assert self.reached is not None
            self.reached.set()
            await asyncio.Event().wait()  # until the engine is closed
        return value + 1 if isinstance(value, int) else value

    def reconcile(self, request: ReconcileRequest) -> Any:
        self.counts[f"reconcile:{request.args[0]}"] += 1
        self.reconciled.append(request)
        if isinstance(self.reconcile_with, Exception):
            raise self.reconcile_with
        return self.reconcile_with

    def reconciler(self) -> Callable[..., Any] | None:
        return self.reconcile if self.use_reconciler else None


PROBE = Probe()


@action(InputEvent)
async def three_calls(event: InputEvent, ctx: RunnerContext) -> None:
    a = await ctx.durable_execute_async(PROBE.call, "first", event.input["n"])
    b = await ctx.durable_execute_async(PROBE.call, "second", a)
    c = await ctx.durable_execute_async(PROBE.call, "third", b)
    ctx.send_event(OutputEvent(output=[a, b, c]))


@action(InputEvent)
async def prepare(event: InputEvent, ctx: RunnerContext) -> None:
    PROBE.counts["action:prepare"] += 1
    n = event.input["n"]
    ctx.short_term_memory.set("seen", n)
    ctx.short_term_memory.delete("stale")
    ctx.sensory_memory.set("doubled", n * 2)
    value = await ctx.durable_execute_async(PROBE.call, "prep", n)
    ctx.send_event(Prepared(value=value))


@action(Prepared)
async def finish(event: Prepared, ctx: RunnerContext) -> None:
    PROBE.counts["action:finish"] += 1
    total = event.value + ctx.sensory_memory.get("doubled")
    out = await ctx.durable_execute_async(PROBE.call, "final", total)
    ctx.short_term_memory.set("last", out)
    ctx.send_event(OutputEvent(output={"out": out, "seen": ctx.short_term_memory.get("seen")}))


@action(InputEvent)
async def reconciled_call(event: InputEvent, ctx: RunnerContext) -> None:
    value = await ctx.durable_execute_async(
        PROBE.call, "charge", event.input["n"], reconciler=PROBE.reconciler()
    )
    ctx.send_event(OutputEvent(output=value))


@action(InputEvent)
async def variant_calls(event: InputEvent, ctx: RunnerContext) -> None:
    """Variant a: first(1), second(2). b: the order swapped. c: other arguments."""
    plan = {"a": [("first", 1), ("second", 2)], "b": [("second", 2), ("first", 1)]}
    plan["c"] = [("first", 1), ("second", 99)]
    seen = [await ctx.durable_execute_async(PROBE.call, n, v) for n, v in plan[PROBE.variant]]
    seen.append(await ctx.durable_execute_async(PROBE.call, "third", 0))
    ctx.send_event(OutputEvent(output=seen))


@action(InputEvent)
async def typed_and_failed(event: InputEvent, ctx: RunnerContext) -> None:
    reply = await ctx.durable_execute_async(_reply, "hi")
    point = await ctx.durable_execute_async(_point, 3)
    try:
        await ctx.durable_execute_async(_boom, "boom")
        failure = None
    except Exception as exc:
        failure = f"{type(exc).__name__}|{getattr(exc, 'error_type', '')}|{exc}"
    await ctx.durable_execute_async(PROBE.call, "third", 0)
    ctx.send_event(
        OutputEvent(
            output=[type(reply).__name__, reply.text, type(point).__name__, point.y, failure]
        )
    )


async def _reply(text: str) -> Reply:
    PROBE.counts["reply"] += 1
    return Reply(text=text)


async def _point(x: int) -> Point:
    PROBE.counts["point"] += 1
    return Point(x=x, y=x * 2)


async def _boom(message: str) -> None:
    PROBE.counts["boom"] += 1
    raise ValueError(message)


async def crash_mid_run(
    plan: AgentPlan,
    store: ActionStateStore,
    key: Any,
    value: Any,
    memory: dict[str, Any] | None = None,
    *,
    restoring: KeyState | None = None,
) -> KeyState:
    """Run ``value`` (the key's memory being ``memory``) until the held call starts, then throw
    the engine away; returns the key state a checkpoint would hold (the input still pending).

    With ``restoring`` (a checkpointed key state), the engine replays its pending input instead.
    """
    PROBE.reached = asyncio.Event()
    engine = Runtime.build(plan, store=store).engine
    engine.restore_key(key, restoring or KeyState(short_term_memory=memory or {}))
    if restoring is None:
        engine.submit(key, value)
    engine.pump()
    await asyncio.wait_for(PROBE.reached.wait(), 10)
    state = engine.snapshot_key(key)
    await engine.close()
    PROBE.hold = None
    return state


def yaml_plan(
    directory: Path, name: str, action_ref: str, subagent: str, class_ref: str, arguments: str
) -> AgentPlan:
    """The plan of a YAML agent ``name`` running ``action_ref`` with the sub-agent ``subagent``
    declared by class and (YAML flow-style) arguments."""
    path = directory / "agents.yaml"
    path.write_text(
        textwrap.dedent(f"""\
            agents:
              - name: {name}
                actions:
                  - function: {action_ref}
                subagents:
                  {subagent}:
                    class: {class_ref}
                    arguments: {arguments}
            """)
    )
    return compile_yaml(path, name)


def crash_then_replay(
    plan: AgentPlan,
    stores: Stores,
    value: Any,
    *,
    hold: str,
    key: Any = "k",
    then: Sequence[str] = (),
    between: Callable[[], Any] | None = None,
    replay_plan: AgentPlan | None = None,
) -> tuple[RunResult, KeyState]:
    """Run ``value`` until the ``hold`` call and crash; a replay crashes at each call of
    ``then`` in turn, each on a store restored from the checkpoint taken before the input. Then
    ``between`` is called and a last replay (with ``replay_plan``) finishes the run; returns its
    result and the checkpointed key state."""

    async def scenario() -> tuple[RunResult, KeyState]:
        PROBE.hold = hold
        state = await crash_mid_run(plan, stores.first, key, value)
        for held in then:
            PROBE.hold = held
            await crash_mid_run(plan, stores.restored(), key, None, restoring=state)
        PROBE.counts.clear()
        if between is not None:
            between()
        result, _ = await resume(replay_plan or plan, stores.restored(), key, state)
        return result, state

    return asyncio.run(scenario())
