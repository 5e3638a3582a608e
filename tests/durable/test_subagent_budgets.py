"""Budgets declared on an internal sub-agent meter the calls made while it runs, per key and
per agent, through the real store path (the in-memory log and Kafka); the top agent's budgets
still count every call, and both counters are derived from the spend recorded with the calls,
so a replay from a checkpoint ends with the same counters and sends nothing again
(docs/budgets.md, "Budgets of a sub-agent")."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from flink_agents.api import Agent, ChatMessage, InputEvent, OutputEvent, RunnerContext, action
from flink_agents.api.budgets import Budget, Budgets
from flink_agents.api.chat_models import ChatModelSetup
from flink_agents.api.resources import ResourceType
from flink_agents.api.subagents.delegation import Subagent
from flink_agents.durable.store import CallStatus
from flink_agents.durable.store.inspect import key_states
from flink_agents.plan.compile import compile_agent
from flink_agents.plan.models import AgentPlan
from flink_agents.runtime.assembly import Runtime
from flink_agents.runtime.budget_meter import KeySpend
from flink_agents.runtime.engine import RunResult
from flink_agents.testing import Stores
from flink_agents.testing.harness import CallLog, CountingProbe
from tests.budget_samples import CALL_TOKENS, MAX_TOKENS, UsageServer, ask

KEY = "k0"


@action(InputEvent)
async def ask_then_delegate(event: InputEvent, ctx: RunnerContext) -> None:
    """Ask the model once (``k0/own-i``), then have the researcher ask it (``k0-res/i``)."""
    model = cast(ChatModelSetup, ctx.get_resource("model", ResourceType.CHAT_MODEL))
    n = event.input["n"]
    own = await ctx.durable_execute_async(
        model.chat,
        [ChatMessage(role="user", content=f"{KEY}/own-{n}")],
        call_id="own",
        result_type=ChatMessage,
    )
    research = await Subagent(ctx, "research").call({"q": f"{KEY}-res/{n}"})
    ctx.send_event(
        OutputEvent(
            output={"own": own.content, "research": research.success, "why": research.reason}
        )
    )


@action(InputEvent)
async def ask_twice(event: InputEvent, ctx: RunnerContext) -> None:
    """Ask the model the input's question twice, one call after the other."""
    model = cast(ChatModelSetup, ctx.get_resource("model", ResourceType.CHAT_MODEL))
    for i in range(2):
        question = ChatMessage(role="user", content=f"{event.input['q']}-{i}")
        await ctx.durable_execute_async(
            model.chat, [question], call_id=f"chat-{i}", result_type=ChatMessage
        )
    ctx.send_event(OutputEvent(output="asked twice"))


@action(InputEvent)
async def delegate_then_ask(event: InputEvent, ctx: RunnerContext) -> None:
    """Have the researcher ask (``k0-res/n``), then ask the model once (``k0/own-n``)."""
    model = cast(ChatModelSetup, ctx.get_resource("model", ResourceType.CHAT_MODEL))
    research = await Subagent(ctx, "research").call({"q": f"{KEY}-res/{event.input['n']}"})
    own = await ctx.durable_execute_async(
        model.chat,
        [ChatMessage(role="user", content=f"{KEY}/own-{event.input['n']}")],
        call_id="own",
        result_type=ChatMessage,
    )
    ctx.send_event(OutputEvent(output={"own": own.content, "research": research.success}))


