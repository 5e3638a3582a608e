"""A refunds agent whose runs pause for approval, and the local service its calls go to.

Each run quotes its order at the service (a durable call), waits for a person's approval, and
refunds what was approved (an edit's amount) at the service. The service is the witness of
replay: it counts every request by route and order, so a completed call made again after a
restore shows up as a count of 2, whatever happened inside the job. The workers reach it by the
URL each input carries (``service``), so the job needs no configuration of its own.
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from flink_agents.api import InputEvent, OutputEvent, RunnerContext, action
from flink_agents.testing.plans import agent_plan

SLOW = pytest.mark.skipif(
    os.environ.get("FLINK_AGENTS_SLOW_WAITS") != "1",
    reason="slow (two to three minutes): runs from `make waits-rescale`",
)
"""Marks the waits scenarios that run only from `make waits-rescale`."""

QUOTED = 2500
"""What the service quotes for every order."""


async def quote_refund(service: str, order: str) -> int:
    async with httpx.AsyncClient(timeout=30) as client:
        response = await client.post(f"{service}/quote", json={"order": order})
    response.raise_for_status()
    return int(response.json()["amount"])


async def issue_refund(service: str, order: str, amount: int) -> str:
    async with httpx.AsyncClient(timeout=30) as client:
        response = await client.post(f"{service}/refund", json={"order": order, "amount": amount})
    response.raise_for_status()
    return f"refunded {amount} on {order}"


@action(InputEvent)
async def refund_after_approval(event: InputEvent, ctx: RunnerContext) -> None:
    """Quotes, waits for a person, and refunds what was approved."""
    order, service = event.input["order"], event.input["service"]
    amount = await ctx.durable_execute_async(quote_refund, service, order)
    decision = await ctx.wait_for_approval(
        {"order": order, "amount": amount}, timeout_s=3600, call_id="approval"
    )
    done = None
    if decision.approved:
        amount = (decision.arguments or {}).get("amount", amount)
        done = await ctx.durable_execute_async(issue_refund, service, order, amount)
    ctx.send_event(
        OutputEvent(output={"verdict": decision.verdict, "by": decision.by, "refund": done})
    )


PLAN = agent_plan(refund_after_approval, name="paused_refunds")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # a restore resumes many runs at once


class RefundService:
    """Quotes and refunds on a loopback port, counting requests per (route, order)."""

    def __init__(self) -> None:
        self.requests: Counter[tuple[str, str]] = Counter()
        self.refunded: dict[str, list[int]] = {}  # order -> amounts, one per request
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), self._handler())
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def counts(self, route: str) -> Counter[str]:
        """Requests per order on ``route`` (``quote`` or ``refund``)."""
        with self._lock:
            return Counter({order: n for (r, order), n in self.requests.items() if r == route})

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                route = self.path.strip("/")
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with service._lock:
                    service.requests[(route, body["order"])] += 1
                    if route == "refund":
                        service.refunded.setdefault(body["order"], []).append(body["amount"])
                answer = json.dumps({"amount": body.get("amount", QUOTED)}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                return None

        return Handler
