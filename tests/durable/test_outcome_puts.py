"""When a call's outcome is put into the store: at the end of the loop step that recorded it, or
with the action's completion when the action returns within that step (one put, not two)."""

import asyncio

from flink_agents.api import InputEvent, OutputEvent, RunnerContext, action
from flink_agents.durable.store import (
    ActionState,
    CallStatus,
    InMemoryActionStateStore,
    StoreWriteError,
)
from flink_agents.runtime import Runtime
from flink_agents.testing import agent_plan


class CountingStore(InMemoryActionStateStore):
    """Keeps what each put held: (completed, statuses of its calls)."""

    def __init__(self) -> None:
        super().__init__()
        self.puts: list[tuple[bool, list[CallStatus]]] = []

    def put(self, state: ActionState) -> None:
        self.puts.append((state.completed, [call.status for call in state.calls]))
        super().put(state)


STORE = CountingStore()  # the store of the test running now
PUTS_SEEN: list[int] = []


async def _echo(text: str) -> str:
    return text


@action(InputEvent)
async def call_and_return(event: InputEvent, ctx: RunnerContext) -> None:
    reply = await ctx.durable_execute_async(_echo, str(event.input))
    ctx.send_event(OutputEvent(output=reply))


@action(InputEvent)
async def call_then_wait(event: InputEvent, ctx: RunnerContext) -> None:
    reply = await ctx.durable_execute_async(_echo, str(event.input))
    PUTS_SEEN.append(len(STORE.puts))
    await asyncio.sleep(0)  # the loop steps on; the action has not returned
    PUTS_SEEN.append(len(STORE.puts))
    ctx.send_event(OutputEvent(output=reply))


def run(act: object, store: CountingStore | None = None) -> list[object]:
    """Runs one input through an agent of ``act``; returns its outputs."""
    global STORE
    STORE = store or CountingStore()
    PUTS_SEEN.clear()
    plan = agent_plan(act)
    engine = Runtime.build(plan, store=STORE).engine

    async def scenario() -> list[object]:
        engine.submit("k", "go")
        await engine.drain()
        return [value for result in engine.take_results() for value in result.output_values]

    outputs = asyncio.run(scenario())
    STORE.close()
    return outputs


def test_an_action_that_returns_in_the_step_of_its_outcome_puts_its_state_once():
    assert run(call_and_return) == ["go"]
    assert STORE.puts == [(True, [CallStatus.SUCCEEDED])]
    (recorded,) = STORE.history()
    assert recorded.completed and recorded.calls[0].value() == "go"


def test_an_outcome_is_put_by_the_end_of_its_step_while_the_action_goes_on():
    assert run(call_then_wait) == ["go"]
    assert PUTS_SEEN == [0, 1]  # not when the action got it; before its next step
    assert STORE.puts == [(False, [CallStatus.SUCCEEDED]), (True, [CallStatus.SUCCEEDED])]


@action(InputEvent)
async def two_calls(event: InputEvent, ctx: RunnerContext) -> None:
    first = await ctx.durable_execute_async(_echo, "one")
    PUTS_SEEN.append(len(STORE.puts))
    second = await ctx.durable_execute_async(_echo, "two")  # waits for the first outcome
    ctx.send_event(OutputEvent(output=[first, second]))


def test_an_outcome_is_put_before_the_runs_next_call_is_sent():
    assert run(two_calls) == [["one", "two"]]
    assert PUTS_SEEN == [0]
    # The first outcome was put before the second call went out; the second rode with the
    # completion.
    assert STORE.puts == [
        (False, [CallStatus.SUCCEEDED]),
        (True, [CallStatus.SUCCEEDED, CallStatus.SUCCEEDED]),
    ]


class FirstPutFails(CountingStore):
    """Refuses the first put (as a full buffer whose flush fails would)."""

    def put(self, state: ActionState) -> None:
        if not self.puts:
            self.puts.append((state.completed, []))
            raise StoreWriteError("not acknowledged")
        super().put(state)


def test_an_outcome_whose_put_failed_at_the_end_of_its_step_is_put_again_before_the_result():
    assert run(call_then_wait, FirstPutFails()) == ["go"]
    # The end-of-step put failed; the outcome rode with the completion, which the result
    # waited for.
    assert STORE.puts[1:] == [(True, [CallStatus.SUCCEEDED])]
    (recorded,) = STORE.history()
    assert recorded.completed and recorded.calls[0].value() == "go"