def desk_plan(
    base_url: str,
    top: list[Budget],
    researcher: list[Budget],
    child_action: Any = ask,
    desk_action: Any = ask_then_delegate,
) -> AgentPlan:
    """A desk asking model ``big`` and delegating to a researcher (agent ``researcher``,
    registered as ``research``) that asks it through the desk's chat model."""
    child = Agent(name="researcher")
    child.add_action(child_action)
    child.budgets = Budgets(limits=researcher)
    desk = Agent(name="desk", error_policy="emit")
    desk.add_action(desk_action)
    desk.add_resource(
        "llm",
        ResourceType.CHAT_MODEL_CONNECTION,
        "flink_agents.providers.openai_compatible:OpenAICompatibleChatModelConnection",
        base_url=base_url,
    )
    desk.add_resource(
        "model",
        ResourceType.CHAT_MODEL,
        ChatModelSetup,
        connection="llm",
        model="big",
        max_tokens=MAX_TOKENS,
    )
    desk.add_subagent("research", child, description="Researches a question.")
    desk.budgets = Budgets(limits=top) if top else None
    return compile_agent(desk)


async def _run(plan: AgentPlan, store: Any, inputs: range) -> tuple[list[RunResult], KeySpend]:
    engine = Runtime.build(plan, store=store).engine
    for n in inputs:
        engine.submit(KEY, {"n": n}, n)
    await engine.drain()
    results = engine.take_results()
    spend = engine.snapshot_key(KEY).spend
    await engine.close()
    assert spend is not None
    return results, spend


def test_a_subagents_budget_refuses_its_calls_and_counts_on_after_a_restart(
    stores: Stores,
) -> None:
    """Researcher cap 3 calls: inputs 0-1 in one engine, 2-4 in the next (the key's state
    and the store restored): the desk's own calls all go, the researcher's stop at 3."""

    async def scenario(server: UsageServer) -> tuple[list[RunResult], KeySpend]:
        plan = desk_plan(server.base_url, [], [Budget(name="cap", tokens=3 * CALL_TOKENS)])
        engine = Runtime.build(plan, store=stores.first).engine
        for n in range(2):
            engine.submit(KEY, {"n": n}, n)
        await engine.drain()
        first = engine.take_results()
        state = engine.snapshot_key(KEY)
        await engine.close()
        engine = Runtime.build(plan, store=stores.restored()).engine
        engine.restore_key(KEY, state)
        for n in range(2, 5):
            engine.submit(KEY, {"n": n}, n)
        await engine.drain()
        results = first + engine.take_results()
        spend = engine.snapshot_key(KEY).spend
        await engine.close()
        assert spend is not None
        return results, spend

    with UsageServer() as server:
        results, spend = asyncio.run(scenario(server))
    assert server.by_key == {KEY: 5, f"{KEY}-res": 3}
    outputs = [r.output_values[0] for r in sorted(results, key=lambda r: r.run_id.seq)]
    assert [o["research"] for o in outputs] == [True, True, True, False, False]
    assert "budget 'researcher/cap' exhausted" in outputs[3]["why"]
    assert spend.total.tokens == 8 * CALL_TOKENS  # the key's: every call
    assert spend.agents["researcher"].total.tokens == 3 * CALL_TOKENS
    recorded = [
        call.spend
        for state in key_states(stores.latest, f'"{KEY}"')
        for call in state.calls
        if call.status is CallStatus.SUCCEEDED and call.spend is not None
    ]
    calls = [s for s in recorded if not s.nested]
    assert sorted(s.agents for s in calls) == [[]] * 5 + [["researcher"]] * 3
    # Each delegation keeps what its researcher's call spent: one call, or none (refused).
    delegations = [s for s in recorded if s.nested]
    assert [[n.tokens for n in s.nested] for s in delegations] == [[CALL_TOKENS]] * 3


