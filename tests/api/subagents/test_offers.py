"""Sub-agents as callable tools of a chat model (seed ``000``): each contract pinned by a test.

| #  | Contract                                                  | Test                   |
|----|-----------------------------------------------------------|------------------------|
| 1  | one ``subagent_<name>`` per usable sub-agent, after the   | test_c01_one_callable  |
|    | tools, with its description and schema                    |                        |
| 2  | no schema / no object-shaped input type: not offered,     | test_c02_skipped       |
|    | warned by name; the others are still offered             |                        |
| 3  | descriptions end with the marker; undescribed: a generic  | test_c03_marker        |
|    | one; no listing message is injected                       |                        |
| 4  | explicit schema wins, else derived from the input type    | test_c04_schema        |
| 5  | a tool and a sub-agent share a name; each callable        | test_c05_shared_name   |
|    | resolves in exactly one namespace (a tool by the name it  | (both halves), test_   |
|    | is offered as, not its resource name)                     | tools_are_dispatched_* |
| 6  | a tool under the reserved prefix: rejected at plan build  | test_c06_*             |
|    | (also through its function's name), or at open()          |                        |
| 7  | the model's arguments are handed over unchanged           | test_c07_arguments     |
| 8  | JSON-generic success; a declared result type narrows it   | test_c08_narrowing     |
|    | (extras ignored), an undeclared one is taken as it came   |                        |
| 9  | a result JSON cannot express: refused with its path, a    | test_c09_not_json      |
|    | failed delegation                                         |                        |
| 10 | a failed delegation reaches the model with the reason     | test_c10_failure       |
| 11 | re-opening rebuilds the callables without duplicates      | test_c11_reopen        |
| 12 | Python and YAML decide alike                              | tests/plan/            |
|    |                                                           | test_subagent_plans.py |

Also: an unusable entry fails ``open()`` (test_unusable_entries_fail_open), an unknown
``subagent_x`` call and malformed arguments come back as failed delegations.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from flink_agents.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    FunctionTool,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    Tool,
    ToolResponseEvent,
    ToolSpec,
    action,
)
from flink_agents.api.subagents.delegation import DELEGATION_MARKER, SUBAGENT_TOOL_PREFIX
from flink_agents.plan import AgentPlan, PlanValidationError, compile_agent, resolve_plan
from flink_agents.providers.scripted import ScriptedChatModelConnection
from flink_agents.runtime import ResourceRegistry, run_local
from tests.sample_agents import add, fail_on_negative
from tests.subagent_samples import FakeSubagent, NotASubagent, model_agent

FAKE = "tests.subagent_samples:FakeSubagent"


def _fake(**arguments: Any) -> ResourceDescriptor:
    return ResourceDescriptor.of(FAKE, **arguments)


def _schema(*fields: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": "string"} for name in fields},
        "required": list(fields),
    }


def _agent_with(subagents: dict[str, ResourceDescriptor], offered: list[str] | None = None):
    agent = Agent(name="offering")
    agent.add_tool(add)
    agent.add_resource(
        "conn",
        ResourceType.CHAT_MODEL_CONNECTION,
        ScriptedChatModelConnection,
        turns=[{"content": "unused"}],
    )
    agent.add_resource(
        "chat_model",
        ResourceType.CHAT_MODEL,
        ChatModelSetup,
        connection="conn",
        tools=["add"],
        subagents=list(subagents) if offered is None else offered,
    )
    for name, descriptor in subagents.items():
        agent.add_resource(name, ResourceType.AGENT, descriptor)
    agent.add_action(fail_on_negative)  # a plan needs an action; this one never runs here
    return agent


def _offering_tools(agent: Agent, tools: list[str]) -> AgentPlan:
    """``agent``'s plan, its chat model offering the tool resources ``tools``."""
    plan = compile_agent(agent)
    chat = plan.resources["chat_model"]
    plan.resources["chat_model"] = chat.model_copy(
        update={"arguments": {**chat.arguments, "tools": tools}}
    )
    return plan


