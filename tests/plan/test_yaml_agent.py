import textwrap
from pathlib import Path

import pytest

from examples import EXAMPLES
from flink_agents.api import ResourceType
from flink_agents.plan import (
    AgentPlan,
    YamlAgentError,
    compile_agent,
    compile_yaml,
    load_yaml_agents,
)
from flink_agents.plan.sources import agent_from_reference
from flink_agents.plan.yaml.schema import PROVIDER_ALIASES
from flink_agents.providers.scripted import ScriptedChatModelConnection
from flink_agents.runtime import run_local

VALID = """\
agents:
  - name: echo
    config: {team: a}
    actions:
      - function: tests.sample_agents:EchoAgent.double
      - name: emit
        function: tests.sample_agents:EchoAgent.emit
        listen_to: ["tests.sample_agents:Doubled"]
    subagents:
      reviewer:
        class: tests.sample_agents:ExternalReviewer
        arguments: {endpoint: "http://reviewer"}
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agents.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def _error(tmp_path: Path, text: str) -> YamlAgentError:
    path = _write(tmp_path, text)
    with pytest.raises(YamlAgentError) as info:
        load_yaml_agents(path)
    assert info.value.file == str(path)
    return info.value


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_python_and_yaml_forms_give_the_same_plan(name):
    example = EXAMPLES[name]
    from_python = compile_agent(agent_from_reference(example.factory)).to_json()
    assert compile_yaml(example.yaml_file, name).to_json() == from_python


def test_decorated_actions_may_omit_listen_to_and_subagents_stay_agent_resources(tmp_path):
    plan = compile_yaml(_write(tmp_path, VALID))
    assert plan.actions[0].name == "double"
    assert plan.actions[0].listen_to == ["InputEvent"]
    reviewer = plan.resources["reviewer"]
    assert reviewer.type is ResourceType.AGENT
    assert reviewer.class_path == "tests.sample_agents:ExternalReviewer"
    assert reviewer.arguments == {"endpoint": "http://reviewer"}
    assert plan.config == {"team": "a"}


def test_missing_field_names_file_line_and_field(tmp_path):
    error = _error(
        tmp_path, VALID.replace("        function: tests.sample_agents:EchoAgent.emit\n", "")
    )
    [issue] = error.issues
    assert issue.field == "agents[0].actions[1].function"
    assert issue.message == "required field is missing"
    assert issue.line == 6  # the action lacking the field starts on line 6
    assert f"{error.file}:6:" in str(error)


def test_wrong_type_names_file_line_and_field(tmp_path):
    error = _error(
        tmp_path, VALID.replace('listen_to: ["tests.sample_agents:Doubled"]', "listen_to: 5")
    )
    [issue] = error.issues
    assert (issue.line, issue.field) == (8, "agents[0].actions[1].listen_to")
    assert "valid list" in issue.message and "5" in issue.message


def test_unknown_field_is_refused_where_it_is(tmp_path):
    error = _error(
        tmp_path,
        VALID.replace("    config: {team: a}\n", "    config: {team: a}\n    colour: red\n"),
    )
    [issue] = error.issues
    assert (issue.line, issue.field, issue.message) == (
        4,
        "agents[0].colour",
        "unknown field (not part of the format)",
    )


def test_unknown_action_names_file_line_field_and_qualname(tmp_path):
    error = _error(tmp_path, VALID.replace("EchoAgent.emit", "EchoAgent.emitt"))
    [issue] = error.issues
    assert (issue.line, issue.field) == (7, "agents[0].actions[1].function")
    assert "has no attribute 'emitt'" in issue.message


def test_unimportable_module_names_file_line_and_field(tmp_path):
    error = _error(
        tmp_path, VALID.replace("tests.sample_agents:ExternalReviewer", "missing_pkg.mod:Reviewer")
    )
    [issue] = error.issues
    assert (issue.line, issue.field) == (11, "agents[0].subagents.reviewer.class")
    assert "module 'missing_pkg.mod' is not importable" in issue.message


def test_a_job_spec_is_named_as_one_with_the_commands_that_take_it(tmp_path):
    (tmp_path / "jobs").mkdir()
    job = tmp_path / "jobs" / "job.yaml"
    job.write_text(
        "name: reviews\nagent: ../agents.yaml\nagent_name: review_react\n"
        "source: {kind: list, path: in.jsonl}\nkey: id\nsink: {kind: stdout}\n"
    )
    with pytest.raises(YamlAgentError) as info:
        load_yaml_agents(job)
    [issue] = info.value.issues  # not one "unknown field" per field of the spec
    assert (issue.line, issue.field) == (2, "agent")
    assert issue.message == (
        f"this is a job spec, not an agents file: run it with `flink-agents run {job}` (a local "
        f"mini-cluster) or `flink-agents submit {job}`; to compile, inspect or run --local its "
        f"agent, give {tmp_path / 'agents.yaml'} --agent review_react"
    )


def test_a_job_spec_naming_its_agent_by_reference_names_the_reference(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("name: w\nagent: examples.weather:build_agent\nsource: {kind: list, path: x}\n")
    with pytest.raises(YamlAgentError) as info:
        load_yaml_agents(job)
    assert info.value.issues[0].message.endswith("give examples.weather:build_agent")


def test_a_class_path_that_moved_says_what_to_use_instead(tmp_path):
    old = VALID.replace(
        "tests.sample_agents:ExternalReviewer",
        "flink_agents.integrations.http_subagent:HttpSubagent",
    )
    [issue] = _error(tmp_path, old).issues
    assert (issue.line, issue.field) == (11, "agents[0].subagents.reviewer.class")
    assert issue.message.endswith(
        "module 'flink_agents.integrations.http_subagent' moved: use "
        "'flink_agents.providers.http_subagent:HttpSubagent'"
    )


def test_invalid_yaml_syntax_names_the_line(tmp_path):
    error = _error(tmp_path, "agents:\n  - name: [unclosed\n")
    assert error.issues[0].line >= 2
    assert "not valid YAML" in error.issues[0].message


def test_action_without_listen_to_or_decorator_is_refused(tmp_path):
    error = _error(
        tmp_path,
        """\
        agents:
          - name: a
            actions:
              - function: tests.sample_agents:add
        """,
    )
    assert (error.issues[0].line, error.issues[0].field) == (4, "agents[0].actions[0]")
    assert "add is not an @action" in error.issues[0].message
    assert "listen_to" in error.issues[0].message


def test_action_with_a_wrong_signature_is_refused_at_its_entry(tmp_path):
    error = _error(
        tmp_path,
        """\
        agents:
          - name: a
            actions:
              - function: tests.sample_agents:EchoAgent.double
              - function: textwrap:dedent
                listen_to: [InputEvent]
        """,
    )
    [issue] = error.issues
    assert (issue.line, issue.field) == (5, "agents[0].actions[1]")
    assert "action dedent must take exactly (event, ctx); got ['text']" in issue.message


def test_unknown_short_class_name_lists_the_short_names(tmp_path):
    error = _error(tmp_path, SHARED.replace("class: scripted", "class: scriptd"))
    [issue] = error.issues
    assert (issue.line, issue.field) == (3, "connections.llm.class")
    names = ", ".join(sorted(PROVIDER_ALIASES))
    assert {"anthropic", "azure_openai", "openai_responses", "vllm"} <= set(PROVIDER_ALIASES)
    assert {"gemini", "bedrock"} <= set(PROVIDER_ALIASES)
    assert f"built-in provider's short name ({names})" in issue.message
    assert "should match pattern" not in issue.message


def test_a_dotted_path_where_module_qualname_is_expected_says_so(tmp_path):
    error = _error(tmp_path, SHARED.replace("tests.sample_agents:add", "tests.sample_agents.add"))
    [issue] = error.issues
    assert issue.field == "agents[1].tools.add.function"
    assert issue.message == (
        "expected module:qualname, such as my_pkg.tools:lookup (got 'tests.sample_agents.add')"
    )


SHARED = """\
connections:
  llm:
    class: scripted
    arguments: {turns: [{content: "fine"}]}
