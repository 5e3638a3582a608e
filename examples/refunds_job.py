"""Refunds at scale on the local mini-cluster: every order pauses for a person's approval.

The agent of examples/refunds.py, its ``issue_refund`` tool now a call to a refund service (a
local HTTP service that counts requests by idempotency key). Orders come from a Kafka topic,
decisions from a second one, and the job's outputs (answers and ``waiting`` records) go to a
third, with every call recorded in a Kafka action-state store. A scripted person reads the
``waiting`` records and approves most orders, edits some (a smaller amount) and leaves the rest
undecided: those time out and are not refunded (docs/waits.md)::

    scripts/kafka.sh start
    export FLINK_AGENTS_STORE_SECRET=$(scripts/store-secret.sh)
    python -m examples.refunds_job          # 50 orders: 40 approved, 5 edited, 5 left to time out

prints what the refund service saw and how each wait ended.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple

import httpx
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pydantic import BaseModel

from examples.refunds import refunds_agent
from flink_agents.agents import ReActAgent
from flink_agents.api import ResourceType, Tool, ToolSpec
from flink_agents.durable.store import StoreConfig
from flink_agents.plan import compile_agent

IDEMPOTENCY_HEADER = "Idempotency-Key"
_ENDED = {"FINISHED", "FAILED", "CANCELED"}
#: What the model asks to refund; an edit refunds this instead.
ASKED, EDITED = 2500, 1000


class Refund(BaseModel):
    """The arguments of ``issue_refund``."""

    order: str
    amount: int


class RefundTool(Tool):
    """``issue_refund`` as a POST to the refund service at ``url``, with the durable call's
    idempotency key (a call sent again after a failover carries the same key). Every call waits
    for a person's approval, at most ``approval_timeout_s``."""

    url: str
    approval_timeout_s: float | None = None

    def spec(self) -> ToolSpec:
        schema = Refund.model_json_schema()
        schema.pop("title", None)
        return ToolSpec(
            name="issue_refund", description="Refund an amount of an order.", parameters=schema
        )

    def needs_approval(self, arguments: dict[str, Any]) -> bool:
        return True

    def approval_timeout(self) -> float | None:
        return self.approval_timeout_s

    def check_arguments(self, arguments: dict[str, Any]) -> None:
        Refund.model_validate(arguments)

    async def call(self, arguments: dict[str, Any]) -> Any:
        raise TypeError("issue_refund is called with its idempotency key (call_with_key)")

    async def call_with_key(self, arguments: dict[str, Any], idempotency_key: str) -> Any:
        refund = Refund.model_validate(arguments)
        async with httpx.AsyncClient(timeout=30) as client:
            response = await client.post(
                self.url,
                json=refund.model_dump(),
                headers={IDEMPOTENCY_HEADER: idempotency_key},
            )
        response.raise_for_status()
        return f"refunded {refund.amount} on {refund.order}"


class _Server(ThreadingHTTPServer):
    # Approvals come in bursts, and refunds with them: more connections at once than the
    # default backlog of 5 (a full backlog drops them). Read when the server starts listening.
    request_queue_size = 128
    daemon_threads = True


class RefundRequest(NamedTuple):
    """One request the refund service answered."""

    key: str  # its idempotency key
    order: str
    amount: int
    at: float  # when it arrived (epoch seconds)


