"""RoutingChatModelConnection: a request goes to the connections of the first route that
matches it (input size, a field of the request or input, a classifier's label), asked in order
with fallback; the reply names the connection and model that answered, each decision is an
event-log record, and a replay hands the recorded answer back without asking anyone."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from flink_agents.api import ChatMessage
from flink_agents.api.chat import ChatRequest
from flink_agents.api.routing_rules import Classifier, Route
from flink_agents.observability import MetricsListener
from flink_agents.plan.compile import compile_agent
from flink_agents.plan.models import AgentPlan
from flink_agents.plan.yaml.loader import YamlAgentError, load_yaml_agents
from flink_agents.runtime.assembly import Runtime
from flink_agents.runtime.local import run_local
from flink_agents.testing import Stores
from tests.budget_samples import UsageServer
from tests.providers.fake_servers import FakeModelServer, RecordedRequest, ScriptedResponse
from tests.providers.openai_servers import OllamaOpenAIServer, ToolModel, VllmServer, completion
from tests.providers.routing_samples import Records, routed_plan


def outputs(results: list[Any]) -> list[Any]:
    return [value for result in results for value in result.output_values]


def test_small_inputs_go_to_the_small_model_and_large_ones_to_the_large() -> None:
    vllm = FakeModelServer(VllmServer(ToolModel(calls=[], answer="from vllm")))
    ollama = FakeModelServer(OllamaOpenAIServer(ToolModel(calls=[], answer="from ollama")))
    with vllm, ollama:
        plan = routed_plan(
            {"big": (f"{vllm.url}/v1", "llama-70b"), "small": (f"{ollama.url}/v1", "m")},
            connections=["big"],
            routes=[{"max_input_tokens": 20, "connections": ["small", "big"]}],
        )
        records = Records()
        inputs = [{"key": "k", "q": "short"}, {"key": "k", "q": "long " * 100}]
        results = run_local(plan, inputs, key="key", listeners=[records])
    assert outputs(results) == ["from ollama", "from vllm"]
    assert (ollama.request_count, vllm.request_count) == (1, 1)
    assert [(n.decision, n.target) for n in records.notes] == [
        ("routed", "small"),
        ("routed", "big"),
    ]
    assert records.notes[0].reason == "input of 6 estimated tokens <= 20"
    assert records.notes[1].reason == "no route matched"


def test_a_field_of_the_input_or_the_request_picks_the_route() -> None:
    with UsageServer() as gold, UsageServer() as standard:
        plan = routed_plan(
            {"gold": (gold.base_url, "big"), "standard": (standard.base_url, "small")},
            connections=["standard"],
            routes=[
                {"field": "input.tier", "one_of": ["gold", "platinum"], "connections": ["gold"]}
            ],
        )
        questions = [
            {"key": "k", "q": json.dumps({"tier": "gold", "text": "a"})},
            {"key": "k", "q": json.dumps({"tier": "free", "text": "b"})},
            {"key": "k", "q": "not JSON: no field"},
        ]
        run_local(plan, questions, key="key")
    assert (gold.by_model["big"], standard.by_model["small"]) == (1, 2)

    route = Route(field="request.extra.tier", equals="gold", connections=["gold"])
    request = ChatRequest(messages=[ChatMessage(role="user", content="x")], extra={"tier": "gold"})
    assert route.matches(request, tokens=1, label=None) == "request.extra.tier is 'gold'"
    assert route.matches(request.model_copy(update={"extra": {}}), tokens=1, label=None) is None


def classifier_server(request: RecordedRequest) -> ScriptedResponse:
    """A small model that labels a message 'billing' when it mentions an invoice."""
    text = request.json()["messages"][-1]["content"]
    return ScriptedResponse(body=completion(" Billing." if "invoice" in text else "other"))


def test_a_classifiers_label_routes_and_its_failure_falls_to_the_default() -> None:
    with (
        UsageServer() as billing,
        UsageServer() as general,
        FakeModelServer(classifier_server) as tiny,
    ):
        plan = routed_plan(
            {
                "billing": (billing.base_url, "billing-model"),
                "general": (general.base_url, "general-model"),
                "tiny": (f"{tiny.url}/v1", "tiny"),
            },
            connections=["general"],
            routes=[{"label": "billing", "connections": ["billing"]}],
            classifier={"connection": "tiny", "labels": ["billing", "other"]},
        )
        results = run_local(
            plan,
            [{"key": "k", "q": "my invoice is wrong"}, {"key": "k", "q": "hello"}],
            key="key",
        )
        assert outputs(results) == ["billing-model: my invoice is wrong", "general-model: hello"]
        classified = [r.json()["messages"] for r in tiny.requests]
        assert classified[0][0]["content"].endswith("labels and nothing else: billing, other.")
    assert Classifier(connection="c", labels=["a", "b"]).label_of("`B`.") == "b"


def test_the_primary_failing_moves_calls_down_the_routes_chain_and_says_so() -> None:
    with UsageServer(answers=1, refusal=503) as primary, UsageServer() as spare:
        plan = routed_plan(
            {"primary": (primary.base_url, "big"), "spare": (spare.base_url, "small")},
            connections=["primary", "spare"],
        )
        records, metrics = Records(), MetricsListener()
        inputs = [{"key": "k", "q": f"k/{i}"} for i in range(3)]
        results = run_local(plan, inputs, key="key", listeners=[records, metrics])
    assert outputs(results) == ["big: k/0", "small: k/1", "small: k/2"]
    assert (metrics.total("connections.routed"), metrics.total("connections.fallbacks")) == (3, 2)
    fallbacks = [n for n in records.notes if n.decision == "fallback"]
    assert [(n.target, n.seq) for n in fallbacks] == [("spare", 1), ("spare", 2)]
    assert "primary failed: ModelCallError" in fallbacks[0].reason


def test_a_replay_hands_back_the_recorded_connection_and_model_without_routing_again() -> None:
    stores = Stores.in_memory()

    async def scenario(plan: AgentPlan) -> tuple[list[Any], list[Any]]:
        engine = Runtime.build(plan, store=stores.first).engine
        for i in range(4):
            engine.submit("k", {"key": "k", "q": f"k/{i}"})
        checkpoint = engine.snapshot_key("k")
        await engine.drain()
        live = [r.output_values for r in engine.take_results()]
        await engine.close()
        engine = Runtime.build(plan, store=stores.restored()).engine
        engine.restore_key("k", checkpoint)
        await engine.drain()
        replayed = [r.output_values for r in engine.take_results()]
        await engine.close()
        return live, replayed

    with UsageServer(answers=2) as primary, UsageServer() as spare:
        plan = routed_plan(
            {"primary": (primary.base_url, "big"), "spare": (spare.base_url, "small")},
            connections=["primary", "spare"],
            routes=[{"max_input_tokens": 1, "connections": ["spare"]}],
        )
        live, replayed = asyncio.run(scenario(plan))
        asked = (primary.request_count, spare.request_count)
    assert sorted(map(str, replayed)) == sorted(map(str, live))
    assert asked == (4, 2)  # 2 answered + 2 refused, then 2 by the spare: none in the replay
    recorded = [
        call.value(ChatMessage)
        for key in stores.latest.state_keys()
        if (state := stores.latest.get(key)) is not None
        for call in state.calls
    ]
    assert sorted((r.connection, r.model) for r in recorded) == [
        ("primary", "big"),
        ("primary", "big"),
        ("spare", "small"),
        ("spare", "small"),
    ]
    stores.close()


ROUTED_YAML = """
agents:
  - name: routed
    react: {chat_model: assistant, prompt: question}
    prompts: {question: "{text}"}
    connections:
      small: {class: scripted, arguments: {turns: [{content: small}]}}
      big: {class: scripted, arguments: {turns: [{content: big}]}}
      router:
        class: router
        arguments:
          connections: [big]
          routes:
            - {max_input_tokens: 100, connections: [small, big]}
            - {label: urgent, connections: [big]}
    chat_models:
      assistant: {connection: router}