agents:
  - name: first
    description: Answers first.
    react: {chat_model: chat}
    chat_models:
      chat: {connection: llm}
  - name: second
    react: {chat_model: chat}
    tools:
      add: {function: "tests.sample_agents:add", description: Adds two numbers.}
    chat_models:
      chat: {connection: llm, tools: [add]}
"""


def test_file_level_connections_reach_every_agent_and_aliases_name_builtin_providers(
    tmp_path: Path,
):
    agents = load_yaml_agents(_write(tmp_path, SHARED))
    for name in ("first", "second"):
        llm = compile_agent(agents[name]).resources["llm"]
        assert llm.class_path == "flink_agents.providers.scripted:ScriptedChatModelConnection"
    assert compile_agent(agents["first"]).description == "Answers first."
    tool = compile_agent(agents["second"]).resources["add"]
    assert tool.arguments["description"] == "Adds two numbers."


def test_a_literal_api_key_is_refused_at_its_line_without_showing_it(tmp_path: Path):
    text = SHARED.replace('arguments: {turns: [{content: "fine"}]}', 'arguments: {api_key: "sk-9"}')
    error = _error(tmp_path, text)
    assert [(i.line, i.field) for i in error.issues] == [(4, "connections.llm.arguments")]
    assert "/api_key hold a literal value" in str(error)
    assert "sk-9" not in str(error)


def test_an_agent_may_not_redeclare_a_file_level_connection(tmp_path: Path):
    text = SHARED.replace(
        "    chat_models:\n      chat: {connection: llm}\n",
        "    chat_models:\n      chat: {connection: llm}\n    connections:\n"
        "      llm: {class: ollama}\n",
        1,
    )
    error = _error(tmp_path, text)
    assert [(i.line, i.field) for i in error.issues] == [(12, "agents[0].connections.llm")]
    assert "already declared for the whole file" in str(error)


RETRYING = """\
agents:
  - name: retrying
    react:
      chat_model: chat
      output_schema: "tests.sample_agents:Answer"
      output_retries: 2
    connections:
      llm:
        class: scripted
        arguments:
          name: yaml-retries
          turns: [{content: "sunny"}, {content: "{}"}, {content: '{"city": "x", "total": 1}'}]
    chat_models:
      chat: {connection: llm}