def _open(agent: Agent) -> ChatModelSetup:
    registry = ResourceRegistry(resolve_plan(compile_agent(agent)))
    model = registry.get("chat_model", ResourceType.CHAT_MODEL)
    assert isinstance(model, ChatModelSetup)
    return model


def _delegate(
    name: str,
    subagents: dict[str, ResourceDescriptor],
    calls: list[dict[str, Any]],
    offered: list[str] | None = None,
) -> str:
    """Run a model that makes ``calls`` then answers with the last tool message; the answer."""
    ScriptedChatModelConnection.reset_stats(name)
    turns = [{"tool_calls": calls}, {"content": "$last"}]
    agent = model_agent(name, turns, subagents=list(subagents) if offered is None else offered)
    for sub, descriptor in subagents.items():
        agent.add_resource(sub, ResourceType.AGENT, descriptor)
    [result] = run_local(agent, ["go"], key=lambda _: "k")
    assert result.error is None
    [answer] = result.output_values
    return answer


@pytest.fixture(autouse=True)
def _reset():
    FakeSubagent.reset()


def test_c01_one_callable():
    model = _open(
        _agent_with(
            {
                "reviewer": _fake(description="Reviews.", input_schema=_schema("text")),
                "coder": _fake(input_schema=_schema("task")),
            }
        )
    )
    tools = model.request([ChatMessage(role="user", content="hi")]).tools
    assert [t.name for t in tools] == ["add", "subagent_reviewer", "subagent_coder"]
    assert tools[1].description == f"Reviews. {DELEGATION_MARKER}"
    assert tools[1].parameters == _schema("text")


def test_c02_skipped(caplog):
    with caplog.at_level(logging.WARNING):
        model = _open(
            _agent_with(
                {
                    "shapeless": _fake(),
                    "coder": _fake(input_type="builtins:str"),
                    "ok": _fake(input_schema=_schema("x")),
                }
            )
        )
    names = [t.name for t in model.request([]).tools]
    assert names == ["add", "subagent_ok"]
    assert set(model.subagent_offer.skipped) == {"shapeless", "coder"}
    assert "'shapeless' is not offered" in caplog.text and "'coder' is not offered" in caplog.text


def test_c03_marker():
    model = _open(
        _agent_with(
            {
                "a": _fake(description="Does A.", input_schema=_schema("x")),
                "b": _fake(input_schema=_schema("x")),
            }
        )
    )
    messages = [ChatMessage(role="user", content="hi")]
    request = model.request(messages)
    described = {t.name: t.description for t in request.tools if t.name != "add"}
    assert all(text.endswith(DELEGATION_MARKER) for text in described.values())
    assert described["subagent_b"] == f"Delegates a task to the sub-agent 'b'. {DELEGATION_MARKER}"
    assert request.messages == messages  # no listing message


def test_c04_schema():
    model = _open(
        _agent_with(
            {
                "explicit": _fake(
                    input_schema=_schema("override"),
                    input_type="tests.subagent_samples:ReviewInput",
                ),
                "derived": _fake(input_type="tests.subagent_samples:ReviewInput"),
            }
        )
    )
    specs = {t.name: t.parameters for t in model.request([]).tools}
    assert specs["subagent_explicit"] == _schema("override")
    assert specs["subagent_derived"]["properties"] == {"text": {"title": "Text", "type": "string"}}
    assert specs["subagent_derived"]["required"] == ["text"]


def test_c05_shared_name():
    # Resource names are one namespace per plan here, so the tool resource has its own name
    # and offers the callable "reviewer"; the sub-agent "reviewer" is offered as
    # "subagent_reviewer". Each callable resolves in exactly one namespace.
    name = "c05"
    ScriptedChatModelConnection.reset_stats(name)
    turns = [
        {
            "tool_calls": [
                {"name": "reviewer", "arguments": {"a": 1, "b": 2}},
                {"name": "subagent_reviewer", "arguments": {"text": "t"}},
            ]
        },
        {"content": "$last"},
    ]
    agent = model_agent(name, turns, subagents=["reviewer"])
    agent.add_resource(
        "reviewer_tool",
        ResourceType.TOOL,
        FunctionTool,
        function="tests.sample_agents:add",
        name="reviewer",
    )
    agent.add_resource("reviewer", ResourceType.AGENT, _fake(input_schema=_schema("text")))
    agent.add_action(report_tool_results)
    plan = _offering_tools(agent, ["reviewer_tool"])
    [result] = run_local(plan, ["go"], key=lambda _: "k")
    delegated = '{"echo": {"text": "t"}}'
    # "reviewer" ran the tool (1 + 2), "subagent_reviewer" the sub-agent; then the answer.
    assert result.output_values == [["3", delegated], delegated]
    assert FakeSubagent.calls["fake"] == 1


