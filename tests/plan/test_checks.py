"""The compiler's checks: every event sent has a listener, every reference resolves."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from flink_agents.agents import ReActAgent
from flink_agents.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponseEvent,
    Event,
    InputEvent,
    OutputEvent,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents.plan import PlanValidationError, YamlAgentError, compile_agent, load_yaml_agents
from flink_agents.plan.checks import check_for_workers
from flink_agents.providers.scripted import ScriptedChatModelConnection
from flink_agents.runtime import run_local


class Scored(Event):
    score: int


@action(InputEvent, sends=[ChatRequestEvent])
def ask(event: InputEvent, ctx: RunnerContext) -> None:
    message = ChatMessage(role="user", content=event.input["text"])
    ctx.send_event(ChatRequestEvent(model="scorer", messages=[message]))


@action(ChatResponseEvent, sends=[OutputEvent])
def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
    ctx.send_event(OutputEvent(output=event.response.content))


@action(InputEvent, sends=[Scored])
def score(event: InputEvent, ctx: RunnerContext) -> None:
    ctx.send_event(Scored(score=1))


def _with_model(agent: Agent, reply: str = "4 stars") -> Agent:
    agent.add_resource(
        "llm",
        ResourceType.CHAT_MODEL_CONNECTION,
        ScriptedChatModelConnection,
        turns=[{"content": reply}],
    )
    agent.add_resource("scorer", ResourceType.CHAT_MODEL, ChatModelSetup, connection="llm")
    return agent


def _issues(agent: Agent) -> list[str]:
    with pytest.raises(PlanValidationError) as info:
        compile_agent(agent)
    return [str(issue) for issue in info.value.issues]


def test_a_chat_workflow_without_the_chat_actions_gets_them_and_answers():
    agent = _with_model(Agent(name="reviews").add_action(ask).add_action(answer))
    plan = compile_agent(agent)
    assert [a.name for a in plan.actions] == ["ask", "answer", "chat_action", "tool_call_action"]
    results = run_local(agent, [{"id": 1, "text": "great"}], key="id")
    assert [r.output_values for r in results] == [["4 stars"]]


def test_a_chat_request_nobody_answers_is_a_compile_error():
    issues = _issues(_with_model(Agent(name="reviews").add_action(ask)))
    assert issues == [
        "/actions/0/sends/0: action 'ask' sends ChatRequestEvent but no action listens to it "
        "(the event would be dropped); listened types: ['InputEvent']"
    ]


def test_a_declared_event_without_listener_is_a_compile_error():
    issues = _issues(Agent(name="scores").add_action(score))
    assert len(issues) == 1
    assert issues[0].startswith("/actions/0/sends/0: action 'score' sends tests.plan.test_checks")


def _echo(event: Event, ctx: RunnerContext) -> None:
    ctx.send_event(OutputEvent(output=event.model_dump()))


def test_an_agent_without_an_input_listener_is_a_compile_error():
    issues = _issues(Agent(name="idle").add_action(_echo, Scored))
    assert issues == [
        "/actions: no action listens to InputEvent, so no input would ever be handled; "
        "listened types: ['tests.plan.test_checks:Scored']"
    ]


def test_a_misspelt_input_event_is_pointed_at():
    issues = _issues(Agent(name="typo").add_action(_echo, "InputEvnt"))
    assert issues == [
        "/actions/0/listen_to/0: action '_echo' listens to 'InputEvnt', not a known event type; "
        "did you mean 'InputEvent'? (no action listens to it, so no input would ever be handled)"
    ]


def test_sent_events_are_listed_in_the_plan():
    plan = compile_agent(_with_model(Agent(name="reviews").add_action(ask).add_action(answer)))
    assert [a.sends for a in plan.actions] == [
        ["ChatRequestEvent"],
        ["OutputEvent"],
        ["ChatResponseEvent", "ToolRequestEvent"],
        ["ToolResponseEvent"],
    ]


def test_a_react_agent_naming_a_missing_model_does_not_compile():
    issues = _issues(_with_model(ReActAgent(name="r", chat_model="gpt")))
    assert issues == [
        "/actions/0/config/chat_model: names the chat_model 'gpt', but there is no resource "
        "named 'gpt'; declared chat_model resources: ['scorer']"
    ]


def test_a_template_where_a_prompt_name_is_expected_gets_a_hint():
    agent = _with_model(ReActAgent(name="r", chat_model="scorer", prompt="Weather in {city}?"))
    assert _issues(agent) == [
        "/actions/0/config/prompt: names the prompt 'Weather in {city}?', but there is no "
        "resource named 'Weather in {city}?'; declared prompt resources: []; a template is "
        "given as Prompt(text=...)"
    ]


def test_chat_model_references_must_resolve_to_resources_of_their_type():
    agent = ReActAgent(name="r", chat_model="m")
    agent.add_prompt("p", "Be brief.")
    agent.add_resource(
        "m", ResourceType.CHAT_MODEL, ChatModelSetup, connection="p", prompt="p", tools=["t"]
    )
    assert _issues(agent) == [
        "/resources/m/arguments/connection: names 'p', which is a prompt resource, not a "
        "chat_model_connection",
        "/resources/m/arguments/tools/0: names the tool 't', but there is no resource named "
        "'t'; declared tool resources: []",
    ]


def test_a_child_scope_resolves_names_in_its_parents():
    child = ReActAgent(name="child", chat_model="scorer")
    parent = _with_model(Agent(name="parent").add_action(ask).add_action(answer))
    parent.add_subagent("helper", child)
    assert compile_agent(parent).scopes["child"].resources == {}


def test_references_inside_a_child_scope_are_checked_and_point_into_the_scope():
    # A sub-agent's own model names a connection no scope declares: the child's references get
    # the same checks as the parent's, not only the event-flow check.
    child = ReActAgent(name="child", chat_model="own")
    child.add_resource("own", ResourceType.CHAT_MODEL, ChatModelSetup, connection="nowhere")
    parent = _with_model(Agent(name="parent").add_action(ask).add_action(answer))
    parent.add_subagent("helper", child)
    assert _issues(parent) == [
        "/scopes/child/resources/own/arguments/connection: names the chat_model_connection "
        "'nowhere', but there is no resource named 'nowhere'; declared chat_model_connection "
        "resources: ['llm']"
    ]


def test_a_dangling_yaml_reference_names_file_line_and_column(tmp_path: Path):
    path = tmp_path / "agents.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            agents:
              - name: reviewer
                react:
                  chat_model: gpt
                connections:
                  llm:
                    class: flink_agents.providers.scripted:ScriptedChatModelConnection
                    arguments: {turns: [{content: hi}]}
                chat_models:
                  chat: {connection: lm}
            """
        )
    )
    with pytest.raises(YamlAgentError) as info:
        load_yaml_agents(path)
    assert [(i.line, i.column, i.field) for i in info.value.issues] == [
        (4, 19, "agents[0].react.chat_model"),
        (10, 26, "agents[0].chat_models.chat.connection"),
    ]
    assert "no resource named 'lm'; declared chat_model_connection resources: ['llm']" in str(
        info.value
    )