@dataclass
class RefundService:
    """A local refund service: refunds each idempotency key once and counts every request."""

    requests: list[RefundRequest] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def refunds(self) -> dict[str, int]:
        """Amount refunded per order (a repeated key refunds nothing more)."""
        by_key = {request.key: (request.order, request.amount) for request in self.requests}
        return {order: amount for order, amount in by_key.values()}

    def serve(self) -> tuple[ThreadingHTTPServer, str]:
        """Start serving on a free loopback port; the server and the URL of its refunds."""
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                key = self.headers.get(IDEMPOTENCY_HEADER, "")
                request = RefundRequest(key, body["order"], body["amount"], time.time())
                with service._lock:
                    service.requests.append(request)
                answer = json.dumps({"refunded": body["amount"]}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                return None

        server = _Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server, f"http://127.0.0.1:{server.server_address[1]}/refunds"


def build_agent(service_url: str, approval_timeout_s: float) -> ReActAgent:
    """The refunds agent with the refund service as its ``issue_refund`` tool."""
    agent = refunds_agent()
    agent.add_resource(
        "issue_refund",
        ResourceType.TOOL,
        # By path: run as `python -m`, this module is `__main__`, which workers cannot import.
        "examples.refunds_job:RefundTool",
        url=service_url,
        approval_timeout_s=approval_timeout_s,
    )
    return agent


def verdict_for(order: int, approved: int, edited: int) -> dict[str, Any] | None:
    """The scripted person: orders 1..approved approved, the next ``edited`` edited to a
    smaller amount, the rest left undecided."""
    if order <= approved:
        return {"verdict": "approve", "by": "ann"}
    if order <= approved + edited:
        return {
            "verdict": "edit",
            "by": "ann",
            "arguments": {"order": f"o-{order}", "amount": EDITED},
        }
    return None


@dataclass
class Report:
    """What one run of the job showed."""

    refunds: dict[str, int]  # order -> amount, as the refund service saw them
    refund_requests: int
    waiting: int  # `waiting` records the job emitted
    answers: dict[str, Any]  # order -> the run's output
    decisions_sent: int
    requests: list[RefundRequest] = field(default_factory=list)  # as the service saw them
    records: list[dict[str, Any]] = field(default_factory=list)  # every output record, in order
    decided: dict[str, dict[str, Any]] = field(default_factory=dict)  # order -> decision sent
    store: StoreConfig | None = None  # where the job recorded its calls

    def verdicts(self) -> Counter[str]:
        """How the runs ended: refunded with the asked amount, with an edit's, or not run."""
        ends: Counter[str] = Counter()
        for answer in self.answers.values():
            text = str(answer)
            if text.startswith(f"refunded {ASKED}"):
                ends["approved"] += 1
            elif text.startswith(f"refunded {EDITED}"):
                ends["edited"] += 1
            elif "timed out" in text:
                ends["timed_out"] += 1
            else:
                ends["other"] += 1
        return ends

    def lines(self) -> list[str]:
        amounts = Counter(self.refunds.values())
        return [
            f"orders answered:  {len(self.answers)}",
            f"waiting records:  {self.waiting}; decisions sent: {self.decisions_sent}",
            f"refund requests:  {self.refund_requests} for {len(self.refunds)} orders "
            f"(amounts: {dict(sorted(amounts.items()))})",
            f"runs ended:       {dict(sorted(self.verdicts().items()))}",
        ]


def _job_spec(
    work: Path,
    bootstrap: str,
    topics: dict[str, str],
    plan: Path,
    operator: dict[str, Any] | None = None,
) -> Path:
    spec: dict[str, Any] = {
        "name": "refunds",
        "agent": str(plan),
        "key": "order",
        "source": {"kind": "kafka", "topic": topics["orders"], "bootstrap_servers": bootstrap},
        "decisions": {
            "kind": "kafka",
            "topic": topics["decisions"],
            "bootstrap_servers": bootstrap,
        },
        "sink": {"kind": "kafka", "topic": topics["outputs"], "bootstrap_servers": bootstrap},
        "checkpointing": {"interval_ms": 1000},
        "store": {"kind": "kafka", "bootstrap_servers": bootstrap, "topic": topics["store"]},
    }
    if operator:
        spec["operator"] = operator
    path = work / "refunds-job.json"
    path.write_text(json.dumps(spec, indent=2))
    return path


def run(
    bootstrap: str,
    work: Path,
    *,
    orders: int = 50,
    approved: int = 40,
    edited: int = 5,
    approval_timeout_s: float = 8.0,
    deadline_s: float = 240.0,
    operator: dict[str, Any] | None = None,
) -> Report:
    """Run the job on the mini-cluster until every order is answered (or ``deadline_s``);
    ``operator``: the job's operator options (a crash harness arms kill points there)."""
    from flink_agents.flink import build_job, job_environment, load_job

    suffix = uuid.uuid4().hex[:8]
    topics = {name: f"refunds-{name}-{suffix}" for name in ("orders", "decisions", "outputs")}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, 1, 1) for t in topics.values()]).values():
        future.result(30)
    topics["store"] = f"refunds-store-{suffix}"

    service = RefundService()
    server, url = service.serve()
    plan = work / "refunds-plan.json"
    plan.write_text(compile_agent(build_agent(url, approval_timeout_s)).to_json())
    spec = load_job(_job_spec(work, bootstrap, topics, plan, operator))
    env = job_environment(spec)
    build_job(spec, env)
    client = env.execute_async(spec.name)

    producer = Producer({"bootstrap.servers": bootstrap})
    for n in range(1, orders + 1):
        order = f"o-{n}"
        producer.produce(
            topics["orders"], key=json.dumps(order), value=json.dumps({"order": order})
        )
    producer.flush(30)

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"refunds-person-{suffix}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topics["outputs"]])
    answers: dict[str, Any] = {}
    records: list[dict[str, Any]] = []
    decided: dict[str, dict[str, Any]] = {}
    waiting = decisions_sent = 0
    deadline = time.monotonic() + deadline_s
    try:
        while len(answers) < orders and time.monotonic() < deadline:
            if _ended(client):
                client.get_job_execution_result().result()  # raises the job's failure
                raise RuntimeError("the refunds job ended before every order was answered")
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            record = json.loads(message.value())
            records.append(record)
            if "output" in record:
                answers[record["key"]] = record["output"]
            elif "waiting" in record:
                waiting += 1
                decision = verdict_for(int(record["key"][2:]), approved, edited)
                if decision is not None:
                    decided[record["key"]] = decision
                    wait_id = record["waiting"]["wait_id"]
                    value = {"order": record["key"], "wait": wait_id, **decision}
                    producer.produce(
                        topics["decisions"], key=json.dumps(record["key"]), value=json.dumps(value)
                    )
                    producer.flush(30)
                    decisions_sent += 1
    finally:
        consumer.close()
        if not _ended(client):
            client.cancel().result()
        server.shutdown()
        server.server_close()
    return Report(
        refunds=service.refunds(),
        refund_requests=len(service.requests),
        waiting=waiting,
        answers=answers,
        decisions_sent=decisions_sent,
        requests=list(service.requests),
        records=records,
        decided=decided,
        store=spec.store,
    )


def _ended(client: Any) -> bool:
    """Whether the job reached a final state (a local mini-cluster shuts down with its job)."""
    from py4j.protocol import Py4JJavaError

    try:
        return str(client.get_job_status().result()) in _ENDED
    except Py4JJavaError:
        return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--orders", type=int, default=50)
    args = parser.parse_args()
    work = Path(".cache") / "refunds-job"
    work.mkdir(parents=True, exist_ok=True)
    report = run(args.bootstrap_servers, work.resolve(), orders=args.orders)
    print("\n".join(report.lines()))


if __name__ == "__main__":
    main()
