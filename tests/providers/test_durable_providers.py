"""Azure OpenAI, the Responses API, vLLM, Gemini and Bedrock declared in YAML by their short
names: a ReAct tool round trip through the plan, the resource registry and the engine, and a
crash in the middle of it that the durable store heals without sending the completed model call
again."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from flink_agents.durable.store import InMemoryActionStateStore
from flink_agents.plan.models import AgentPlan
from flink_agents.runtime import KeyState, Runtime, run_local
from tests.providers.fake_servers import FakeModelServer, ScriptedResponse
from tests.providers.providers import (
    AZURE_OPENAI,
    BEDROCK,
    GEMINI,
    GEMINI_KEY_VAR,
    OPENAI_RESPONSES,
    VLLM,
    Provider,
)
from tests.providers.react_yaml import INPUTS, QUESTION, TOOL_RESULT, react_plan

KEY_VAR = "FA_TEST_AZURE_KEY"
ENVIRON = {KEY_VAR: "azure-test-key", GEMINI_KEY_VAR: "gemini-test-key"}
ANSWER = "Flink is a stream processor."

# alias -> (protocol adapter, the YAML arguments besides base_url)
ALIASES: dict[str, tuple[Provider, dict[str, Any]]] = {
    "azure_openai": (AZURE_OPENAI, {"deployment": "m", "api_key": {"env": KEY_VAR}}),
    "openai_responses": (OPENAI_RESPONSES, {}),
    "vllm": (VLLM, {}),
    "gemini": (GEMINI, {"api_key": {"env": GEMINI_KEY_VAR}}),
    # AWS credentials: boto3's chain, here the test's environment (conftest.py).
    "bedrock": (BEDROCK, {"region": "us-east-1"}),
}


@pytest.fixture(autouse=True)
def _environ(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable, value in ENVIRON.items():  # for connections built in the test itself
        monkeypatch.setenv(variable, value)


@pytest.fixture(params=sorted(ALIASES))
def alias(request: pytest.FixtureRequest) -> str:
    return request.param


def plan_for(alias: str, server: FakeModelServer, directory: Path) -> AgentPlan:
    provider, arguments = ALIASES[alias]
    base_url = server.url + provider.base_path
    return react_plan(
        directory, alias, {"base_url": base_url, "retry": {"max_attempts": 3}, **arguments}
    )


def test_yaml_react_agent_completes_a_tool_round_trip(
    alias: str, server: FakeModelServer, tmp_path: Path
) -> None:
    provider, _ = ALIASES[alias]
    server.enqueue(
        ScriptedResponse(body=provider.tool_call("call_1", "lookup", {"word": "flink"})),
        ScriptedResponse(body=provider.text(ANSWER)),
    )
    plan = plan_for(alias, server, tmp_path)
    assert plan.resources["llm"].class_path.endswith(type(provider.connect("x")).__name__)

    (result,) = run_local(plan, INPUTS, key="id", environ=ENVIRON)

    assert result.output_values == [ANSWER]
    first, second = (r.json() for r in server.requests)
    assert all(r.route == provider.path for r in server.requests)
    assert provider.offered_tools(first) == ["lookup"]
    assert QUESTION in str(first)
    assert provider.tool_result(second) == (
        provider.result_reference("call_1", "lookup"),
        TOOL_RESULT,
    )


async def _crash_during_second_call(
    plan: AgentPlan, store: InMemoryActionStateStore, server: FakeModelServer
) -> KeyState:
    engine = Runtime.build(plan, store=store, environ=ENVIRON).engine
    engine.restore_key(1, KeyState())
    engine.submit(1, INPUTS[0])
    engine.pump()
    deadline = time.monotonic() + 10
    while server.request_count < 2:
        assert time.monotonic() < deadline, "the second model call never reached the server"
        await asyncio.sleep(0.02)
    state = engine.snapshot_key(1)
    await engine.close()
    return state


async def _finish(plan: AgentPlan, store: InMemoryActionStateStore, state: KeyState) -> list[Any]:
    engine = Runtime.build(plan, store=store, environ=ENVIRON).engine
    engine.restore_key(1, state)
    try:
        await engine.drain()
        (result,) = engine.take_results()
        return result.output_values
    finally:
        await engine.close()


def test_a_crash_mid_conversation_does_not_send_the_completed_call_again(
    alias: str, server: FakeModelServer, tmp_path: Path
) -> None:
    provider, _ = ALIASES[alias]
    server.enqueue(
        ScriptedResponse(body=provider.tool_call("call_1", "lookup", {"word": "flink"})),
        # The engine is thrown away while this one is being answered.
        ScriptedResponse(body=provider.text("never read"), delay_seconds=3.0),
        ScriptedResponse(body=provider.text(ANSWER)),
    )
    plan = plan_for(alias, server, tmp_path)
    store = InMemoryActionStateStore()

    state = asyncio.run(_crash_during_second_call(plan, store, server))
    outputs = asyncio.run(_finish(plan, store, state))

    assert outputs == [ANSWER]
    assert server.request_count == 3
    bodies = [r.json() for r in server.requests]
    # Only the first request asks without a tool result: the tool-call reply came from the store.
    with_result = [TOOL_RESULT in str(body) for body in bodies]
    assert with_result == [False, True, True]
    assert bodies[1] == bodies[2]  # the interrupted call, sent again as it was
