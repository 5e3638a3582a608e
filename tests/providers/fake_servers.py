"""Local HTTP servers that speak model-provider protocols, for tests and benchmarks.

A :class:`FakeModelServer` listens on 127.0.0.1 on an ephemeral port, records every request and
answers from a queue of scripted responses (then from ``fallback``, a function of the request).
The ``*_reply`` helpers build the JSON bodies of the OpenAI chat-completions and Responses,
Anthropic Messages, Ollama ``/api/chat``, Gemini ``generateContent`` and Bedrock Converse
protocols, so real client code runs over real HTTP.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


@dataclass
class ScriptedResponse:
    """One HTTP response. ``truncate`` announces the full length but closes after half the body."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    truncate: bool = False
    delay_seconds: float = 0.0

    def payload(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode()
        return json.dumps(self.body if self.body is not None else {}).encode()


@dataclass(frozen=True)
class RecordedRequest:
    """A request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def route(self) -> str:
        """The path without its query string."""
        return urllib.parse.urlsplit(self.path).path

    @property
    def query(self) -> dict[str, str]:
        """The query string's parameters (the last value of each)."""
        return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))


Responder = Callable[[RecordedRequest], ScriptedResponse]


def _unscripted(request: RecordedRequest) -> ScriptedResponse:
    return ScriptedResponse(status=599, body={"error": f"no scripted response for {request.path}"})


class FakeModelServer:
    """A threaded HTTP server with a scripted response queue and request counters."""

    def __init__(self, fallback: Responder = _unscripted) -> None:
        self.fallback = fallback
        self.requests: list[RecordedRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0
        """Requests being answered now, and the most at once (a concurrency cap's witness)."""
        self._queue: deque[ScriptedResponse] = deque()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        # A short poll interval keeps shutdown (and so each test's teardown) quick.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (``/v1`` under :attr:`url`)."""
        return f"{self.url}/v1"

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    def enqueue(self, *responses: ScriptedResponse) -> None:
        """Answer the next requests with ``responses``, in order."""
        with self._lock:
            self._queue.extend(responses)

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @contextlib.contextmanager
    def _answering(self) -> Iterator[None]:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            yield
        finally:
            with self._lock:
                self.in_flight -= 1

    def _next(self, request: RecordedRequest) -> ScriptedResponse:
        with self._lock:
            self.requests.append(request)
            scripted = self._queue.popleft() if self._queue else None
        return scripted if scripted is not None else self.fallback(request)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                request = RecordedRequest(
                    method="POST",
                    path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=self.rfile.read(length),
                )
                with server._answering():
                    response = server._next(request)
                    if response.delay_seconds:
                        time.sleep(response.delay_seconds)
                    # The client may have given up (a timeout test): nobody to answer then.
                    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                        self._respond(response)

            def _respond(self, response: ScriptedResponse) -> None:
                payload = response.payload()
                self.send_response(response.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in response.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if response.truncate:
                    self.wfile.write(payload[: len(payload) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return None  # keep test output quiet

        return Handler


# -- protocol bodies ----------------------------------------------------------------------------


def openai_reply(
    content: str | None = "",
    tool_calls: Sequence[tuple[str, str, dict[str, Any]]] = (),
    usage: tuple[int, int] = (3, 5),
    model: str = "fake-model",
) -> dict[str, Any]:
    """An OpenAI chat-completions body; ``tool_calls`` are ``(id, name, arguments)``."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, n, a in tool_calls
        ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if tool_calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": sum(usage),
        },
    }


def anthropic_reply(
    content: str = "",
    tool_calls: Sequence[tuple[str, str, dict[str, Any]]] = (),
    usage: tuple[int, int] = (3, 5),
    model: str = "fake-model",
) -> dict[str, Any]:
    """An Anthropic Messages body; ``tool_calls`` become ``tool_use`` blocks."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": content}] if content else []
    blocks += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in tool_calls]
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": "tool_use" if tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }


def ollama_reply(
    content: str = "",
    tool_calls: Sequence[tuple[str, dict[str, Any]]] = (),
    usage: tuple[int, int] = (3, 5),
    model: str = "fake-model",
) -> dict[str, Any]:
    """An Ollama ``/api/chat`` (non-streaming) body; ``tool_calls`` are ``(name, arguments)``."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [{"function": {"name": n, "arguments": a}} for n, a in tool_calls]
    return {
        "model": model,
        "created_at": "2024-01-01T00:00:00Z",
        "message": message,
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": usage[0],
        "eval_count": usage[1],
    }


def responses_reply(
    content: str = "",
    tool_calls: Sequence[tuple[str, str, dict[str, Any]]] = (),
    usage: tuple[int, int] = (3, 5),
    model: str = "fake-model",
) -> dict[str, Any]:
    """An OpenAI Responses API body (``store: false``); ``tool_calls`` are ``(call_id, name,
    arguments)`` and become ``function_call`` items after the message, as the API sends them."""
    output: list[dict[str, Any]] = []
    if content:
        output.append(
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": content, "annotations": []}],
            }
        )
    output += [
        {
            "type": "function_call",
            "id": f"fc_{index}",
            "call_id": call_id,
            "name": name,
            "arguments": json.dumps(arguments),
            "status": "completed",
        }
        for index, (call_id, name, arguments) in enumerate(tool_calls)
    ]
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "status": "completed",
        "model": model,
        "output": output,
        "store": False,
        "usage": {
            "input_tokens": usage[0],
            "output_tokens": usage[1],
            "total_tokens": sum(usage),
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def gemini_reply(
    content: str = "",
    tool_calls: Sequence[tuple[str | None, str, dict[str, Any]]] = (),
    usage: tuple[int, int] = (3, 5),
    model: str = "fake-model",
) -> dict[str, Any]:
    """A Gemini ``generateContent`` body; ``tool_calls`` are ``(id or None, name, args)``, each
    with a thought signature as Gemini 3 sends them."""
    parts: list[dict[str, Any]] = [{"text": content}] if content else []
    for id_, name, args in tool_calls:
        call: dict[str, Any] = {"name": name, "args": args}
        if id_ is not None:
            call["id"] = id_
        parts.append({"functionCall": call, "thoughtSignature": "c2lnbmF0dXJl"})
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": usage[0],
            "candidatesTokenCount": usage[1],
            "totalTokenCount": sum(usage),
        },
        "modelVersion": model,
        "responseId": "resp-1",
    }


def bedrock_reply(
    content: str = "",
    tool_calls: Sequence[tuple[str, str, dict[str, Any]]] = (),
    usage: tuple[int, int] = (3, 5),
) -> dict[str, Any]:
    """A Bedrock Converse body; ``tool_calls`` become ``toolUse`` blocks."""
    blocks: list[dict[str, Any]] = [{"text": content}] if content else []
    blocks += [{"toolUse": {"toolUseId": i, "name": n, "input": a}} for i, n, a in tool_calls]
    return {
        "output": {"message": {"role": "assistant", "content": blocks}},
        "stopReason": "tool_use" if tool_calls else "end_turn",
        "usage": {"inputTokens": usage[0], "outputTokens": usage[1], "totalTokens": sum(usage)},
        "metrics": {"latencyMs": 12},
    }
