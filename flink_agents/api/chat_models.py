"""Chat models, split in two resources.

* A :class:`ChatModelConnection` is the endpoint: a client, a base URL, credentials.
* A :class:`ChatModelSetup` is one way of using it: model name, system prompt, tools, temperature.
  Several setups may share one connection.

Structured output (an agent asking for an answer that follows a JSON schema) goes one of two
ways, chosen by :data:`StructuredOutput` on the connection or the setup: ``native`` sends the
schema in the provider's own field (:attr:`ChatRequest.response_schema`), ``prompt`` asks for it
in the system message; ``auto`` is native where the provider has it for the request's shape.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any, ClassVar, Literal, cast

from pydantic import Field, PrivateAttr, model_validator

from flink_agents.api.chat import ChatMessage, ChatRequest, TokenUsage, estimated_prompt_tokens
from flink_agents.api.compaction import CompactionSettings
from flink_agents.api.connection_notes import ConnectionNote, note_connection
from flink_agents.api.prompts import Prompt
from flink_agents.api.rate_limits import RateLimit, RateLimiter
from flink_agents.api.resources import Resource, ResourceType
from flink_agents.api.subagents.delegation import SUBAGENT_TOOL_PREFIX
from flink_agents.api.subagents.offers import SubagentOffer, offer_subagents
from flink_agents.api.tools import Tool, Toolset, tool_named, tools_of

StructuredOutput = Literal["auto", "native", "prompt"]
"""How a structured answer is asked for: ``native`` (the provider's JSON-schema field),
``prompt`` (an instruction in the system message) or ``auto`` (native where the provider has it
for the request's shape, else prompt)."""


class ChatModelConnection(Resource):
    """An endpoint that answers chat requests. Providers subclass this.

    ``max_concurrent_calls`` caps the calls in flight through this connection (one resource
    instance: one per operator subtask, shared by every key and run of it). A provider makes each
    call, or each attempt of it, inside :meth:`call_slot`, or inside :meth:`attempt_gate`, which
    also waits for the connection's ``rate_limit``.

    A provider that honours :attr:`ChatRequest.response_schema` sets ``native_schema``, and
    ``native_schema_with_tools`` when the schema does not keep the model from calling tools.
    """

    resource_type: ClassVar[ResourceType] = ResourceType.CHAT_MODEL_CONNECTION
    native_schema: ClassVar[bool] = False
    native_schema_with_tools: ClassVar[bool] = False

    max_concurrent_calls: int | None = Field(
        default=None,
        ge=1,
        description="Calls in flight at once through this connection; none: no cap.",
    )
    structured_output_mode: StructuredOutput = Field(
        default="auto",
        description="How a structured answer is asked for: native, prompt or auto.",
    )
    rate_limit: RateLimit | None = Field(
        default=None,
        description="Requests and tokens per minute for the whole job, split among its "
        "subtasks; none: no limit.",
    )

    @model_validator(mode="after")
    def _native_is_supported(self) -> ChatModelConnection:
        self.uses_native_schema(tools=False, setting=self.structured_output_mode)
        return self

    def uses_native_schema(self, *, tools: bool, setting: StructuredOutput | None = None) -> bool:
        """Whether a structured answer is asked for natively (the schema in the request) rather
        than by the prompt, under ``setting`` (default: this connection's), for a request that
        offers ``tools`` or not. ``native`` where the provider has no such field fails."""
        mode = setting or self.structured_output_mode
        if mode == "native" and not self.native_schema:
            raise ValueError(
                f"{type(self).__name__} has no native structured output; "
                "use structured_output_mode 'prompt' or 'auto'"
            )
        if mode == "auto":
            return self.native_schema and (self.native_schema_with_tools or not tools)
        return mode == "native"

    # The semaphore belongs to the loop it was made on; the loop itself is kept (not its id,
    # which a later loop may reuse) so a connection used from a new loop gets a new one.
    _slots: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = PrivateAttr(default=None)
    _limiter: RateLimiter | None = PrivateAttr(default=None)

    async def chat(self, request: ChatRequest) -> ChatMessage:
        raise NotImplementedError

    def unsupported_tool_settings(
        self, tool_choice: str | None, parallel_tool_calls: bool | None
    ) -> str | None:
        """Why this connection cannot honour a setup's ``tool_choice`` and
        ``parallel_tool_calls``, or None when it can. A setup asks when it is opened, so a
        setting the protocol has no way to send fails the start rather than being dropped.
        The default honours every setting."""
        return None

    def call_slot(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Hold one of the ``max_concurrent_calls`` slots for the block (no cap: at once).

        Waiting here is not a call: a provider enters the slot before it counts an attempt.
        """
        if self.max_concurrent_calls is None:
            return _NO_CAP  # no generator and context manager made per call
        return self._capped_slot(self.max_concurrent_calls)

    @contextlib.asynccontextmanager
    async def _capped_slot(self, cap: int) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        if self._slots is None or self._slots[0] is not loop:
            self._slots = (loop, asyncio.Semaphore(cap))
        async with self._slots[1]:
            yield

    def describe(self) -> str:
        """How notes and logs name this connection: its class, and its model if it has one."""
        model = getattr(self, "model", None)
        return f"{type(self).__name__} {model}" if model else type(self).__name__

    def limiter(self) -> RateLimiter | None:
        """The token buckets of ``rate_limit`` (made on first use); None without one."""
        if self.rate_limit is None:
            return None
        if self._limiter is None or self._limiter.limit is not self.rate_limit:
            self._limiter = RateLimiter(self.rate_limit)
        return self._limiter

    def attempt_gate(self, request: ChatRequest) -> contextlib.AbstractAsyncContextManager[None]:
        """Wait for the rate limit to let an attempt of ``request`` go (its request and its
        :meth:`rate_limit_tokens`), then hold a :meth:`call_slot` for the block. A wait is
        noted (``rate_limited``). Waiting here is not an attempt."""
        if self.rate_limit is None:
            return self.call_slot()
        return self._limited_slot(request)

    @contextlib.asynccontextmanager
    async def _limited_slot(self, request: ChatRequest) -> AsyncIterator[None]:
        limiter = self.limiter()
        assert limiter is not None
        waited, why = await limiter.acquire(self.rate_limit_tokens(request))
        if waited > 0:
            note_connection(
                ConnectionNote(
                    self.describe(), "rate_limited", f"waited for {why}", waited_ms=waited * 1000
                )
            )
        async with self.call_slot():
            yield

    @staticmethod
    def rate_limit_tokens(request: ChatRequest) -> int:
        """What an attempt of ``request`` takes from a tokens-per-minute bucket: its prompt's
        estimate plus its ``max_tokens`` (the provider's own worst case)."""
        return estimated_prompt_tokens(request) + (request.max_tokens or 0)

    def rate_limit_settle(self, request: ChatRequest, usage: TokenUsage | None) -> None:
        """Correct the tokens bucket by what a reply to ``request`` reports it used."""
        limiter = self.limiter()
        if limiter is not None and usage is not None:
            limiter.correct(self.rate_limit_tokens(request), usage.total_tokens)

    def rate_limit_hold(self, retry_after: float | None) -> None:
        """The provider refused an attempt for its rate limit (HTTP 429): with a
        ``rate_limit``, hold every attempt of the connection for ``retry_after`` seconds."""
        limiter = self.limiter()
        if limiter is not None and retry_after:
            limiter.hold(retry_after)


_NO_CAP: contextlib.AbstractAsyncContextManager[None] = contextlib.nullcontext()

TOOL_CHOICE_MODES = ("auto", "required", "none")
"""The ``tool_choice`` values that are not a tool's name."""

_UNFORCED_CHOICES = ("auto", "none")
"""Choices that do not force a tool call (any other forces one)."""


class ChatModelSetup(Resource):
    """A configured model: what actions ask for by name (``ResourceType.CHAT_MODEL``)."""

    resource_type: ClassVar[ResourceType] = ResourceType.CHAT_MODEL

    connection: str = Field(description="Name of a chat_model_connection resource.")
    model: str | None = None
    prompt: str | None = Field(
        default=None, description="Name of a prompt resource used as the system prompt."
    )
    tools: list[str] = Field(default_factory=list, description="Names of tool resources offered.")
    subagents: list[str] = Field(
        default_factory=list,
        description="Names of AGENT resources offered as subagent_<name> callables.",
    )
    temperature: float | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    tool_choice: str | None = Field(
        default=None,
        min_length=1,
        description="'auto', 'required', 'none', or the name of an offered tool to call. A "
        "forced call ('required' or a name) applies until the first tool result is in the "
        "conversation, then 'auto'. Unset: the provider's default (OpenAI-compatible: 'auto').",
    )
    parallel_tool_calls: bool | None = Field(
        default=None,
        description="Whether the model may ask for several tools in one turn; unset: the "
        "provider's default.",
    )
    structured_output_mode: StructuredOutput | None = Field(
        default=None,
        description="Overrides the connection's structured_output_mode for this setup.",
    )
    extra: dict[str, Any] = Field(default_factory=dict)
    compaction: CompactionSettings | None = Field(
        default=None,
        description="Summarize a conversation's older turns past a token threshold before a "
        "chat action's model call (docs/memory.md, 'Context compaction').",
    )

    _offer: SubagentOffer = PrivateAttr(default_factory=SubagentOffer)
    # None until mapped: when opened, unless a toolset lists its tools on demand.
    _offered_tools: dict[str, tuple[str, Tool]] | None = PrivateAttr(default=None)

    def open(self) -> None:
        """Map the offered tool names and build the sub-agent callables (from scratch, so
        re-opening does not duplicate them); refuse ``structured_output_mode: native`` on a
        connection without it, and tool settings it cannot send or that name no offered
        tool. Tools of a toolset that lists them on demand (an MCP server's) are mapped when
        first needed (:meth:`request`), so a replay, which sends no request, never lists them."""
        super().open()
        label = f"chat model {self.model or type(self).__name__}"
        self._offered_tools = None
        if not any(
            isinstance(resource, Toolset) and resource.lists_on_demand
            for resource in (self.get_resource(name, ResourceType.TOOL) for name in self.tools)
        ):
            self._offered()
        self._offer = offer_subagents(self.subagents, self.get_resource, label)
        if self.structured_output_mode == "native":  # on a connection without it: fail at start
            self._connection().uses_native_schema(tools=False, setting="native")
        if self.tool_choice is not None or self.parallel_tool_calls is not None:
            self._check_tool_settings(label)

    def _check_tool_settings(self, label: str) -> None:
        """Refuse a ``tool_choice`` naming no offered tool or forcing a call with none offered,
        and settings the connection cannot send."""
        offered = [*self._offered(), *self._offer.resources]
        choice = self.tool_choice
        if choice == "required" and not offered:
            raise ValueError(f"{label}: tool_choice 'required' but no tool is offered")
        if choice is not None and choice not in TOOL_CHOICE_MODES and choice not in offered:
            raise ValueError(
                f"{label}: tool_choice {choice!r} is neither one of {list(TOOL_CHOICE_MODES)} "
                f"nor an offered tool; offered: {offered}"
            )
        why = self._connection().unsupported_tool_settings(choice, self.parallel_tool_calls)
        if why is not None:
            raise ValueError(f"{label} on connection {self.connection!r}: {why}")

    def _offered(self) -> dict[str, tuple[str, Tool]]:
        """The offered tools, mapped on first need."""
        offered: dict[str, tuple[str, Tool]] | None = self._private("_offered_tools")
        if offered is None:
            offered = self._offer_tools(f"chat model {self.model or type(self).__name__}")
            self._offered_tools = offered
        return offered

    def _offer_tools(self, label: str) -> dict[str, tuple[str, Tool]]:
        """Offered name (``spec().name``, which the model calls) -> (tool resource, tool).

        A toolset resource offers each of its tools. A name under the sub-agent prefix, or two
        tools offered under one name, fails.
        """
        offered: dict[str, tuple[str, Tool]] = {}
        for resource in self.tools:
            for tool in tools_of(self.get_resource(resource, ResourceType.TOOL)):
                name = tool.spec().name
                if name.startswith(SUBAGENT_TOOL_PREFIX):
                    raise ValueError(
                        f"{label}: tool {resource!r} is offered as {name!r}: the prefix "
                        f"{SUBAGENT_TOOL_PREFIX!r} is reserved for sub-agent callables"
                    )
                if name in offered:
                    raise ValueError(
                        f"{label}: tools {offered[name][0]!r} and {resource!r} are both offered "
                        f"as {name!r}"
                    )
                offered[name] = (resource, tool)
        return offered

    @property
    def offered_tools(self) -> dict[str, str]:
        """Offered tool name -> the TOOL resource offering it, in the order offered."""
        return {name: resource for name, (resource, _) in self._offered().items()}

    @property
    def subagent_offer(self) -> SubagentOffer:
        """The sub-agent callables offered and the sub-agents skipped (with the reason)."""
        return self._offer

    def subagent(self, callable_name: str) -> str:
        """The AGENT resource behind the callable ``callable_name``, if this setup offers it."""
        if callable_name not in self._offer.resources:
            raise LookupError(
                f"model does not offer sub-agent callable {callable_name!r}; it offers "
                f"{sorted(self._offer.resources)}"
            )
        return self._offer.resources[callable_name]

    def tool(self, name: str) -> Tool:
        """The tool the model is offered as ``name`` (the name it calls, not the resource's).

        Before the tools are mapped, each tool resource is asked for ``name`` alone: a toolset
        that lists on demand answers without listing (a replayed call is never made)."""
        offered: dict[str, tuple[str, Tool]] | None = self._private("_offered_tools")
        if offered is None:
            for resource in self.tools:
                found = tool_named(self.get_resource(resource, ResourceType.TOOL), name)
                if found is not None:
                    return found
            offered = self._offered()
        if name not in offered:
            raise LookupError(f"model does not offer tool {name!r}; it offers {sorted(offered)}")
        return offered[name][1]

    def missing_prompt_args(self, prompt_args: Mapping[str, Any]) -> list[str]:
        """The placeholders of the setup's prompt that ``prompt_args`` do not give."""
        if not self.prompt:
            return []
        prompt = cast(Prompt, self.get_resource(self.prompt, ResourceType.PROMPT))
        return [name for name in prompt.placeholders if name not in prompt_args]

    def request(
        self,
        messages: list[ChatMessage],
        prompt_args: Mapping[str, Any] | None = None,
        response_schema: dict[str, Any] | None = None,
    ) -> ChatRequest:
        """The request this setup sends for ``messages``, tools attached.

        The setup's ``prompt``, filled with ``prompt_args``, comes first (:func:`with_prompt`):
        it is the system prompt, or, holding a system message, keeps each message's role.
        The system messages at the head are sent as one: strict chat templates (Mistral's,
        Gemma's, llama.cpp's) accept a single system message, first. A forced
        ``tool_choice`` turns to 'auto' once a tool result is among ``messages``: forced on
        every turn, the model could never answer.
        """
        if self.prompt:
            prompt = cast(Prompt, self.get_resource(self.prompt, ResourceType.PROMPT))
            messages = with_prompt(prompt, messages, prompt_args or {})
        offered_tools = self._offered()
        offer: SubagentOffer = self._private("_offer")
        choice = self.tool_choice
        if choice not in (None, *_UNFORCED_CHOICES) and any(m.role == "tool" for m in messages):
            choice = "auto"
        return ChatRequest(
            model=self.model,
            messages=one_leading_system_message(messages),
            tools=[*(tool.spec() for _, tool in offered_tools.values()), *offer.specs],
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            tool_choice=choice,
            parallel_tool_calls=self.parallel_tool_calls,
            response_schema=response_schema,
            extra=self.extra,
        )

    def _connection(self) -> ChatModelConnection:
        return cast(
            ChatModelConnection,
            self.get_resource(self.connection, ResourceType.CHAT_MODEL_CONNECTION),
        )

    def uses_native_schema(self) -> bool:
        """Whether this setup asks for a structured answer natively (see
        :meth:`ChatModelConnection.uses_native_schema`; its own ``structured_output_mode``
        first)."""
        offer: SubagentOffer = self._private("_offer")
        # The tools it declares, not the tools they list: a toolset (an MCP server) is listed
        # only when its tools are needed, and a replay lists none.
        tools = bool(self.tools or offer.specs)
        return self._connection().uses_native_schema(
            tools=tools, setting=self.structured_output_mode
        )

    async def chat(
        self,
        messages: list[ChatMessage],
        prompt_args: Mapping[str, Any] | None = None,
        response_schema: dict[str, Any] | None = None,
    ) -> ChatMessage:
        """Ask the model; returns its reply (which may carry tool calls). With
        ``response_schema`` the reply's content is asked to follow it natively."""
        return await self._connection().chat(self.request(messages, prompt_args, response_schema))

    def request_without_tools(self, messages: list[ChatMessage]) -> ChatRequest:
        """The request for ``messages`` alone: without this setup's prompt, tools and tool
        settings (a conversation's summary, say); its model, temperature, ``max_tokens`` and
        ``extra`` apply. Send it through :meth:`chat_connection`."""
        return ChatRequest(
            model=self.model,
            messages=one_leading_system_message(messages),
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            extra=self.extra,
        )

    def chat_connection(self) -> ChatModelConnection:
        """The connection this setup's calls go through."""
        return self._connection()


def with_prompt(
    prompt: Prompt, messages: list[ChatMessage], prompt_args: Mapping[str, Any]
) -> list[ChatMessage]:
    """``messages`` behind a setup's ``prompt`` filled with ``prompt_args``.

    A prompt with a system message keeps its roles: its leading system messages, then the
    caller's (they add to the prompt's, never replace them), then the prompt's other messages
    (a user message holding the filled-in input: upstream's idiom), then the caller's other
    messages; a caller's user message with no content (the same idiom's placeholder for the
    arguments) is then dropped. Any other prompt (a ``text``, an MCP server's prompt, which has
    no system role) is the system prompt, whatever its roles.
    """
    filled = prompt.format_messages(**prompt_args)
    if prompt.text is not None or all(message.role != "system" for message in filled):
        filled = [message.model_copy(update={"role": "system"}) for message in filled]
    prompt_system, prompt_rest = _split_system_head(filled)
    caller_system, caller_rest = _split_system_head(messages)
    if prompt_rest:
        caller_rest = [m for m in caller_rest if m.role != "user" or m.content or m.tool_calls]
    return [*prompt_system, *caller_system, *prompt_rest, *caller_rest]


def _split_system_head(
    messages: list[ChatMessage],
) -> tuple[list[ChatMessage], list[ChatMessage]]:
    """The system messages at the head of ``messages``, and the rest."""
    head = 0
    while head < len(messages) and messages[head].role == "system":
        head += 1
    return messages[:head], messages[head:]


def one_leading_system_message(messages: list[ChatMessage]) -> list[ChatMessage]:
    """``messages`` with the system messages at their head joined into one (blank-line
    separated); the rest as it is."""
    system, rest = _split_system_head(messages)
    if len(system) < 2:
        return messages
    joined = "\n\n".join(m.content for m in system if m.content)
    return [ChatMessage(role="system", content=joined), *rest]