"""


def test_yaml_declares_a_router_and_compiling_the_plan_names_a_bad_route() -> None:
    with pytest.raises(YamlAgentError) as refused:
        _compiled(ROUTED_YAML)
    assert "routed.yaml:10:9: agents[0].connections.router: " in str(refused.value)
    assert "routes by label need a classifier" in str(refused.value)

    fixed = ROUTED_YAML.replace("            - {label: urgent, connections: [big]}\n", "")
    plan = _compiled(fixed)
    Runtime.build(plan).engine.open_resources()
    assert plan.resources["router"].class_path == (
        "flink_agents.providers.routing:RoutingChatModelConnection"
    )


def _compiled(text: str) -> AgentPlan:
    return compile_agent(load_yaml_agents("routed.yaml", text=text)["routed"])


@pytest.mark.parametrize(
    ("route", "message"),
    [
        ({"connections": ["a"]}, "exactly one of max_input_tokens, field or label"),
        ({"connections": ["a"], "max_input_tokens": 5, "label": "x"}, "exactly one of"),
        ({"connections": ["a"], "field": "input.tier"}, "needs exactly one of equals, one_of"),
        ({"connections": ["a"], "field": "tier", "equals": 1}, "should match pattern"),
        ({"connections": ["a"], "max_input_tokens": 5, "equals": 1}, "equals and one_of go with"),
        ({"connections": []}, "at least 1 item"),
    ],
)
def test_a_route_has_exactly_one_rule(route: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Route.model_validate(route)
