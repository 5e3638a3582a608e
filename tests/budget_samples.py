"""An agent whose every input makes one model call, and a fake OpenAI-compatible server that
answers with fixed usage and counts requests per key: the budgets tests' subjects."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from typing import Any, cast

from flink_agents.api import Agent, ChatMessage, InputEvent, OutputEvent, RunnerContext, action
from flink_agents.api.budgets import Budget, BudgetExceeded, Budgets
from flink_agents.api.chat_models import ChatModelSetup
from flink_agents.api.resources import ResourceType
from flink_agents.plan.compile import compile_agent
from flink_agents.plan.models import AgentPlan
from flink_agents.providers.openai_compatible import OpenAICompatibleChatModelConnection
from tests.providers.fake_servers import FakeModelServer, RecordedRequest, ScriptedResponse

PROMPT_TOKENS = 60
OUTPUT_TOKENS = 40
CALL_TOKENS = PROMPT_TOKENS + OUTPUT_TOKENS
"""What the fake server reports for every call."""

MAX_TOKENS = 16
"""The chat model's max_tokens: a call's worst case (prompt estimate + this) stays under
CALL_TOKENS, so a cap of n calls' tokens lets exactly n calls through."""


class UsageServer(FakeModelServer):
    """A fake chat-completions server: every answer reports :data:`CALL_TOKENS` and names the
    model asked for; requests are counted by the key their question names (``key/i``), and
    :attr:`asked` notes each answered request's question with the times it came and was
    answered (``latency_s`` later)."""

    def __init__(
        self, answers: int | None = None, refusal: int = 429, latency_s: float = 0.0
    ) -> None:
        super().__init__(self._answer)
        self.by_key: Counter[str] = Counter()
        self.by_model: Counter[str] = Counter()
        self.asked: list[tuple[str, float, float]] = []  # question, came, answered (epoch s)
        self.answers = answers  # how many requests it answers before it refuses every one
        self.refusal = refusal  # the status it refuses with
        self.latency_s = latency_s
        self.refused = 0
        self._usage_lock = threading.Lock()  # the server answers each request on its own thread

    def _answer(self, request: RecordedRequest) -> ScriptedResponse:
        came = time.time()
        body = request.json()
        question = body["messages"][-1]["content"]
        with self._usage_lock:
            if self.answers is not None and sum(self.by_key.values()) >= self.answers:
                self.refused += 1
                error = {"message": "slow down", "type": "rate_limit", "param": None, "code": None}
                return ScriptedResponse(status=self.refusal, body={"error": error})
            self.by_key[question.split("/")[0]] += 1
            self.by_model[body["model"]] += 1
            self.asked.append((question, came, came + self.latency_s))
        message = {"role": "assistant", "content": f"{body['model']}: {question}"}
        usage = {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": OUTPUT_TOKENS}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        reply = {"id": "c", "object": "chat.completion", "created": 0, "model": body["model"]}
        return ScriptedResponse(
            body={**reply, "choices": [choice], "usage": usage}, delay_seconds=self.latency_s
        )

    def snapshot(self) -> list[tuple[str, float, float]]:
        """:attr:`asked` so far."""
        with self._usage_lock:
            return list(self.asked)


@action(InputEvent)
async def ask(event: InputEvent, ctx: RunnerContext) -> None:
    """Ask the model the input's question once; its answer is the output."""
    model = cast(ChatModelSetup, ctx.get_resource("model", ResourceType.CHAT_MODEL))
    question = ChatMessage(role="user", content=str(event.input["q"]))
    reply = await ctx.durable_execute_async(
        model.chat, [question], call_id="chat", result_type=ChatMessage
    )
    ctx.send_event(OutputEvent(output=reply.content))


@action(InputEvent)
async def ask_at_once(event: InputEvent, ctx: RunnerContext) -> None:
    """Ask the model ``event.input["n"]`` questions at once; the output counts the answers and
    the refusals."""
    model = cast(ChatModelSetup, ctx.get_resource("model", ResourceType.CHAT_MODEL))
    key = event.input["key"]
    asked = [
        ctx.durable_execute_async(
            model.chat,
            [ChatMessage(role="user", content=f"{key}/{i}")],
            call_id=f"chat-{i}",
            result_type=ChatMessage,
        )
        for i in range(event.input["n"])
    ]
    outcomes = await asyncio.gather(*asked, return_exceptions=True)
    refused = sum(isinstance(outcome, BudgetExceeded) for outcome in outcomes)
    ctx.send_event(OutputEvent(output={"answered": len(outcomes) - refused, "refused": refused}))


@action(InputEvent)
async def ask_in_turn(event: InputEvent, ctx: RunnerContext) -> None:
    """Ask the model ``event.input["n"]`` questions one after another, numbered on from
    ``event.input["first"]`` (``key/first``, ``key/first+1``, ...: a key's questions stay
    distinct across its runs); the output counts the answers. A refused question ends the run
    with its ``BudgetExceeded`` (the agent's error policy decides what that yields)."""
    model = cast(ChatModelSetup, ctx.get_resource("model", ResourceType.CHAT_MODEL))
    key, first, n = event.input["key"], event.input["first"], event.input["n"]
    for i in range(n):
        await ctx.durable_execute_async(
            model.chat,
            [ChatMessage(role="user", content=f"{key}/{first + i}")],
            call_id=f"chat-{i}",
            result_type=ChatMessage,
        )
    ctx.send_event(OutputEvent(output={"answered": n}))


def budgeted_plan(
    base_url: str,
    *limits: Budget,
    action: Any = ask,
    max_tokens: int = MAX_TOKENS,
    **budgets: Any,
) -> AgentPlan:
    """The plan of an agent asking model ``big`` (connection ``llm``; ``cheap`` answers with
    model ``small``) under ``limits`` in ``action``; its error policy emits the failure as an
    output."""
    agent = Agent(name="budgeted", error_policy="emit")
    agent.add_action(action)
    connection = OpenAICompatibleChatModelConnection
    agent.add_resource("llm", ResourceType.CHAT_MODEL_CONNECTION, connection, base_url=base_url)
    agent.add_resource(
        "cheap", ResourceType.CHAT_MODEL_CONNECTION, connection, base_url=base_url, model="small"
    )
    agent.add_resource(
        "model",
        ResourceType.CHAT_MODEL,
        ChatModelSetup,
        connection="llm",
        model="big",
        max_tokens=max_tokens,
    )
    agent.budgets = Budgets(limits=list(limits), **budgets)
    return compile_agent(agent)


def questions(keys: int, per_key: int) -> list[dict[str, str]]:
    """``per_key`` inputs of each of ``keys`` keys, interleaved."""
    return [{"key": f"k{k}", "q": f"k{k}/{i}"} for i in range(per_key) for k in range(keys)]
