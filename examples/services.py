"""Local services for the example job, each counting what it is asked.

They stand in for the outside world of a deployment: an OpenAI-compatible model endpoint, a tool
API and an external sub-agent service. They also are the independent witness of replay: every
request is counted under its idempotency key (model requests under a digest of their body,
which is the same when a call is sent again), so a call repeated after a failover shows up as
a count of 2, whatever happened inside the Flink job. The model service also keeps every request
body it gets, by ticket (:class:`Conversations`), so two runs' conversations can be compared
byte for byte. The billing service can be told to refuse some customers (404, a final failure),
the same ones on every run: ``make run`` refuses :data:`UNKNOWN_CUSTOMERS`.

    python -m examples.services --port 8765      # GET /counts shows the counters

Routes: ``POST /v1/chat/completions`` (the body's ``model`` picks a script, played by
:class:`~flink_agents.providers.scripted.ScriptedChatModelConnection`), ``POST /v1/embeddings``
(feature-hashed vectors: :func:`hashed_vectors`),
``POST /tools/<name>``, ``POST /billing`` (the :mod:`~flink_agents.providers.http_subagent`
protocol), ``POST /refunds`` (a refund service: each request kept with its order and amount,
:attr:`ExampleServices.refund_requests`), ``GET /counts``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import socket
import threading
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from examples.refunds_job import RefundRequest
from flink_agents.api import ChatMessage
from flink_agents.providers import (
    IDEMPOTENCY_HEADER,
    HashingEmbeddingModelConnection,
    ScriptedChatModelConnection,
)

# The research desk's model delegates to both sub-agents at once, then answers with what the
# billing service said; the researcher looks the question up with its tool, then answers.
SCRIPTS: dict[str, list[dict[str, Any]]] = {
    "desk": [
        {
            "tool_calls": [
                {"name": "subagent_researcher", "arguments": {"input": "$input"}},
                {"name": "subagent_billing", "arguments": {"customer": "$input"}},
            ]
        },
        {"content": "answered; billing: $last"},
    ],
    "researcher": [
        {"tool_calls": [{"name": "lookup_fact", "arguments": {"topic": "$input"}}]},
        {"content": "$last"},
    ],
    # The refund desk (bench/soak_refunds.py) asks what to refund, passages in its prompt.
    "refund-desk": [{"content": "refund 2500"}],
}

EMBEDDING_DIMENSIONS = 64
"""The length of the embeddings service's vectors when a request names none."""


UNKNOWN_CUSTOMERS: frozenset[str] = frozenset({"cobalt-88", "dunmore-5"})
"""Customers the demo's billing service does not know: it answers 404, which no retry fixes."""

UNKNOWN_CUSTOMER = "unknown customer"
"""How the billing service's refusal begins (the model is handed it as the failure's reason)."""

_TICKET = re.compile(r"ticket (T-\d+)")
_CUSTOMER = re.compile(r"customer ([\w-]+)")