@action(ToolResponseEvent)
def report_tool_results(event: ToolResponseEvent, ctx: RunnerContext) -> None:
    """Emits what the model is handed back, one entry per tool call, with errors marked."""
    ctx.send_event(
        OutputEvent(
            output=[f"error: {r.content}" if r.is_error else r.content for r in event.results]
        )
    )


def test_tools_are_dispatched_by_the_name_the_model_is_offered():
    agent = _agent_with({})
    agent.add_tool(add, name="plus")  # resource "plus" offered as "plus"
    agent.add_resource(
        "adder", ResourceType.TOOL, FunctionTool, function="tests.sample_agents:add", name="sum"
    )
    plan = _offering_tools(agent, ["add", "adder"])
    model = ResourceRegistry(resolve_plan(plan)).get("chat_model", ResourceType.CHAT_MODEL)
    assert isinstance(model, ChatModelSetup)
    assert [t.name for t in model.request([]).tools] == ["add", "sum"]
    assert model.tool("sum").spec().name == "sum"
    with pytest.raises(LookupError, match="does not offer tool 'adder'"):
        model.tool("adder")  # the resource name is not what the model calls


def test_two_tools_offered_under_one_name_fail_open():
    agent = _agent_with({})
    agent.add_resource(
        "adder", ResourceType.TOOL, FunctionTool, function="tests.sample_agents:add", name="add"
    )
    plan = _offering_tools(agent, ["add", "adder"])
    with pytest.raises(ValueError, match="tools 'add' and 'adder' are both offered as 'add'"):
        ResourceRegistry(resolve_plan(plan)).get("chat_model", ResourceType.CHAT_MODEL)


def subagent_sneaky() -> None:
    """A function whose own name would put its tool under the reserved prefix."""


class SneakyTool(Tool):
    """A tool offered under the reserved prefix whatever its resource name."""

    def spec(self) -> ToolSpec:
        return ToolSpec(name="subagent_rev", description="Not allowed.", parameters={})


def test_c06_reserved():
    with pytest.raises(ValueError, match="reserved for sub-agent callables"):
        Agent().add_tool(add, name=f"{SUBAGENT_TOOL_PREFIX}sneaky")
    with pytest.raises(ValueError, match="reserved"):
        Agent().add_tool(subagent_sneaky)
    plan = compile_agent(_agent_with({})).to_dict()
    plan["resources"]["subagent_x"] = {"type": "tool", "class": "m:T", "arguments": {}}
    with pytest.raises(PlanValidationError, match="reserved for sub-agent callables"):
        AgentPlan.from_dict(plan)


def test_c06_a_function_named_under_the_prefix_is_refused_when_the_plan_is_built():
    agent = _agent_with({})
    function = "tests.api.subagents.test_offers:subagent_sneaky"
    agent.add_resource("sneak", ResourceType.TOOL, FunctionTool, function=function)
    with pytest.raises(
        PlanValidationError, match=r"tool 'sneak' would be offered as 'subagent_sneaky'"
    ):
        compile_agent(agent)
    agent = _agent_with({})
    agent.add_resource("fine", ResourceType.TOOL, FunctionTool, function=function, name="fine")
    compile_agent(agent)  # offered as "fine": the function's own name does not matter


