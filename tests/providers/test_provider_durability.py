"""Every HTTP provider is durable the same way: a ReAct agent declared in YAML (by the provider's
short name) runs a tool round trip with the action-state store; the engine is thrown away while
the second model call is at the server; a new engine over the store finishes the run, sending
only the call that was in flight again, never the completed one."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from flink_agents.durable.runner import StoreCallRunner
from flink_agents.durable.store import ActionStateStore
from flink_agents.durable.store.config import StoreConfig
from flink_agents.plan import compile_agent
from flink_agents.plan.models import AgentPlan
from flink_agents.plan.yaml.loader import load_yaml_agents
from flink_agents.runtime import KeyState, RunEngine, RunResult
from tests.providers.fake_servers import FakeModelServer, ScriptedResponse
from tests.providers.providers import ANTHROPIC_KEY_VAR, GEMINI_KEY_VAR, PROVIDERS, Provider

SHORT_NAMES = {"openai-compatible": "openai"}
TEMPERATURE = "9"  # examples.weather knows Oslo
KEY_VARIABLES = {"anthropic": ANTHROPIC_KEY_VAR, "gemini": GEMINI_KEY_VAR}


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in KEY_VARIABLES.values():
        monkeypatch.setenv(variable, "test-key")


def yaml_plan(directory: Path, provider: Provider, url: str) -> AgentPlan:
    connection = provider.connect(url)
    arguments: dict[str, Any] = connection.model_dump(mode="json", exclude_unset=True)
    if provider.name in KEY_VARIABLES:
        arguments["api_key"] = {"env": KEY_VARIABLES[provider.name]}
    path = directory / "agent.yaml"
    # JSON is YAML: the connection's arguments as they are.
    path.write_text(f"""
agents:
  - name: weather
    react: {{chat_model: chat, prompt: ask, max_tool_rounds: 2}}
    prompts: {{ask: "{{city}}"}}
    tools:
      get_temperature: {{function: examples.weather:get_temperature}}
    connections:
      llm:
        class: {SHORT_NAMES.get(provider.name, provider.name)}
        arguments: {json.dumps(arguments)}
    chat_models:
      chat: {{connection: llm, model: m, tools: [get_temperature]}}
""")
    (agent,) = load_yaml_agents(path).values()
    return compile_agent(agent)


async def crash_during_the_second_call(
    plan: AgentPlan, store: ActionStateStore, server: FakeModelServer
) -> KeyState:
    engine = RunEngine(plan, call_runner=StoreCallRunner(store, agent=plan.name))
    engine.restore_key("Oslo", KeyState())
    engine.submit("Oslo", {"city": "Oslo"})
    engine.pump()
    for _ in range(400):
        if server.request_count == 2:
            break
        await asyncio.sleep(0.025)
    else:
        raise AssertionError(f"the second call never reached the server: {server.requests}")
    state = engine.snapshot_key("Oslo")
    await engine.close()
    return state


async def finish(plan: AgentPlan, store: ActionStateStore, state: KeyState) -> RunResult:
    engine = RunEngine(plan, call_runner=StoreCallRunner.for_plan(store, plan.name, plan.config))
    engine.restore_key("Oslo", state)
    try:
        await engine.drain()
        [result] = engine.take_results()
        return result
    finally:
        await engine.close()


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda p: p.name)
def test_after_a_crash_only_the_call_in_flight_is_sent_again(
    provider: Provider, server: FakeModelServer, tmp_path: Path
) -> None:
    server.enqueue(
        ScriptedResponse(body=provider.tool_call("call_1", "get_temperature", {"city": "Oslo"})),
        # Still being answered when the engine is thrown away.
        ScriptedResponse(body=provider.text("never read"), delay_seconds=2.0),
        ScriptedResponse(body=provider.text("Oslo: 9 degrees, wear a coat.")),
    )
    plan = yaml_plan(tmp_path, provider, server.url)
    store = StoreConfig().build()

    async def scenario() -> RunResult:
        state = await crash_during_the_second_call(plan, store, server)
        return await finish(plan, store, state)

    try:
        result = asyncio.run(scenario())
    finally:
        store.close()

    assert result.output_values == ["Oslo: 9 degrees, wear a coat."]
    assert server.request_count == 3  # the completed first call was not sent again
    _, in_flight, resent = (request.json() for request in server.requests)
    assert in_flight == resent  # the same call, sent again
    reference = provider.result_reference("call_1", "get_temperature")
    assert provider.tool_result(resent) == (reference, TEMPERATURE)