"""


def test_a_react_agent_s_output_retries_compile_and_survive_the_plan_json(tmp_path: Path):
    ScriptedChatModelConnection.reset_stats("yaml-retries")
    plan = compile_yaml(_write(tmp_path, RETRYING), "retrying")
    reloaded = AgentPlan.from_json(plan.to_json())
    assert reloaded == plan
    configs = {action.name: action.config for action in reloaded.actions}
    assert (
        configs["chat_action"]["output_retries"] == configs["react_finish"]["output_retries"] == 2
    )
    # Acted upon from the reloaded plan: two answers not matching, then one that does.
    [result] = run_local(reloaded, ["q"], key=lambda value: value)
    assert result.output_values == [{"city": "x", "total": 1}]
    assert ScriptedChatModelConnection.stats("yaml-retries").total == 3


def test_negative_output_retries_are_refused_at_their_line(tmp_path: Path):
    error = _error(tmp_path, RETRYING.replace("output_retries: 2", "output_retries: -1"))
    assert [(i.line, i.field) for i in error.issues] == [(6, "agents[0].react.output_retries")]


def test_while_paused_compiles_into_the_plan_and_the_default_keeps_its_bytes(tmp_path: Path):
    default = compile_yaml(_write(tmp_path, VALID), "echo")
    assert "while_paused" not in default.to_json()  # plans of per-key order are what they were
    alongside_text = VALID.replace(
        "    config: {team: a}\n", "    config: {team: a}\n    while_paused: alongside\n"
    )
    alongside = compile_yaml(_write(tmp_path, alongside_text), "echo")
    assert AgentPlan.from_json(alongside.to_json()).while_paused == "alongside"
    assert alongside.model_copy(update={"while_paused": "queue"}) == default
    error = _error(
        tmp_path, VALID.replace("    config: {team: a}\n", "    while_paused: parallel\n")
    )
    assert "while_paused" in str(error)