def test_prompts_are_checked_and_list_their_placeholders_in_the_plan():
    agent = Agent(name="prompts").add_action(answer)
    agent.add_prompt("review", 'Rate {review} as {"stars": 1}')
    _with_model(agent).add_action(ask)
    assert compile_agent(agent).resources["review"].placeholders == ["review"]
    agent.add_resource("broken", ResourceType.PROMPT, "flink_agents.api.prompts:Prompt")
    with pytest.raises(PlanValidationError, match="/resources/broken: not a valid prompt"):
        compile_agent(agent)


@action(InputEvent)  # no sends=: what it sends is not checked
def _ask_undeclared(event: InputEvent, ctx: RunnerContext) -> None:
    message = ChatMessage(role="user", content=event.input["text"])
    ctx.send_event(ChatRequestEvent(model="scorer", messages=[message]))


def test_a_misspelt_response_event_is_a_compile_error():
    # Nothing else catches it: the run would end with no output and exit 0.
    agent = Agent(name="typo").add_action(_ask_undeclared).add_action(_echo, "ChatResponseEvnt")
    agent = _with_model(agent)
    assert _issues(agent) == [
        "/actions/1/listen_to/0: action '_echo' listens to 'ChatResponseEvnt', not a known "
        "event type; did you mean 'ChatResponseEvent'? (an event type of your own needs another "
        "name, or an action declaring it sends it: sends=['ChatResponseEvnt'])"
    ]


@action(InputEvent, sends=["ChatResponses"])
def _relay(event: InputEvent, ctx: RunnerContext) -> None:
    ctx.send_event(Event(type="ChatResponses", attributes={"text": event.input}))


def test_an_own_event_type_named_like_a_builtin_one_compiles_when_declared_sent():
    agent = Agent(name="own").add_action(_relay).add_action(_echo, "ChatResponses")
    assert [a.listen_to for a in compile_agent(agent).actions] == [
        ["InputEvent"],
        ["ChatResponses"],
    ]


def test_a_plan_naming_the_scripts_own_code_is_refused_for_flinks_workers():
    """A class or function of ``__main__`` runs under ``run_local`` (same process) but no worker
    can import it: the Flink environment refuses such a plan, naming where it is."""
    plan = compile_agent(_with_model(Agent(name="scripted").add_action(ask).add_action(answer)))
    assert check_for_workers(plan) is plan
    moved = plan.model_copy(
        update={
            "resources": {
                name: resource.model_copy(update={"class_path": "__main__:MyModel"})
                if resource.class_path.endswith("ScriptedChatModelConnection")
                else resource
                for name, resource in plan.resources.items()
            }
        }
    )
    with pytest.raises(PlanValidationError) as refused:
        check_for_workers(moved)
    message = str(refused.value)
    assert (
        "/resources/llm/class: '__main__:MyModel' is defined in the script that was run" in message
    )