def test_c06_a_tool_offered_under_the_prefix_fails_open():
    agent = _agent_with({})
    agent.add_resource("sneak", ResourceType.TOOL, "tests.api.subagents.test_offers:SneakyTool")
    plan = _offering_tools(agent, ["add", "sneak"])
    with pytest.raises(ValueError, match=r"tool 'sneak' is offered as 'subagent_rev'.*reserved"):
        ResourceRegistry(resolve_plan(plan)).get("chat_model", ResourceType.CHAT_MODEL)


def test_c07_arguments():
    arguments = {"text": "hello", "extra": [1, {"deep": True}], "n": 2.5}
    _delegate(
        "c07",
        {"rev": _fake(input_schema=_schema("text"))},
        [{"name": "subagent_rev", "arguments": arguments}],
    )
    [request] = FakeSubagent.requests["fake"]
    assert request.input == arguments


def test_c08_narrowing():
    narrowed = _delegate(
        "c08a",
        {
            "rev": _fake(
                mode="review",
                input_schema=_schema("x"),
                result_type="tests.subagent_samples:Review",
            )
        },
        [{"name": "subagent_rev", "arguments": {"x": "1"}}],
    )
    assert json.loads(narrowed) == {"verdict": "approve", "score": 7}
    as_is = _delegate(
        "c08b",
        {"rev": _fake(mode="review", input_schema=_schema("x"))},
        [{"name": "subagent_rev", "arguments": {"x": "1"}}],
    )
    assert json.loads(as_is) == {"verdict": "approve", "score": 7, "extra": "ignored"}


def test_c09_not_json():
    answer = _delegate(
        "c09a",
        {"rev": _fake(mode="set", input_schema=_schema("x"))},
        [{"name": "subagent_rev", "arguments": {"x": "1"}}],
    )
    assert answer.startswith("delegation to sub-agent 'rev' failed: NotJsonError")
    assert "$.tags[1].inner" in answer
    answer = _delegate(
        "c09b",
        {"rev": _fake(mode="nan", input_schema=_schema("x"))},
        [{"name": "subagent_rev", "arguments": {"x": "1"}}],
    )
    assert "not a JSON value at $.score" in answer


def test_c10_failure():
    answer = _delegate(
        "c10",
        {"rev": _fake(mode="raise", input_schema=_schema("x"))},
        [{"name": "subagent_rev", "arguments": {"x": "1"}}],
    )
    # The model gets the reason (the summary line), not the frames that follow it.
    assert answer == "delegation to sub-agent 'rev' failed: RuntimeError: boom " + "x" * 3_000


def test_c11_reopen():
    model = _open(_agent_with({"a": _fake(input_schema=_schema("x"))}))
    model.open()
    model.open()
    assert [t.name for t in model.request([]).tools] == ["add", "subagent_a"]


@pytest.mark.parametrize(
    ("subagents", "offered", "message"),
    [
        ({}, ["missing"], "no resource named 'missing'"),
        ({"a": _fake(input_schema=_schema("x"))}, ["a", "a"], "listed twice"),
        ({"bad": ResourceDescriptor.of(NotASubagent)}, ["bad"], "not a SubagentSetup"),
        ({"loop": _fake(input_type="tests.subagent_samples:Node")}, ["loop"], "self-referential"),
    ],
)
def test_unusable_entries_fail_open(subagents, offered, message):
    with pytest.raises(ValueError, match=message):
        _open(_agent_with(subagents, offered))


def test_unknown_subagent_call_is_a_failed_delegation():
    answer = _delegate(
        "unknown",
        {"rev": _fake(input_schema=_schema("x"))},
        [{"name": "subagent_nobody", "arguments": {}}],
    )
    assert answer.startswith("delegation to sub-agent 'nobody' failed: LookupError")
    assert "subagent_rev" in answer  # tells the model what it may call
    assert FakeSubagent.calls["fake"] == 0


def test_malformed_arguments_are_a_failed_delegation():
    answer = _delegate(
        "malformed",
        {"rev": _fake(input_type="tests.subagent_samples:ReviewInput")},
        [{"name": "subagent_rev", "arguments": {"text": ["not", "a", "string"]}}],
    )
    assert answer.startswith("delegation to sub-agent 'rev' failed: ValidationError")
    assert FakeSubagent.calls["fake"] == 0
