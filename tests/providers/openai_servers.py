"""Fake OpenAI-compatible servers that behave as real ones do where they differ from OpenAI.

Each is a responder for :class:`~tests.providers.fake_servers.FakeModelServer`: it checks a
request the way the real server does (refusing what it refuses, with the status and body it
answers with), then lets a scripted :class:`ToolModel` answer under the server's tool rules.

* :class:`LlamaCppPythonServer`: ``python -m llama_cpp.server --chat_format
  chatml-function-calling`` (llama-cpp-python 0.3; the texts below are the real server's,
  0.3.36). Its request types want an assistant ``content`` to be a string or absent: ``null``
  fails FastAPI's request validation inside its route handler, which answers 500 with every
  branch of the message union in one text; an absent one passes validation and then fails the
  chat template (500, ``'dict object' has no attribute 'content'``).
  Without ``tool_choice`` (or with ``none``) the model is shown no tool; with ``auto`` a text
  answer comes back empty (its grammar allows a call or the end token only); ``required`` fails
  an assertion (500, empty message); ``role: tool`` messages never reach the prompt. Wrong
  paths get FastAPI's ``{"detail": "Not Found"}``.
* :class:`VllmServer`: tools with ``tool_choice`` ``auto`` (or unset, which it reads as
  ``auto``) need ``--enable-auto-tool-choice --tool-call-parser``; without them: 400.
  ``required`` and a named tool work either way (guided decoding). ``content`` may be null,
  empty or absent.
* :class:`OllamaOpenAIServer`: Ollama's ``/v1`` endpoint. An assistant turn whose ``content`` is
  null or absent is refused (400, ``invalid message content type: <nil>``); ``tool_choice`` is
  ignored (the model always decides); an unknown model is a 404; wrong paths get Go's
  ``404 page not found`` as text.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.providers.fake_servers import RecordedRequest, ScriptedResponse

CHAT_PATH = "/v1/chat/completions"


@dataclass
class ToolModel:
    """The served model: it makes ``calls`` (tool name, arguments as the JSON text it
    emits), one per turn, while it may call tools, then answers ``answer``."""

    calls: list[tuple[str, str]]
    answer: str

    def next_call(self, messages: list[dict[str, Any]]) -> tuple[str, str] | None:
        """The call of this turn: the one after those already in the conversation."""
        made = sum(len(m.get("tool_calls") or ()) for m in messages if m["role"] == "assistant")
        return self.calls[made] if made < len(self.calls) else None


def completion(
    content: str | None,
    calls: Sequence[tuple[str, str, str]] = (),
    **message_fields: Any,
) -> dict[str, Any]:
    """A chat completion; ``calls`` are (id, name, arguments text) as the server sends them."""
    message: dict[str, Any] = {"role": "assistant", "content": content, **message_fields}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in calls
        ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "served-model",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
    }


def _openai_error(status: int, message: str, kind: str) -> ScriptedResponse:
    error = {"message": message, "type": kind, "param": None, "code": None}
    return ScriptedResponse(status=status, body={"error": error})


@dataclass
class LlamaCppPythonServer:
    """llama-cpp-python's server with the ``chatml-function-calling`` chat format."""

    model: ToolModel
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def __call__(self, request: RecordedRequest) -> ScriptedResponse:
        if request.path != CHAT_PATH:
            return ScriptedResponse(status=404, body={"detail": "Not Found"})
        body = request.json()
        invalid = self._validation_wall(body["messages"])
        if invalid:
            return _openai_error(500, invalid, "internal_server_error")
        if any(m["role"] == "assistant" and "content" not in m for m in body["messages"]):
            message = "'dict object' has no attribute 'content'"  # the template's StrictUndefined
            return _openai_error(500, message, "internal_server_error")
        choice = body.get("tool_choice")
        if not body.get("tools") or choice in (None, "none"):
            return ScriptedResponse(body=completion(self.model.answer))
        # The template drops role "tool" messages: the model sees its calls, not their results.
        call = self.model.next_call(body["messages"])
        if isinstance(choice, dict):
            named = choice["function"]["name"]
            arguments = call[1] if call and call[0] == named else "{}"
            return ScriptedResponse(body=self._calls(named, arguments))
        if choice != "auto":  # "required": an assertion of the handler fails
            return _openai_error(500, "", "internal_server_error")
        if call is None:
            return ScriptedResponse(body=completion(""))  # its grammar ends a text answer at once
        return ScriptedResponse(body=self._calls(*call))

    def _calls(self, name: str, arguments: str) -> dict[str, Any]:
        cmpl = f"cmpl-{next(self._ids)}"
        return completion(
            None,
            [(f"call__0_{name}_{cmpl}", name, arguments)],
            function_call={"name": name, "arguments": arguments},
        )

    @staticmethod
    def _validation_wall(messages: list[dict[str, Any]]) -> str:
        """FastAPI's text for the messages its request types refuse: each message is matched
        against every member of the message union, and each member's errors are listed."""
        errors: list[dict[str, Any]] = []
        for index, message in enumerate(messages):
            if message["role"] != "assistant" or "content" not in message:
                continue
            if isinstance(message["content"], str):
                continue
            at = ("body", "messages", index)
            errors += [
                _literal_error((*at, "ChatCompletionRequestSystemMessage"), "system"),
                _literal_error((*at, "ChatCompletionRequestUserMessage"), "user"),
                {
                    "type": "string_type",
                    "loc": (*at, "ChatCompletionRequestAssistantMessage", "content"),
                    "msg": "Input should be a valid string",
                    "input": message["content"],
                },
                _literal_error((*at, "ChatCompletionRequestToolMessage"), "tool"),
                _missing((*at, "ChatCompletionRequestToolMessage"), "tool_call_id", message),
                _literal_error((*at, "ChatCompletionRequestFunctionMessage"), "function"),
                _missing((*at, "ChatCompletionRequestFunctionMessage"), "name", message),
            ]
        if not errors:
            return ""
        listed = "".join(f"  {e}\n" for e in errors)
        where = (
            '  File "/srv/llama_cpp/server/app.py", line 376, in create_chat_completion\n'
            "    POST /v1/chat/completions"
        )
        return f"{len(errors)} validation errors:\n{listed}\n{where}"


