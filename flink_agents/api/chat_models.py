"""Chat models, split in two resources.

* A :class:`ChatModelConnection` is the endpoint: a client, a base URL, credentials.
* A :class:`ChatModelSetup` is one way of using it: model name, system prompt, tools, temperature.
  Several setups may share one connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any, ClassVar, cast

from pydantic import Field, PrivateAttr

from flink_agents.api.chat import ChatMessage, ChatRequest
from flink_agents.api.prompts import Prompt
from flink_agents.api.resources import Resource, ResourceType
from flink_agents.api.subagents.delegation import SUBAGENT_TOOL_PREFIX
from flink_agents.api.subagents.offers import SubagentOffer, offer_subagents
from flink_agents.api.tools import Tool, tools_of


class ChatModelConnection(Resource):
    """An endpoint that answers chat requests. Providers subclass this.

    ``max_concurrent_calls`` caps the calls in flight through this connection (one resource
    instance: one per operator subtask, shared by every key and run of it). A provider makes each
    call, or each attempt of it, inside :meth:`call_slot`.
    """

    resource_type: ClassVar[ResourceType] = ResourceType.CHAT_MODEL_CONNECTION

    max_concurrent_calls: int | None = Field(
        default=None,
        ge=1,
        description="Calls in flight at once through this connection; none: no cap.",
    )

    # The semaphore belongs to the loop it was made on; the loop itself is kept (not its id,
    # which a later loop may reuse) so a connection used from a new loop gets a new one.
    _slots: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = PrivateAttr(default=None)

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
    extra: dict[str, Any] = Field(default_factory=dict)

    _offer: SubagentOffer = PrivateAttr(default_factory=SubagentOffer)
    _offered_tools: dict[str, tuple[str, Tool]] = PrivateAttr(default_factory=dict)

    def open(self) -> None:
        """Map the offered tool names and build the sub-agent callables (from scratch, so
        re-opening does not duplicate them)."""
        super().open()
        label = f"chat model {self.model or type(self).__name__}"
        self._offered_tools = self._offer_tools(label)
        self._offer = offer_subagents(self.subagents, self.get_resource, label)
        if self.tool_choice is not None or self.parallel_tool_calls is not None:
            self._check_tool_settings(label)

    def _check_tool_settings(self, label: str) -> None:
        """Refuse a ``tool_choice`` naming no offered tool or forcing a call with none offered,
        and settings the connection cannot send."""
        offered = [*self._offered_tools, *self._offer.resources]
        choice = self.tool_choice
        if choice == "required" and not offered:
            raise ValueError(f"{label}: tool_choice 'required' but no tool is offered")
        if choice is not None and choice not in TOOL_CHOICE_MODES and choice not in offered:
            raise ValueError(
                f"{label}: tool_choice {choice!r} is neither one of {list(TOOL_CHOICE_MODES)} "
                f"nor an offered tool; offered: {offered}"
            )
        connection = cast(
            ChatModelConnection,
            self.get_resource(self.connection, ResourceType.CHAT_MODEL_CONNECTION),
        )
        why = connection.unsupported_tool_settings(choice, self.parallel_tool_calls)
        if why is not None:
            raise ValueError(f"{label} on connection {self.connection!r}: {why}")

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
        return {name: resource for name, (resource, _) in self._offered_tools.items()}

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
        """The tool the model is offered as ``name`` (the name it calls, not the resource's)."""
        if name not in self._offered_tools:
            raise LookupError(
                f"model does not offer tool {name!r}; it offers {sorted(self._offered_tools)}"
            )
        return self._offered_tools[name][1]

    def request(
        self, messages: list[ChatMessage], prompt_args: Mapping[str, Any] | None = None
    ) -> ChatRequest:
        """The request this setup sends for ``messages``, tools attached.

        The setup's ``prompt``, filled with ``prompt_args``, is the system prompt: it always
        comes first, and system messages of the caller follow it (they add to it, never
        replace it). A forced ``tool_choice`` turns to 'auto' once a tool result is among
        ``messages``: forced on every turn, the model could never answer.
        """
        if self.prompt:
            prompt = cast(Prompt, self.get_resource(self.prompt, ResourceType.PROMPT))
            filled = prompt.format_messages(**(prompt_args or {}))
            messages = [*(m.model_copy(update={"role": "system"}) for m in filled), *messages]
        offered_tools: dict[str, tuple[str, Tool]] = self._private("_offered_tools")
        offer: SubagentOffer = self._private("_offer")
        choice = self.tool_choice
        if choice not in (None, *_UNFORCED_CHOICES) and any(m.role == "tool" for m in messages):
            choice = "auto"
        return ChatRequest(
            model=self.model,
            messages=messages,
            tools=[*(tool.spec() for _, tool in offered_tools.values()), *offer.specs],
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            tool_choice=choice,
            parallel_tool_calls=self.parallel_tool_calls,
            extra=self.extra,
        )

    async def chat(
        self, messages: list[ChatMessage], prompt_args: Mapping[str, Any] | None = None
    ) -> ChatMessage:
        """Ask the model; returns its reply (which may carry tool calls)."""
        connection = cast(
            ChatModelConnection,
            self.get_resource(self.connection, ResourceType.CHAT_MODEL_CONNECTION),
        )
        return await connection.chat(self.request(messages, prompt_args))
