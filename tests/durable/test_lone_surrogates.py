"""Strings with lone surrogates (what ``surrogateescape`` decoding leaves for bytes that are not
UTF-8: subprocess output, file names) in call results, call failures, run keys and inside an
internal sub-agent, through the real store path (``StoreCallRunner`` over the in-memory store
and over Kafka, the ``stores`` fixture): records keep them exactly (written as JSON escapes),
so a replay hands back the very same value; a model is shown them replaced by U+FFFD, the same
text live and replayed; nothing is reported as the runtime's error nor as the call's failure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from flink_agents.agents import ReActAgent
from flink_agents.api import (
    Agent,
    ChatModelSetup,
    InputEvent,
    OutputEvent,
    Prompt,
    ResourceDescriptor,
    RunnerContext,
    action,
)
from flink_agents.api.subagents.delegation import Subagent, SubagentResult
from flink_agents.durable.identity import canonical_json
from flink_agents.durable.store import ActionStateStore, CallStatus
from flink_agents.plan import compile_agent
from flink_agents.testing import Stores
from tests.durable.helpers import PROBE, crash_then_replay
from tests.sample_agents import RecordingChatConnection, add_scripted_connection
from tests.subagent_samples import add_subagents

NAME = "report-\udcff.txt"  # b"report-\xff.txt" decoded with surrogateescape
SHOWN = "report-\ufffd.txt"

pytestmark = pytest.mark.usefixtures("fresh_probe_and_requests")


def _calls(store: ActionStateStore, key: str) -> list[Any]:
    """The calls of the runs of ``key`` in the store's log (latest state last)."""
    return [
        call
        for state in store.history()
        if state.key.key == canonical_json(key)
        for call in state.calls
    ]


# --- a tool's failure and a tool's result -------------------------------------------------

TOOLS_RECORDED: list[ActionStateStore] = []


def unreadable(folder: str) -> str:
    """Read a file of the folder.

    Args:
        folder: Folder name.
    """
    PROBE.counts["unreadable"] += 1
    raise OSError(f"cannot read {folder}/{NAME}")


def listing(folder: str) -> str:
    """List the folder.

    Args:
        folder: Folder name.
    """
    PROBE.counts["listing"] += 1
    return NAME


async def held(folder: str) -> str:
    """Answer once the two calls beside it are recorded in the store's log (the test holds
    this one to crash the run).

    Args:
        folder: Folder name.
    """
    for _ in range(200):
        statuses = {c.function.rpartition(":")[2]: c.status for c in _calls(TOOLS_RECORDED[0], "k")}
        if statuses.get("unreadable") is CallStatus.FAILED and statuses.get("listing"):
            break
        await asyncio.sleep(0.05)
    return str(await PROBE.call("held", folder))


def test_a_tools_failure_and_result_read_the_same_live_and_replayed(stores: Stores) -> None:
    agent = ReActAgent(
        name="surrogate_tools",
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection="conn", model="m"),
        prompt=Prompt(text="{folder}"),
        tools=[unreadable, listing, held],
    )
    calls = [{"name": n, "arguments": {"folder": "$input"}} for n in ("unreadable", "listing")]
    turns = [
        {"tool_calls": [*calls, {"name": "held", "arguments": {"folder": "$input"}}]},
        {"content": "$last"},
    ]
    add_scripted_connection(agent, "surrogates", turns, connection=RecordingChatConnection)
    TOOLS_RECORDED[:] = [stores.first]

    result, _ = crash_then_replay(compile_agent(agent), stores, {"folder": "in"}, hold="held")

    assert result.outputs, result
    assert PROBE.counts == {"held": 1}  # both recorded outcomes handed back, not called again
    told = [m.content for m in RecordingChatConnection.requests[-1].messages if m.role == "tool"]
    assert told[:2] == [f"OSError: cannot read in/{SHOWN}", SHOWN], told
    # The store keeps the failure's message exactly; a replay's model text replaces it alike.
    failures = {
        c.error.message
        for c in _calls(stores.latest, "k")
        if c.status is CallStatus.FAILED and c.error is not None
    }
    assert failures == {f"cannot read in/{NAME}"}


# --- a durable call's value, under a run key with a lone surrogate ------------------------


@action(InputEvent)
async def list_then_hold(event: InputEvent, ctx: RunnerContext) -> None:
    value = await ctx.durable_execute_async(PROBE.call, "list", event.input)
    await ctx.durable_execute_async(PROBE.call, "after", 0)
    ctx.send_event(OutputEvent(output=value))


def test_a_value_and_a_key_with_lone_surrogates_replay_exactly(stores: Stores) -> None:
    plan = compile_agent(Agent(name="surrogate_values").add_action(list_then_hold))
    other = NAME.replace("\udcff", "\udcfe")  # another undecodable byte: another key
    result, _ = crash_then_replay(plan, stores, [NAME, other], hold="after", key=NAME)
    assert PROBE.counts == {"after": 1}  # "list" was handed back
    assert result.output_values == [[NAME, other]]
    assert canonical_json(NAME) != canonical_json(other)
    assert next(c.status for c in _calls(stores.latest, NAME)) is CallStatus.SUCCEEDED


# --- inside an internal sub-agent -----------------------------------------------------------

SEEN: list[SubagentResult[Any]] = []


@pytest.fixture(autouse=True)
def _seen() -> Iterator[None]:
    SEEN.clear()
    yield
    SEEN.clear()


class ListingChild(Agent):
    """An internal child whose durable call's value holds a lone surrogate."""

    @action(InputEvent)
    async def step(event: InputEvent, ctx: RunnerContext) -> None:
        value = await ctx.durable_execute_async(PROBE.call, "child", event.input)
        ctx.send_event(OutputEvent(output={"files": [value]}))


@action(InputEvent)
async def delegate_then_hold(event: InputEvent, ctx: RunnerContext) -> None:
    SEEN.append(await Subagent(ctx, "child").call(event.input))
    await ctx.durable_execute_async(PROBE.call, "after", 0)
    ctx.send_event(OutputEvent(output=SEEN[-1].result))


def test_a_lone_surrogate_inside_an_internal_sub_agent_is_its_result(stores: Stores) -> None:
    parent = add_subagents(Agent(name="surrogate_parent"), {"child": ListingChild(name="lister")})
    plan = compile_agent(parent.add_action(delegate_then_hold))
    result, _ = crash_then_replay(plan, stores, NAME, hold="after")
    live, replayed = SEEN
    assert live.success, live.reason
    assert live.result == [{"files": [NAME]}]  # the child's outputs
    assert replayed == live
    assert PROBE.counts == {"after": 1}  # the delegation was handed back
    assert result.output_values == [[{"files": [NAME]}]]