def _literal_error(loc: tuple[Any, ...], expected: str) -> dict[str, Any]:
    return {
        "type": "literal_error",
        "loc": (*loc, "role"),
        "msg": f"Input should be '{expected}'",
        "input": "assistant",
        "ctx": {"expected": f"'{expected}'"},
    }


def _missing(loc: tuple[Any, ...], name: str, message: dict[str, Any]) -> dict[str, Any]:
    return {"type": "missing", "loc": (*loc, name), "msg": "Field required", "input": message}


AUTO_TOOL_CHOICE_ERROR = (
    '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
)


@dataclass
class VllmServer:
    """vLLM's OpenAI server; ``auto_tool_choice``: started with ``--enable-auto-tool-choice
    --tool-call-parser <parser>``."""

    model: ToolModel
    auto_tool_choice: bool = True
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def __call__(self, request: RecordedRequest) -> ScriptedResponse:
        if request.path != CHAT_PATH:
            return ScriptedResponse(status=404, body={"detail": "Not Found"})
        body = request.json()
        tools = body.get("tools")
        choice = body.get("tool_choice", "auto" if tools else "none")
        if tools and choice == "auto" and not self.auto_tool_choice:
            error = {"object": "error", "message": AUTO_TOOL_CHOICE_ERROR}
            return ScriptedResponse(
                status=400, body={**error, "type": "BadRequestError", "param": None, "code": 400}
            )
        call = self.model.next_call(body["messages"]) if tools and choice != "none" else None
        if isinstance(choice, dict):
            named = choice["function"]["name"]
            call = (named, call[1] if call and call[0] == named else "{}")
        if call is None:
            return ScriptedResponse(body=completion(self.model.answer))
        call_id = f"chatcmpl-tool-{next(self._ids):032x}"
        return ScriptedResponse(body=completion(None, [(call_id, *call)]))


@dataclass
class OllamaOpenAIServer:
    """Ollama's OpenAI-compatible endpoint (``/v1``), serving ``models``."""

    model: ToolModel
    models: tuple[str, ...] = ("m",)
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def __call__(self, request: RecordedRequest) -> ScriptedResponse:
        if request.path != CHAT_PATH:
            return ScriptedResponse(status=404, body="404 page not found")
        body = request.json()
        if body["model"] not in self.models:
            message = f'model "{body["model"]}" not found, try pulling it first'
            return _openai_error(404, message, "api_error")
        for message in body["messages"]:
            if not isinstance(message.get("content"), str | list):
                return _openai_error(
                    400, "invalid message content type: <nil>", "invalid_request_error"
                )
        # tool_choice is read and ignored: with tools, the model decides.
        call = self.model.next_call(body["messages"]) if body.get("tools") else None
        if call is None:
            return ScriptedResponse(body=completion(self.model.answer))
        call_id = f"call_{next(self._ids):08x}"
        return ScriptedResponse(body=completion("", [(call_id, *call)]))
