import json

import pytest

from flink_agents.plan import (
    PLAN_VERSION,
    AgentPlan,
    PlanValidationError,
    compile_agent,
    resolve_plan,
)
from flink_agents.runtime import run_local
from tests.sample_agents import EchoAgent, react_agent


def _plan_dict() -> dict:
    return compile_agent(EchoAgent(name="echo")).to_dict()


def test_same_agent_gives_byte_identical_sorted_json():
    first = compile_agent(EchoAgent(name="echo")).to_json()
    assert first == compile_agent(EchoAgent(name="echo")).to_json()
    data = json.loads(first)
    assert list(data) == sorted(data)
    assert data["plan_version"] == PLAN_VERSION
    assert data["actions"][0]["function"] == "tests.sample_agents:EchoAgent.double"
    assert data["actions"][1]["listen_to"] == ["tests.sample_agents:Doubled"]


def test_json_round_trip_gives_the_same_plan_and_behaviour():
    agent = react_agent(
        [
            {"tool_calls": [{"name": "add", "arguments": {"a": 2}}]},
            {"content": '{"city": "x", "total": 3}'},
        ],
        name="roundtrip",
    )
    plan = compile_agent(agent)
    reloaded = AgentPlan.from_json(plan.to_json())
    assert reloaded == plan
    assert reloaded.to_json() == plan.to_json()
    inputs = [{"id": 1, "city": "a"}, {"id": 2, "city": "b"}]
    direct = [r.output_values for r in run_local(agent, inputs, key="id")]
    via_json = [r.output_values for r in run_local(reloaded, inputs, key="id")]
    assert direct == via_json == [[{"city": "x", "total": 3}]] * 2


def _error(data) -> PlanValidationError:
    with pytest.raises(PlanValidationError) as info:
        AgentPlan.from_dict(data, source="plan.json")
    return info.value


def test_a_literal_secret_in_a_hand_edited_plan_is_refused_without_showing_it():
    data = compile_agent(react_agent([{"content": "hi"}], name="secretive")).to_dict()
    [connection] = [r for r in data["resources"].values() if r["type"] == "chat_model_connection"]
    connection["arguments"]["api_key"] = "sk-live-abcdef123456"
    error = _error(data)
    assert [i.message for i in error.issues] == [
        "secret-looking argument(s) /api_key hold a literal value; use an environment reference "
        'such as {"env": "NAME"} or "${env:NAME}"'
    ]
    assert "sk-live" not in str(error)


def test_missing_field_is_reported_with_its_pointer():
    data = _plan_dict()
    del data["actions"][1]["function"]
    error = _error(data)
    assert [(i.path, i.message) for i in error.issues] == [
        ("/actions/1/function", "required field is missing")
    ]
    assert "plan.json" in str(error)


def test_wrong_type_is_reported_with_its_pointer_and_what_was_given():
    data = _plan_dict()
    data["actions"][0]["listen_to"] = "InputEvent"
    data["resources"] = {"m": {"type": "nonsense", "class": "a:B"}}
    paths = {issue.path: issue.message for issue in _error(data).issues}
    assert "valid list" in paths["/actions/0/listen_to"]
    assert "'InputEvent'" in paths["/actions/0/listen_to"]
    assert "'nonsense'" in paths["/resources/m/type"]


def test_function_reference_must_look_like_module_qualname():
    data = _plan_dict()
    data["actions"][0]["function"] = "not a reference"
    assert _error(data).issues[0].path == "/actions/0/function"


def test_unsupported_plan_version_is_refused():
    data = _plan_dict()
    data["plan_version"] = PLAN_VERSION + 1
    error = _error(data)
    assert error.issues[0].path == "/plan_version"
    assert f"expected {PLAN_VERSION}" in error.issues[0].message


def test_a_plan_of_version_1_is_refused_saying_to_compile_it_again():
    # Version 2: ReAct's chat_action carries its output_schema (it may send it natively); a
    # version-1 plan without it would ask for nothing, natively or in the prompt.
    data = _plan_dict()
    data["plan_version"] = 1
    message = _error(data).issues[0].message
    assert message.startswith("plan_version 1 is not supported; expected 2 ")
    assert "(compile the agent again with this version)" in message


def test_not_json_says_where():
    with pytest.raises(PlanValidationError, match="line 1 column"):
        AgentPlan.from_json("{nope")


def test_unknown_action_names_module_qualname_and_plan_path():
    data = _plan_dict()
    data["actions"][1]["function"] = "tests.sample_agents:EchoAgent.missing"
    with pytest.raises(PlanValidationError) as info:
        resolve_plan(AgentPlan.from_dict(data))
    [issue] = info.value.issues
    assert issue.path == "/actions/1/function"
    assert "'tests.sample_agents.EchoAgent' has no attribute 'missing'" in issue.message
    assert "importable on the worker" in issue.message


def test_unimportable_module_is_reported_for_actions_events_and_resources_together():
    data = _plan_dict()
    data["actions"][0]["function"] = "no_such_module.sub:handler"
    data["actions"][1]["listen_to"] = ["gone.module:Evt"]
    data["resources"] = {"m": {"type": "chat_model", "class": "also_gone:Model", "arguments": {}}}
    with pytest.raises(PlanValidationError) as info:
        resolve_plan(AgentPlan.from_dict(data))
    by_path = {issue.path: issue.message for issue in info.value.issues}
    assert set(by_path) == {"/actions/0/function", "/actions/1/listen_to/0", "/resources/m/class"}
    assert "module 'no_such_module.sub' is not importable" in by_path["/actions/0/function"]


def test_resource_type_must_match_its_class():
    agent = EchoAgent()  # nothing refers to "m", so only resolving finds the mismatch
    agent.add_resource("m", "tool", "flink_agents.api.chat_models:ChatModelSetup", connection="c")
    with pytest.raises(PlanValidationError) as info:
        resolve_plan(compile_agent(agent))
    assert info.value.issues[0].path == "/resources/m/type"


def test_local_functions_cannot_be_actions():
    agent = EchoAgent()

    def local(event, ctx):
        pass

    agent.add_action(local, "InputEvent")
    with pytest.raises(ValueError, match="defined inside a function"):
        compile_agent(agent)


def test_a_compiled_plan_is_its_json_form_down_to_key_order() -> None:
    # Key order reaches a model (tool input schemas): a plan run straight after compiling must
    # offer exactly what the same plan read back from JSON offers.
    from examples.research import build_agent

    compiled = compile_agent(build_agent())
    read_back = AgentPlan.from_json(compiled.to_json())
    assert json.dumps(compiled.model_dump()) == json.dumps(read_back.model_dump())
