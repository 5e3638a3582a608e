"""An MCP server's prompt as a prompt resource.

:class:`McpPrompt` names an :class:`~flink_agents.providers.mcp.server.McpServer` resource, one of
its prompts and the prompt's ``arguments``. When first used it checks the arguments against the
server's listing and fetches the prompt (opening it contacts no server), so it serves as a
system prompt or an input prompt like any :class:`~flink_agents.api.prompts.Prompt` (the
server's text is taken as it is: no ``{placeholders}`` are filled in it). :meth:`McpPrompt.render`
fetches it with other arguments; from an action, run it as a durable call.
"""

from __future__ import annotations

from typing import Any, cast

from pydantic import Field, model_validator

from flink_agents.api.chat import ChatMessage
from flink_agents.api.prompts import Prompt
from flink_agents.api.resources import ResourceType
from flink_agents.providers.mcp.content import block_text
from flink_agents.providers.mcp.server import McpServer


def _literal(text: str) -> str:
    """``text`` with its braces doubled, so template filling leaves it unchanged."""
    return text.replace("{", "{{").replace("}", "}}")


class McpPrompt(Prompt):
    """The prompt ``prompt`` of the MCP server resource ``server``, fetched with ``arguments``."""

    server: str = Field(description="Name of an McpServer (TOOL) resource.")
    prompt: str = Field(description="The prompt's name on the server.")
    arguments: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _exactly_one_form(self) -> McpPrompt:
        # Replaces Prompt's check: the messages are fetched when the prompt is opened.
        if self.text is not None or self.messages is not None:
            raise ValueError(
                "an MCP prompt takes no 'text' or 'messages': they come from the server"
            )
        return self

    def open(self) -> None:
        """Contact no server yet: the prompt is fetched when it is first used."""
        super().open()
        self.messages = None

    def _fetched(self) -> None:
        """Check the arguments against the server's listing and fetch the messages, once."""
        if self.messages is not None:
            return
        self.check_arguments(self.arguments)
        messages = self._server().run_blocking(lambda: self.render(**self.arguments))
        self.messages = [
            message.model_copy(update={"content": _literal(message.content)})
            for message in messages
        ]

    def format_messages(self, **values: Any) -> list[ChatMessage]:
        self._fetched()
        return super().format_messages(**values)

    def _server(self) -> McpServer:
        server = self.get_resource(self.server, ResourceType.TOOL)
        if not isinstance(server, McpServer):
            raise ValueError(
                f"resource {self.server!r} is a {type(server).__name__}, not an McpServer"
            )
        return server

    def check_arguments(self, arguments: dict[str, Any]) -> None:
        """Fail if the server lists no such prompt, or ``arguments`` miss a required one or
        name one it does not take."""
        server = self._server()
        listed = server.prompts.get(self.prompt)
        if listed is None:
            raise ValueError(
                f"MCP server {server.namespace!r} lists no prompt {self.prompt!r}; it lists "
                f"{sorted(server.prompts)}"
            )
        declared = {argument.name: argument for argument in listed.arguments or []}
        unknown = sorted(set(arguments) - set(declared))
        missing = sorted(
            name
            for name, argument in declared.items()
            if argument.required and name not in arguments
        )
        if unknown or missing:
            raise ValueError(
                f"MCP prompt {self.prompt!r}: missing argument(s) {missing}, unknown argument(s) "
                f"{unknown}; it takes {sorted(declared)}"
            )

    async def render(self, **arguments: str) -> list[ChatMessage]:
        """The prompt's messages as the server renders them for ``arguments``."""
        result = await self._server().get_prompt(self.prompt, arguments)
        return [
            ChatMessage(role=cast(Any, message.role), content=block_text(message.content))
            for message in result.messages
        ]
