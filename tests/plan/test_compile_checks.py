"""What the compiler checks with the agent's code at hand: tool signatures, chat requests an
action writes out, setup prompts' roles."""

from __future__ import annotations

from typing import Any

import pytest

from flink_agents.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    OutputEvent,
    Prompt,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents.cli import main
from flink_agents.plan import (
    PlanValidationError,
    PlanWarning,
    YamlAgentError,
    compile_agent,
    compile_yaml,
    load_yaml_agents,
)
from flink_agents.providers.scripted import ScriptedChatModelConnection

HERE = __file__


class Helpers:
    def lookup(self, city: str) -> int:
        """A method: its self is no argument a model can give."""
        return len(city)


def anything(**kwargs: Any) -> str:
    """Takes whatever it is given."""
    return str(kwargs)


def untyped(city, days: int):  # type: ignore[no-untyped-def]
    """No type for the city."""
    return city


def typed(city: str) -> str:
    """Fine as it is."""
    return city


def _tool_agent(tool: Any) -> Agent:
    return Agent(name="tools").add_action(_answer_input).add_tool(tool)


@action(InputEvent)
def _answer_input(event: InputEvent, ctx: RunnerContext) -> None:
    ctx.send_event(OutputEvent(output=event.input))


def _issues(agent: Agent) -> list[str]:
    with pytest.raises(PlanValidationError) as info:
        compile_agent(agent)
    return [str(issue) for issue in info.value.issues]


def _line(function: Any) -> int:
    return int(function.__code__.co_firstlineno)


@pytest.mark.parametrize("tool", [Helpers().lookup, Helpers.lookup], ids=["bound", "unbound"])
def test_a_method_tool_is_a_compile_error_naming_it(tool: Any) -> None:
    assert _issues(_tool_agent(tool)) == [
        f"/resources/lookup/arguments/function: tool 'lookup' ({HERE}:{_line(Helpers.lookup)}) "
        "is a method: the model would be offered its 'self' as a required argument it cannot "
        "give; make it a module-level function (or a @staticmethod) taking only what the model "
        "passes"
    ]


def test_a_kwargs_tool_is_a_compile_error_naming_it() -> None:
    assert _issues(_tool_agent(anything)) == [
        f"/resources/anything/arguments/function: tool 'anything' ({HERE}:{_line(anything)}) "
        "takes **kwargs, which no schema describes to a model; name each argument the model "
        "may pass, with its type"
    ]


def test_a_kwargs_tool_is_one_line_in_the_cli_not_a_traceback(capsys: Any) -> None:
    assert main(["compile", f"{__name__}:kwargs_tool_agent"]) == 2
    error = capsys.readouterr().err
    assert "takes **kwargs" in error
    assert "Traceback" not in error


def kwargs_tool_agent() -> Agent:
    return _tool_agent(anything)


def test_untyped_tool_parameters_are_a_warning_with_the_fix() -> None:
    with pytest.warns(PlanWarning) as warned:
        compile_agent(_tool_agent(untyped))
    assert [str(w.message) for w in warned] == [
        f"agent 'tools': /resources/untyped/arguments/function: tool 'untyped' "
        f"({HERE}:{_line(untyped)}): parameters without a type: ['city']; the model is offered "
        "them as any JSON value and must guess; annotate them, e.g. (city: str)"
    ]


def test_a_typed_tool_compiles_without_a_warning(recwarn: Any) -> None:
    compile_agent(_tool_agent(typed))
    assert not [w for w in recwarn if issubclass(w.category, PlanWarning)]


def _chat_agent(ask: Any, prompt: dict[str, Any]) -> Agent:
    agent = Agent(name="reviews").add_action(ask).add_action(_answer)
    agent.add_resource(
        "llm", ResourceType.CHAT_MODEL_CONNECTION, ScriptedChatModelConnection, turns=[]
    )
    agent.add_resource("instructions", ResourceType.PROMPT, Prompt, **prompt)
    agent.add_resource(
        "reviewer", ResourceType.CHAT_MODEL, ChatModelSetup, connection="llm", prompt="instructions"
    )
    return agent


@action(ChatResponseEvent)
def _answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
    ctx.send_event(OutputEvent(output=event.response.content))


@action(InputEvent)
def ask_with_review(event: InputEvent, ctx: RunnerContext) -> None:
    ctx.send_event(
        ChatRequestEvent(
            model="reviewer",
            messages=[ChatMessage(role="user", content="")],
            prompt_args={"review": event.input["text"]},
        )
    )


@action(InputEvent)
def ask_misspelt_model(event: InputEvent, ctx: RunnerContext) -> None:
    message = ChatMessage(role="user", content=event.input["text"])
    ctx.send_event(ChatRequestEvent(model="reveiwer", messages=[message]))


@action(InputEvent)
def ask_computed(event: InputEvent, ctx: RunnerContext) -> None:
    args = dict(event.input)
    ctx.send_event(ChatRequestEvent(model="reviewer", messages=[], prompt_args=args))


