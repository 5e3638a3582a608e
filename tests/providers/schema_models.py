"""Fake models behind :class:`FakeModelServer` that police and honour each protocol's
structured-output fields the way the real servers do.

A :class:`SchemaModel` plays a small script: it calls the scripted tools first, one per turn,
then gives its final answer. What the answer looks like depends on what the request asked for,
as with a real model:

* OpenAI chat completions: ``response_format: {type: json_schema, json_schema: {name, schema}}``
  is checked (a bad one is a 400 like OpenAI's); the answer is the JSON text in ``content``.
  Tools and the response format coexist: tool calls come with ``content: null``.
* Anthropic Messages: ``tool_choice`` is checked (``tool`` must name an offered tool, ``any``
  and ``tool`` need tools) and so is every ``tool_use`` having its ``tool_result`` in the next
  user turn (both 400s of the real API). ``{type: tool, name}`` is answered with that tool's
  ``tool_use`` block; under ``{type: any}`` the model calls a scripted tool, then the other
  offered tool described as the final answer's; it never answers in text then.
* Ollama ``/api/chat``: ``format`` (a schema) makes the answer JSON in ``message.content``, and
  like a self-hosted Ollama it wins over tools: with ``format`` the model calls none.

Without any of these, the model answers JSON text only when a system message asks for the JSON
schema (the prompt instruction), else prose. ``strict_roles`` refuses, like llama.cpp's and
Mistral's chat templates, a system message anywhere but first (HTTP 500, "roles must
alternate"); ``takes_json_schema=False`` refuses a JSON-schema ``response_format`` as
llama-cpp-python's server does (HTTP 500, a validation error).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from tests.providers.fake_servers import (
    RecordedRequest,
    ScriptedResponse,
    anthropic_reply,
    ollama_reply,
    openai_reply,
)

_OPENAI_SCHEMA_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
PROSE = "It is sunny, I think."


def _refused(status: int, message: str) -> ScriptedResponse:
    return ScriptedResponse(status=status, body={"error": {"message": message}})


# llama-cpp-python's server takes response_format types text and json_object only; its request
# validation error comes back as an HTTP 500.
_LLAMA_CPP_PYTHON_REFUSAL = _refused(
    500,
    "1 validation error for CreateChatCompletionRequest\nresponse_format.type\n  Input should "
    "be 'text' or 'json_object' [type=literal_error, input_value='json_schema', input_type=str]",
)


@dataclass
class SchemaModel:
    """Calls ``tool_calls`` (name, arguments) first, one per turn, then answers ``answers``
    (one per final turn: a later correction gets the next one, the last one repeats)."""

    answers: list[dict[str, Any]]
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    strict_roles: bool = False
    takes_json_schema: bool = True
    answered: int = 0

    def _answer(self) -> dict[str, Any]:
        answer = self.answers[min(self.answered, len(self.answers) - 1)]
        self.answered += 1
        return answer

    def _tools_done(self, results: int) -> bool:
        return results >= len(self.tool_calls)

    def _roles_refused(self, messages: list[dict[str, Any]]) -> ScriptedResponse | None:
        if self.strict_roles and any(m["role"] == "system" for m in messages[1:]):
            return _refused(500, "Conversation roles must alternate user/assistant/user/...")
        return None

    @staticmethod
    def _asked_by_prompt(system_texts: list[str]) -> bool:
        return any("JSON schema" in text for text in system_texts)

    def _final_text(self, asked: bool) -> str:
        answer = self._answer()
        return json.dumps(answer) if asked else PROSE

    # -- OpenAI chat completions ------------------------------------------------------------

    def openai(self, request: RecordedRequest) -> ScriptedResponse:
        body = request.json()
        messages = body["messages"]
        refused = self._roles_refused(messages)
        if refused is not None:
            return refused
        native = body.get("response_format")
        if native is not None and not self.takes_json_schema:
            return _LLAMA_CPP_PYTHON_REFUSAL
        if native is not None:
            spec = native.get("json_schema") or {}
            if native.get("type") != "json_schema" or not isinstance(spec.get("schema"), dict):
                return _refused(400, "Invalid 'response_format': expected json_schema.schema")
            if not _OPENAI_SCHEMA_NAME.match(str(spec.get("name", ""))):
                return _refused(400, "Invalid 'response_format.json_schema.name'")
        results = sum(1 for m in messages if m["role"] == "tool")
        if body.get("tools") and not self._tools_done(results):
            name, arguments = self.tool_calls[results]
            return ScriptedResponse(body=openai_reply(None, [(f"call_{results}", name, arguments)]))
        systems = [m["content"] for m in messages if m["role"] == "system"]
        asked = native is not None or self._asked_by_prompt(systems)
        return ScriptedResponse(body=openai_reply(self._final_text(asked)))

    # -- Anthropic Messages -----------------------------------------------------------------

    def anthropic(self, request: RecordedRequest) -> ScriptedResponse:
        body = request.json()
        turns = body["messages"]
        problem = _unanswered_tool_use(turns)
        if problem is not None:
            return _refused(400, problem)
        tools = [tool["name"] for tool in body.get("tools", [])]
        choice = body.get("tool_choice")
        if choice is not None:
            if choice.get("type") in ("any", "tool") and not tools:
                return _refused(400, "tool_choice requires tools")
            if choice.get("type") == "tool" and choice.get("name") not in tools:
                return _refused(400, f"tool_choice names {choice.get('name')!r}, not a tool")
        results = sum(
            1
            for turn in turns
            if turn["role"] == "user"
            for block in turn["content"]
            if block["type"] == "tool_result"
        )
        forced = choice is not None and choice.get("type") == "tool"
        if tools and not forced and not self._tools_done(results):
            name, arguments = self.tool_calls[results]
            return ScriptedResponse(
                body=anthropic_reply("", [(f"toolu_{results}", name, arguments)])
            )
        if forced or (choice is not None and choice.get("type") == "any"):
            # The model reads the descriptions: the answer goes to the tool made for it.
            answer_tool = choice["name"] if forced else _answer_tool(body["tools"])
            call = (f"toolu_answer_{self.answered}", answer_tool, self._answer())
            return ScriptedResponse(body=anthropic_reply("", [call]))
        asked = self._asked_by_prompt([body.get("system", "")])
        return ScriptedResponse(body=anthropic_reply(self._final_text(asked)))

    # -- Ollama /api/chat -------------------------------------------------------------------

    def ollama(self, request: RecordedRequest) -> ScriptedResponse:
        body = request.json()
        messages = body["messages"]
        refused = self._roles_refused(messages)
        if refused is not None:
            return refused
        native = body.get("format")
        if native is not None and not isinstance(native, dict | str):
            return _refused(400, "invalid format")
        results = sum(1 for m in messages if m["role"] == "tool")
        # A self-hosted Ollama lets format win: constrained to the schema, it calls no tool.
        if native is None and body.get("tools") and not self._tools_done(results):
            name, arguments = self.tool_calls[results]
            return ScriptedResponse(body=ollama_reply("", [(name, arguments)]))
        systems = [m["content"] for m in messages if m["role"] == "system"]
        asked = native is not None or self._asked_by_prompt(systems)
        return ScriptedResponse(body=ollama_reply(self._final_text(asked)))


def _answer_tool(tools: list[dict[str, Any]]) -> str:
    return next(t["name"] for t in tools if "final answer" in t.get("description", "").lower())


def _unanswered_tool_use(turns: list[dict[str, Any]]) -> str | None:
    """The Messages API's 400 when a ``tool_use`` block has no ``tool_result`` right after."""
    for index, turn in enumerate(turns):
        if turn["role"] != "assistant":
            continue
        used = {b["id"] for b in turn["content"] if b["type"] == "tool_use"}
        following = turns[index + 1]["content"] if index + 1 < len(turns) else []
        answered = {b["tool_use_id"] for b in following if b.get("type") == "tool_result"}
        if used - answered:
            return f"tool_use ids were found without tool_result blocks: {sorted(used - answered)}"
    return None