class Counters:
    """Requests per (service, idempotency key), with when each was served; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._served: dict[str, dict[str, list[tuple[float, float]]]] = {}
        self._failed: dict[str, dict[str, str]] = {}  # per service: key -> what it was about
        self._open: dict[str, int] = {}

    def opened(self, route: str, delta: int) -> None:
        """A request on ``route`` arrived (+1) or was answered (-1)."""
        with self._lock:
            self._open[route] = self._open.get(route, 0) + delta

    def open_now(self) -> dict[str, int]:
        """Requests being served right now, per route (``/billing``, ``model:<name>``, ...)."""
        with self._lock:
            return {route: n for route, n in self._open.items() if n}

    def add(
        self,
        service: str,
        key: str,
        started: float,
        finished: float,
        *,
        failure: str | None = None,
    ) -> None:
        """Count a request; ``failure`` says what it was about (a ticket) when the service
        answered it with a final failure."""
        with self._lock:
            self._served.setdefault(service, {}).setdefault(key, []).append((started, finished))
            if failure is not None:
                self._failed.setdefault(service, {})[key] = failure

    def failures(self) -> dict[str, int]:
        """Per service, calls (idempotency keys) it answered with a final failure."""
        with self._lock:
            return {service: len(keys) for service, keys in self._failed.items()}

    def failed_once_before(self, service: str, moment: float) -> list[str]:
        """What the failed calls of ``service`` answered once, before ``moment``, were about."""
        with self._lock:
            served = self._served.get(service, {})
            return sorted(
                about
                for key, about in self._failed.get(service, {}).items()
                if len(served[key]) == 1 and served[key][0][1] < moment
            )

    def snapshot(self) -> dict[str, dict[str, int]]:
        """Requests per key, per service."""
        with self._lock:
            return {
                service: {key: len(times) for key, times in per_key.items()}
                for service, per_key in self._served.items()
            }

    def requests(self) -> dict[str, dict[str, list[tuple[float, float]]]]:
        """Per service, per key, when each request arrived and was answered (epoch seconds)."""
        with self._lock:
            return {
                service: {key: list(times) for key, times in per_key.items()}
                for service, per_key in self._served.items()
            }

    def repeated_after(self, moment: float, since: float | None = None) -> dict[str, int]:
        """Per service, requests repeating one whose answer had been sent before ``moment``:
        calls that had completed, made again. (A call still in flight at ``moment`` may be
        sent again: its outcome could not be recorded.) ``since``: only the requests that
        arrived from then on, for a job with several faults (a call in flight at the first
        and sent again after it is not a re-invocation at the second)."""
        with self._lock:
            return {
                service: _repeated(per_key.values(), moment, since)
                for service, per_key in self._served.items()
            }

    def failures_repeated_after(self, moment: float) -> dict[str, int]:
        """Per service, like :meth:`repeated_after`, for the calls it answered with a failure."""
        with self._lock:
            return {
                service: _repeated((self._served[service][key] for key in keys), moment)
                for service, keys in self._failed.items()
            }

    def in_flight_at(self, moment: float) -> dict[str, int]:
        """Per service, requests that had started but not been answered at ``moment``."""
        return self.in_flight_between(moment, moment)

    def in_flight_between(self, start: float, end: float) -> dict[str, int]:
        """Per service, requests started by ``end`` and not answered before ``start``: the calls
        whose outcome a crash at ``end`` may have caught unrecorded if recording one takes up to
        ``end - start``."""
        with self._lock:
            return {
                service: sum(
                    1
                    for times in per_key.values()
                    for started, finished in times
                    if started <= end and finished > start
                )
                for service, per_key in self._served.items()
            }


def wait_until_port_free(port: int, timeout_s: float = 90.0) -> None:
    """Wait until ``port`` can be bound on 127.0.0.1: another run's example services (`make
    run`, an e2e test) may hold it for a while. Raises TimeoutError naming the port."""
    deadline = time.monotonic() + timeout_s
    while True:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
                return
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"port {port} stayed busy for {timeout_s:.0f} s") from exc
        time.sleep(0.5)


def _repeated(
    served: Iterable[list[tuple[float, float]]], moment: float, since: float | None = None
) -> int:
    """Requests repeating a call whose first answer was sent before ``moment`` (arrived at or
    after ``since``, if given)."""
    repeats = (times for times in served if len(times) > 1 and min(e for _, e in times) < moment)
    if since is None:
        return sum(len(times) - 1 for times in repeats)
    return sum(1 for times in repeats for start, _ in times if start >= since)


def ticket_of(text: str) -> str:
    """The ticket a prompt names (``?`` if none): a desk's prompt names its ticket, and the
    sub-agents are handed that prompt."""
    found = _TICKET.search(text)
    return found.group(1) if found else "?"


class Conversations:
    """Every distinct request body the model service got, as received, by ticket, with when it
    last arrived; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bodies: dict[str, dict[str, float]] = {}

    def add(self, body: str, at: float) -> None:
        with self._lock:
            self._bodies.setdefault(ticket_of(body), {})[body] = at

    def by_ticket(self) -> dict[str, list[str]]:
        """Per ticket, its request bodies in a fixed order (a request sent again counts once)."""
        with self._lock:
            return {ticket: sorted(bodies) for ticket, bodies in self._bodies.items()}

    def received_after(self, ticket: str, moment: float, containing: str) -> bool:
        """Whether a request of ``ticket`` holding ``containing`` arrived after ``moment``."""
        with self._lock:
            bodies = self._bodies.get(ticket, {})
            return any(at > moment and containing in body for body, at in bodies.items())


def _digest(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:24]


def hashed_vectors(texts: list[str], dimensions: int = EMBEDDING_DIMENSIONS) -> list[list[float]]:
    """What the embeddings service answers for ``texts``: their feature-hashed vectors."""
    hashing = HashingEmbeddingModelConnection(dimensions=dimensions)
    return asyncio.run(hashing.embed(texts, None, dimensions))


def embedding_key(model: str, texts: list[str]) -> str:
    """The key the embeddings service counts a request under: its model and texts (what a
    call sends again after a failover, and what the call's record holds)."""
    return _digest(["embeddings", model, texts])


def _openai_completion(message: ChatMessage, model: str) -> dict[str, Any]:
    """An OpenAI chat-completions response body carrying ``message``."""
    reply: dict[str, Any] = {"role": "assistant", "content": message.content or None}
    if message.tool_calls:
        reply["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in message.tool_calls
        ]
    return {
        "id": f"chatcmpl-{int(time.time() * 1000)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": reply,
                "finish_reason": "tool_calls" if message.tool_calls else "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _messages(body: dict[str, Any]) -> list[ChatMessage]:
    """OpenAI request messages as ChatMessages (enough for the scripts: roles and contents)."""
    return [
        ChatMessage(
            role=m["role"],
            content=m.get("content") or "",
            tool_call_id=m.get("tool_call_id"),
        )
        for m in body["messages"]
    ]


def lookup_fact_answer(topic: str) -> str:
    return f"{topic}: covered by the premium plan"


class ExampleServices(ThreadingHTTPServer):
    """The three services on one loopback port; the billing service refuses
    ``unknown_customers``."""

    daemon_threads = True

    def __init__(
        self,
        port: int = 0,
        latency_seconds: float = 0.0,
        unknown_customers: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.unknown_customers = unknown_customers
        self.counters = Counters()
        self.conversations = Conversations()
        self.latency_seconds = latency_seconds
        self.refund_requests: list[RefundRequest] = []
        self.models = {
            name: ScriptedChatModelConnection(name=f"service-{name}", turns=turns)
            for name, turns in SCRIPTS.items()
        }

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def start(self) -> ExampleServices:
        threading.Thread(target=self.serve_forever, name="example-services", daemon=True).start()
        return self


class _Handler(BaseHTTPRequestHandler):
    server: ExampleServices

    def log_message(self, format: str, *args: Any) -> None:  # quiet: counts tell the story
        return

    def do_GET(self) -> None:
        if self.path == "/counts":
            self._answer(200, self.server.counters.snapshot())
        else:
            self._answer(404, {"error": f"no route {self.path}"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._answer(400, {"error": "body is not JSON"})
            return
        started = time.time()
        route = f"model:{body.get('model')}" if self.path.startswith("/v1/") else self.path
        self.server.counters.opened(route, +1)
        try:
            if self.server.latency_seconds:
                time.sleep(self.server.latency_seconds)
            if self.path == "/v1/chat/completions":
                self.server.conversations.add(raw.decode(), started)
                counted = self._chat(body)
            elif self.path == "/v1/embeddings":
                counted = self._embeddings(body)
            elif self.path == "/refunds":
                counted = self._refund(body)
            elif self.path.startswith("/tools/"):
                counted = self._tool(self.path.removeprefix("/tools/"), body)
            elif self.path == "/billing":
                counted = self._billing(body)
            else:
                counted = None
                self._answer(404, {"error": f"no route {self.path}"})
        finally:
            self.server.counters.opened(route, -1)
        if counted is not None:
            service, key, failure = counted
            self.server.counters.add(service, key, started, time.time(), failure=failure)

    # Each route answers and returns (service, key, failure) to count (failure: what a final
    # failure was about), or None for a request that reached no service (unknown route or model).

    def _chat(self, body: dict[str, Any]) -> tuple[str, str, str | None] | None:
        model = self.server.models.get(body.get("model", ""))
        if model is None:
            self._answer(404, {"error": {"message": f"unknown model {body.get('model')!r}"}})
            return None
        reply = model.reply(_messages(body))
        self._answer(200, _openai_completion(reply, body["model"]))
        return "model", _digest(body), None

    def _embeddings(self, body: dict[str, Any]) -> tuple[str, str, str | None]:
        texts = body.get("input", [])
        texts = [texts] if isinstance(texts, str) else [str(text) for text in texts]
        model = str(body.get("model", ""))
        dimensions = int(body.get("dimensions") or EMBEDDING_DIMENSIONS)
        data = [
            {"object": "embedding", "index": n, "embedding": vector}
            for n, vector in enumerate(hashed_vectors(texts, dimensions))
        ]
        tokens = sum(len(text.split()) for text in texts)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        self._answer(200, {"object": "list", "model": model, "data": data, "usage": usage})
        return "embeddings", embedding_key(model, texts), None

    def _refund(self, body: dict[str, Any]) -> tuple[str, str, str | None]:
        key = self.headers.get(IDEMPOTENCY_HEADER) or _digest(body)
        amount = int(body.get("amount", 0))
        request = RefundRequest(key, str(body.get("order", "?")), amount, time.time())
        self.server.refund_requests.append(request)  # one append: atomic under the GIL
        self._answer(200, {"refunded": amount})
        return "refunds", key, None

    def _tool(self, name: str, body: dict[str, Any]) -> tuple[str, str, str | None] | None:
        if name != "lookup_fact":
            self._answer(404, {"error": f"no tool {name!r}"})
            return None
        self._answer(200, {"result": lookup_fact_answer(str(body.get("topic", "")))})
        key = self.headers.get(IDEMPOTENCY_HEADER) or _digest([name, body])
        return f"tool:{name}", key, None

    def _billing(self, body: dict[str, Any]) -> tuple[str, str, str | None]:
        customer = str(body.get("input", {}).get("customer", "?"))
        # The desk's model passes its whole prompt, which names the customer.
        found = _CUSTOMER.search(customer)
        customer_id = found.group(1) if found else customer
        key = self.headers.get(IDEMPOTENCY_HEADER) or _digest(body)
        if customer_id in self.server.unknown_customers:
            self._answer(404, {"error": f"{UNKNOWN_CUSTOMER} {customer_id}"})
            return "billing", key, ticket_of(customer)
        self._answer(200, {"result": {"customer": customer, "status": "paid", "balance": 0}})
        return "billing", key, None

    def _answer(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            # The caller died meanwhile (a killed TaskManager): the call still happened, so it is
            # counted like any other, with its end after the caller's death.
            self.close_connection = True


def main() -> None:
    parser = argparse.ArgumentParser(description="The example job's local services.")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per request")
    args = parser.parse_args()
    services = ExampleServices(args.port, args.latency)
    print(f"serving on {services.url}", flush=True)
    services.serve_forever()


if __name__ == "__main__":
    main()