def _request_line(function: Any, text: str) -> int:
    import inspect

    lines, first = inspect.getsourcelines(function)
    return first + next(n for n, line in enumerate(lines) if text in line)


def test_a_prompt_variable_no_request_gives_is_a_compile_error() -> None:
    agent = _chat_agent(ask_with_review, {"text": "Review by {author}: {review}"})
    line = _request_line(ask_with_review, "ChatRequestEvent(")
    assert _issues(agent) == [
        f"/actions/0/function: action 'ask_with_review' ({HERE}:{line}) sends a "
        "ChatRequestEvent to chat model 'reviewer', whose prompt 'instructions' needs "
        "['author'], but its prompt_args give ['review']"
    ]


def test_an_undefined_model_named_in_an_action_is_a_compile_error() -> None:
    agent = _chat_agent(ask_misspelt_model, {"text": "Be brief."})
    line = _request_line(ask_misspelt_model, "ChatRequestEvent(")
    assert _issues(agent) == [
        f"/actions/0/function: action 'ask_misspelt_model' ({HERE}:{line}) sends a "
        "ChatRequestEvent to chat model 'reveiwer': names the chat_model 'reveiwer', but there "
        "is no resource named 'reveiwer'; declared chat_model resources: ['reviewer']"
    ]


def test_prompt_args_computed_at_run_time_are_not_checked() -> None:
    agent = _chat_agent(ask_computed, {"text": "Review by {author}: {review}"})
    assert compile_agent(agent).name == "reviews"


def test_a_request_giving_every_prompt_variable_compiles() -> None:
    agent = _chat_agent(ask_with_review, {"text": "Review: {review}"})
    assert compile_agent(agent).name == "reviews"


def test_a_system_message_after_a_user_one_in_a_setup_prompt_is_a_warning() -> None:
    messages = [
        {"role": "user", "content": "Review: {review}"},
        {"role": "system", "content": "You analyse reviews."},
    ]
    with pytest.warns(PlanWarning) as warned:
        compile_agent(_chat_agent(ask_with_review, {"messages": messages}))
    assert [str(w.message) for w in warned] == [
        "agent 'reviews': /resources/instructions/arguments/messages/1: the setup prompt "
        "'instructions' has a system message at 1: a system message after another role's is "
        "sent in the middle of the conversation (and refused by strict chat templates); put "
        "system messages first"
    ]


def test_a_system_then_user_setup_prompt_compiles_without_a_warning(recwarn: Any) -> None:
    messages = [
        {"role": "system", "content": "You analyse reviews."},
        {"role": "user", "content": "Review: {review}"},
    ]
    compile_agent(_chat_agent(ask_with_review, {"messages": messages}))
    assert not [w for w in recwarn if issubclass(w.category, PlanWarning)]


def test_a_setup_prompt_without_a_system_message_is_a_warning() -> None:
    messages = [{"role": "user", "content": "Review: {review}"}]
    with pytest.warns(PlanWarning) as warned:
        compile_agent(_chat_agent(ask_with_review, {"messages": messages}))
    assert [str(w.message) for w in warned] == [
        "agent 'reviews': /resources/instructions/arguments/messages: the setup prompt "
        "'instructions' has no system message, so its ['user'] messages are all sent as the "
        "system prompt; to send a user message as the user's turn, start the prompt with a "
        "system message"
    ]


YAML_TOOLS = """\
agents:
  - name: t
    react: {{chat_model: m, prompt: p}}
    prompts: {{p: "{{q}}"}}
    tools:
      the_tool: {{function: {function}}}
    connections:
      s: {{class: scripted, arguments: {{turns: [{{content: hi}}]}}}}
    chat_models:
      m: {{connection: s, tools: [the_tool]}}
"""


def test_a_yaml_agents_tool_problems_are_at_their_line(tmp_path: Any) -> None:
    agents = tmp_path / "agents.yaml"
    agents.write_text(YAML_TOOLS.format(function=f"{__name__}:anything"))
    with pytest.raises(YamlAgentError) as info:
        load_yaml_agents(agents)
    [issue] = info.value.issues
    assert (issue.line, issue.field) == (6, "agents[0].tools.the_tool")
    assert "takes **kwargs" in issue.message

    agents.write_text(YAML_TOOLS.format(function=f"{__name__}:untyped"))
    with pytest.warns(PlanWarning) as warned:
        compile_yaml(agents)
    [warning] = [w.message for w in warned]
    assert isinstance(warning, PlanWarning)
    assert (warning.source, warning.path) == (f"{agents}:6:17", "agents[0].tools.the_tool")
    assert warning.text.startswith("tool 'the_tool' (")


def untyped_tool_agent() -> Agent:
    return _tool_agent(untyped)


def test_the_cli_says_a_plan_warning_once_on_stderr(capsys: Any) -> None:
    assert main(["compile", f"{__name__}:untyped_tool_agent"]) == 0
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(
        "flink-agents compile: warning: agent 'tools': /resources/untyped/arguments/function: "
        "tool 'untyped' ("
    )