def test_a_replay_from_a_checkpoint_ends_with_the_same_counters_and_sends_nothing(
    stores: Stores,
) -> None:
    """Checkpointed with every input pending, run to the end; restored, every run replays
    from its records: no request, the same outputs, the key's and the researcher's spend.
    The researcher asks twice a delegation under a cap of 3 calls: the second delegation
    fails after one call, and its failure's record keeps that call's spend."""

    async def scenario(server: UsageServer) -> tuple[Any, Any, int]:
        cap = [Budget(name="cap", tokens=3 * CALL_TOKENS)]
        plan = desk_plan(server.base_url, [], cap, child_action=ask_twice)
        engine = Runtime.build(plan, store=stores.first).engine
        for n in range(4):
            engine.submit(KEY, {"n": n}, n)
        checkpoint = engine.snapshot_key(KEY)
        await engine.drain()
        live = {r.run_id.seq: r.output_values for r in engine.take_results()}
        live_spend = engine.snapshot_key(KEY).spend
        await engine.close()
        sent = sum(server.by_key.values())
        engine = Runtime.build(plan, store=stores.restored()).engine
        engine.restore_key(KEY, checkpoint)
        await engine.drain()
        replayed = {r.run_id.seq: r.output_values for r in engine.take_results()}
        replay_spend = engine.snapshot_key(KEY).spend
        await engine.close()
        assert replayed == live
        return live_spend, replay_spend, sum(server.by_key.values()) - sent

    with UsageServer() as server:
        live_spend, replay_spend, sent_again = asyncio.run(scenario(server))
    assert sent_again == 0
    assert replay_spend == live_spend
    assert replay_spend.agents["researcher"].total.tokens == 3 * CALL_TOKENS
    assert replay_spend.total.tokens == 7 * CALL_TOKENS


def test_the_top_agents_budget_counts_the_subagents_calls(stores: Stores) -> None:
    """Desk cap 5 calls, researcher cap 10: own, research, own, research, own (5); the third
    research is refused by the desk's budget, the fourth input's own call ends its run."""
    with UsageServer() as server:
        plan = desk_plan(
            server.base_url,
            [Budget(name="cap", tokens=5 * CALL_TOKENS)],
            [Budget(name="cap", tokens=10 * CALL_TOKENS)],
        )
        results, spend = asyncio.run(_run(plan, stores.first, range(4)))
    assert server.by_key == {KEY: 3, f"{KEY}-res": 2}
    by_seq = {r.run_id.seq: r for r in results}
    assert "budget 'cap' exhausted" in by_seq[2].output_values[0]["why"]
    error = by_seq[3].error
    assert error is not None and error.error_type == "BudgetExceeded"
    assert spend.total.tokens == 5 * CALL_TOKENS
    assert spend.agents["researcher"].total.tokens == 2 * CALL_TOKENS


def test_a_failed_delegation_handed_back_in_a_rerun_action_counts_its_calls(
    stores: Stores,
) -> None:
    """The researcher asks twice under a cap of 1 call: the delegation fails after one call
    and is recorded so; the desk's own call after it is lost in a crash. The restored engine
    runs the action again: the failed delegation is handed back from its record (the
    researcher does not run again) and its call still counts, for the key and the researcher."""

    async def scenario(server: UsageServer) -> KeySpend:
        plan = desk_plan(
            server.base_url,
            [],
            [Budget(name="cap", tokens=CALL_TOKENS)],
            child_action=ask_twice,
            desk_action=delegate_then_ask,
        )
        probe = CountingProbe(CallLog(), lambda call: call.identity.call_id == "own")
        engine = Runtime.build(plan, store=stores.first, probe=probe).engine
        engine.submit(KEY, {"n": 0}, 0)
        checkpoint = engine.snapshot_key(KEY)  # the input pending
        drained = asyncio.ensure_future(engine.drain())
        await probe.crashed.wait()
        drained.cancel()
        await engine.close()
        engine = Runtime.build(plan, store=stores.restored()).engine
        engine.restore_key(KEY, checkpoint)
        await engine.drain()
        [result] = engine.take_results()
        assert result.output_values == [{"own": f"big: {KEY}/own-0", "research": False}]
        spend = engine.snapshot_key(KEY).spend
        await engine.close()
        assert spend is not None
        return spend

    with UsageServer() as server:
        spend = asyncio.run(scenario(server))
    assert server.by_key == {f"{KEY}-res": 1, KEY: 1}  # the own call reached it after the crash
    assert spend.agents["researcher"].total.tokens == CALL_TOKENS
    assert spend.total.tokens == 2 * CALL_TOKENS
