"""The chat action fills the setup's prompt with the request's ``prompt_args``; the setup's
prompt is the system prompt, first, and a caller's system messages follow it."""

from __future__ import annotations

from typing import ClassVar

from flink_agents.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    OutputEvent,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents.api.chat import ChatRequest
from flink_agents.api.chat_models import ChatModelConnection
from flink_agents.runtime import run_local


class RecordingConnection(ChatModelConnection):
    """Answers "ok" and keeps every request it got."""

    requests: ClassVar[list[ChatRequest]] = []

    async def chat(self, request: ChatRequest) -> ChatMessage:
        self.requests.append(request)
        return ChatMessage(role="assistant", content="ok")


@action(InputEvent, sends=[ChatRequestEvent])
def ask_with_shop(event: InputEvent, ctx: RunnerContext) -> None:
    messages = [
        ChatMessage(role="system", content="Answer in one word."),
        ChatMessage(role="user", content=event.input["review"]),
    ]
    ctx.send_event(
        ChatRequestEvent(model="scorer", messages=messages, prompt_args={"shop": "acme"})
    )


@action(ChatResponseEvent, sends=[OutputEvent])
def emit_answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
    ctx.send_event(OutputEvent(output=event.response.content))


def test_prompt_args_fill_the_setup_prompt_which_precedes_the_callers_system_messages():
    RecordingConnection.requests.clear()
    agent = Agent(name="scoring").add_action(ask_with_shop).add_action(emit_answer)
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, RecordingConnection)
    agent.add_prompt("persona", "You score reviews for {shop}.")
    agent.add_resource(
        "scorer", ResourceType.CHAT_MODEL, ChatModelSetup, connection="conn", prompt="persona"
    )
    results = run_local(agent, [{"id": 1, "review": "great"}], key="id")
    assert [r.output_values for r in results] == [["ok"]]
    [request] = RecordingConnection.requests
    assert [(m.role, m.content) for m in request.messages] == [
        ("system", "You score reviews for acme."),
        ("system", "Answer in one word."),
        ("user", "great"),
    ]
