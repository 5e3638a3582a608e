"""The soak's second job (``--mixed``): a refund desk, a workflow agent with retrieval and a
durable approval gate, beside the support desk on the same cluster.

Each order (``{"order": "o-<n>", "question": ...}``, keyed by order) runs two plain actions:

1. ``look_up`` (on the input): retrieval over the refund policy (an embedding call to the
   services' ``/v1/embeddings``, then a search of :class:`PolicyStore`, an in-memory vector
   store: no server), then a model request with the passages (the services' ``refund-desk``
   model, which answers ``refund 2500``);
2. ``gate`` (on the model's answer): ``wait_for_approval`` of the refund (the run pauses; a
   ``waiting`` record goes to the job's output), then, approved or edited, the refund as a
   durable call to the services' ``/refunds`` with its idempotency key; the answer says what
   was refunded, or that nothing was (``not refunded (timed_out)``).

The scripted person (:class:`Decider`) reads the ``waiting`` records from the committed output
and writes to the decisions topic: of every five orders three approved, one edited to a smaller
amount, one left to time out (:func:`verdict_for`). Every call has a witness: the services count
embedding, model and refund requests; :class:`PolicyStore` appends each search to a file
(:func:`searches`), since the search runs inside the TaskManagers.
"""

from __future__ import annotations

import json
import re
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import Producer

from bench.crash_waits import call_arguments
from bench.soak_checker import GatedRun, Resolution
from examples.refunds_job import ASKED, EDITED, IDEMPOTENCY_HEADER, RefundRequest
from examples.services import EMBEDDING_DIMENSIONS, _digest, hashed_vectors
from flink_agents.agents import RetrievalSettings
from flink_agents.agents.retrieval import format_passages, retrieve
from flink_agents.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponseEvent,
    EmbeddingModelSetup,
    InputEvent,
    OutputEvent,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents.api.embeddings import Vector
from flink_agents.api.vector_stores import MetadataFilter, VectorMatch, VectorRecord
from flink_agents.durable.store import CallResult
from flink_agents.plan import compile_agent
from flink_agents.providers.memory_vector_store import InMemoryVectorStore

#: The refund policy the desk retrieves from: passage id -> text.
POLICY = {
    "window": "Refunds are granted within 30 days of delivery for unused items.",
    "damaged": "Damaged or broken items are refunded in full, shipping included.",
    "partial": "Opened items may be refunded in part: half of the price.",
    "late": "A late delivery is refunded as store credit on request.",
    "approval": "Every refund needs the approval of a person on the billing team.",
}
QUESTIONS = [
    "My parcel arrived broken, can I get my money back?",
    "I opened the box but do not want the item, is a refund possible?",
    "The delivery came two weeks late, what do I get?",
    "It is unused and I bought it ten days ago, refund please.",
]
EMBEDDING_MODEL = "hashing-64"
COLLECTION = "soak-refund-policy"
#: The call ids the checker joins the store's records to the witness by.
APPROVAL_CALL = "approval:refund"
REFUND_CALL = "refund"
SEARCH_CALL = "retrieval:search"
TIMED_OUT = "not refunded (timed_out)"


# --- the knowledge base: an in-memory vector store with a witness file --------------------------


def search_key(embedding: Vector, top_k: int, where: MetadataFilter | None) -> str:
    """The key a search is witnessed under: what it asks (the same when it is made again, and
    what its call's record holds as arguments)."""
    return _digest(["search", embedding, top_k, where])


class PolicyStore(InMemoryVectorStore):
    """The refund policy in the process's memory, loaded from ``records`` (the JSON file
    :func:`write_policy` wrote) by the first search of each process; each search appends a line
    (its key, when it began and ended) to ``witness``."""

    records: str
    witness: str

    async def query(
        self, embedding: Vector, top_k: int = 4, where: MetadataFilter | None = None
    ) -> list[VectorMatch]:
        if not self._records:  # a new process (a TaskManager started by a fault, say)
            loaded = json.loads(Path(self.records).read_text())
            await self.upsert([VectorRecord.model_validate(record) for record in loaded])
        started = time.time()
        found = await super().query(embedding, top_k, where)
        line = {"key": search_key(embedding, top_k, where), "at": [started, time.time()]}
        with open(self.witness, "a") as witness:  # one write per line: whole lines only
            witness.write(json.dumps(line) + "\n")
        return found


def write_policy(path: Path) -> Path:
    """The policy's records with their vectors (the embeddings service's, computed here: the
    soak's own set-up is not a call of the job), for :class:`PolicyStore`."""
    vectors = hashed_vectors(list(POLICY.values()))
    records = [
        VectorRecord(
            id=name,
            document=text,
            embedding=vector,
            metadata={"source": f"policy/{name}", "scope": "all"},
        ).model_dump(mode="json")
        for (name, text), vector in zip(POLICY.items(), vectors, strict=True)
    ]
    path.write_text(json.dumps(records))
    return path


def searches(witness: Path) -> list[tuple[str, float, float]]:
    """Every search :class:`PolicyStore` made: its key, when it began and ended (a line cut
    by a kill, if any, is skipped)."""
    found = []
    lines = witness.read_text().splitlines() if witness.exists() else []
    for line in lines:
        try:
            body = json.loads(line)
            found.append((str(body["key"]), float(body["at"][0]), float(body["at"][1])))
        except (ValueError, KeyError, IndexError, TypeError):
            continue
    return found


# --- the agent ---------------------------------------------------------------------------------


async def post_refund(url: str, order: str, amount: int, idempotency_key: str) -> str:
    """Refund ``amount`` on ``order`` at the refund service, under the call's own key (a call
    sent again after a failover carries the same one)."""
    async with httpx.AsyncClient(timeout=30) as client:
        response = await client.post(
            url,
            json={"order": order, "amount": amount},
            headers={IDEMPOTENCY_HEADER: idempotency_key},
        )
    response.raise_for_status()
    return f"refunded {amount} on {order}"


class RefundDesk(Agent):
    """Retrieve the policy, ask the model, wait for a person, refund (module docstring)."""

    @action(InputEvent)
    async def look_up(event: InputEvent, ctx: RunnerContext) -> None:
        # The order in the query, and the search scoped to the passages for every order or for
        # this one: the witness counts an embedding by its text and a search by what it asks
        # (two questions' hashed vectors may be equal), so no two orders' calls look like one.
        order = str(event.input["order"])
        question = f"{event.input['question']} (order {order})"
        settings = RetrievalSettings(
            embedding_model="embedder",
            vector_store="policy",
            top_k=2,
            where={"scope": {"$in": ["all", order]}},
        )
        passages = await retrieve(ctx, question, settings)
        prompt = f"{question}\n\nPolicy:\n"
        message = ChatMessage(role="user", content=prompt + format_passages(passages))
        ctx.send_event(ChatRequestEvent(model="desk_model", messages=[message]))

    @action(ChatResponseEvent)
    async def gate(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        order = str(ctx.key)
        amount = int(re.findall(r"\d+", event.response.content or "0")[-1])
        decision = await ctx.wait_for_approval(
            {"order": order, "amount": amount},
            timeout_s=float(ctx.config["approval_timeout_s"]),
            call_id=APPROVAL_CALL,
        )
        if not decision.approved:
            ctx.send_event(OutputEvent(output=f"not refunded ({decision.verdict})"))
            return
        if decision.arguments:  # an edit: the amount the person set
            amount = int(decision.arguments["amount"])
        answer = await ctx.durable_execute_async(
            post_refund,
            str(ctx.config["refunds_url"]),
            order,
            amount,
            ctx.durable_call_key(REFUND_CALL),
            call_id=REFUND_CALL,
        )
        ctx.send_event(OutputEvent(output=answer))


def build_agent(
    services_url: str,
    policy: Path,
    witness: Path,
    approval_timeout_s: float,
    client: dict[str, Any],
) -> RefundDesk:
    """The refund desk reaching the services at ``services_url`` with the ``client`` options
    (timeout, retry) of its model and embedding connections."""
    agent = RefundDesk(
        name="refund_desk",
        error_policy="emit",
        config={"refunds_url": f"{services_url}/refunds", "approval_timeout_s": approval_timeout_s},
    )
    connection = {"base_url": f"{services_url}/v1", **client}
    agent.add_resource(
        "services",
        ResourceType.CHAT_MODEL_CONNECTION,
        "flink_agents.providers.openai_compatible:OpenAICompatibleChatModelConnection",
        **connection,
    )
    agent.add_resource(
        "desk_model",
        ResourceType.CHAT_MODEL,
        ChatModelSetup,
        connection="services",
        model="refund-desk",
    )
    agent.add_resource(
        "embeddings",
        ResourceType.EMBEDDING_MODEL_CONNECTION,
        "flink_agents.providers.openai_embeddings:OpenAICompatibleEmbeddingModelConnection",
        **connection,
    )
    agent.add_resource(
        "embedder",
        ResourceType.EMBEDDING_MODEL,
        EmbeddingModelSetup,
        connection="embeddings",
        model=EMBEDDING_MODEL,
        dimensions=EMBEDDING_DIMENSIONS,
    )
    agent.add_resource(
        "policy",
        ResourceType.VECTOR_STORE,
        PolicyStore,
        collection=COLLECTION,
        dimensions=EMBEDDING_DIMENSIONS,
        records=str(policy),
        witness=str(witness),
    )
    return agent


def write_plan(path: Path, agent: RefundDesk) -> Path:
    path.write_text(compile_agent(agent).to_json())
    return path


# --- the workload, the person, the expected answers --------------------------------------------


def order_line(n: int) -> str:
    """The ``n``-th order (numbered from 1): its own key, the questions in turn."""
    return json.dumps({"order": f"o-{n + 1}", "question": QUESTIONS[n % len(QUESTIONS)]})


def verdict_for(order: str) -> dict[str, Any] | None:
    """The scripted person's decision on ``order``: of every five, three approved, one edited
    to :data:`EDITED`, one left undecided (it times out)."""
    n = int(order.removeprefix("o-"))
    if n % 5 in (1, 2, 3):
        return {"verdict": "approve", "by": "ann"}
    if n % 5 == 4:
        return {"verdict": "edit", "by": "ann", "arguments": {"order": order, "amount": EDITED}}
    return None


def allowed_amount(decision: dict[str, Any] | None) -> int | None:
    """The amount a decision lets the refund be made with (None: no refund allowed)."""
    if decision is None:
        return None
    return int(decision["arguments"]["amount"]) if decision["verdict"] == "edit" else ASKED


def expected_answers(lines: Sequence[str]) -> dict[tuple[str, int], str]:
    """(order, 0) -> the answer its decision makes (each order is a key of its own)."""
    expected = {}
    for line in lines:
        order = json.loads(line)["order"]
        amount = allowed_amount(verdict_for(order))
        expected[(order, 0)] = TIMED_OUT if amount is None else f"refunded {amount} on {order}"
    return expected


class Decider:
    """The scripted person: handed every record of the job's committed output that is not an
    answer, it decides each ``waiting`` record's wait once (:func:`verdict_for`) and writes the
    decision to the decisions topic (an idempotent producer, like the orders')."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.decided: dict[str, dict[str, Any]] = {}  # order -> the decision sent
        self.waiting = 0
        self.refused: list[dict[str, Any]] = []
        self._waits: set[str] = set()
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "log_level": 3,
                "delivery.timeout.ms": 600_000,
                "linger.ms": 0,
            }
        )

    def __call__(self, record: dict[str, Any]) -> None:
        if "refused" in record:
            self.refused.append(record)
        if "waiting" not in record:
            return
        self.waiting += 1
        order, wait = str(record["key"]), record["waiting"]["wait_id"]
        decision = verdict_for(order)
        if wait in self._waits or decision is None:
            return
        self._waits.add(wait)
        self.decided[order] = decision
        value = {"order": order, "wait": wait, **decision}
        self._producer.produce(self.topic, key=json.dumps(order), value=json.dumps(value))
        self._producer.poll(0)

    def close(self) -> None:
        if self._producer.flush(600) > 0:
            raise RuntimeError("decisions not acknowledged within 600 s of the end")


# --- the history, as the checker reads it ------------------------------------------------------


def witness_key(call: CallResult) -> str | None:
    """The witness key of a search or refund call's record (for
    :func:`bench.crash_oracle.completed_at`); None for other calls."""
    args = call_arguments(call)
    if call.call_id == SEARCH_CALL and len(args) == 4:
        return search_key(args[1], args[2], args[3])  # (store, vector, top_k, where)
    if call.call_id == REFUND_CALL and len(args) == 4:
        return str(args[3])  # (url, order, amount, the call's key: its Idempotency-Key)
    return None


def resolutions(outcomes: Iterable[tuple[float, CallResult]]) -> dict[str, list[Resolution]]:
    """Per order, the distinct decisions its wait call's records hold (a state record repeats
    its action's calls: the same decision, once)."""
    found: dict[str, dict[str, Resolution]] = defaultdict(dict)
    for _, call in outcomes:
        args = call_arguments(call)
        if call.call_id != APPROVAL_CALL or not args or not isinstance(call.payload, dict):
            continue
        request = args[0]["request"]
        resolution = Resolution(request, call.payload)
        found[str(request["order"])][json.dumps(call.payload, sort_keys=True)] = resolution
    return {order: list(by_text.values()) for order, by_text in found.items()}


def gated_runs(requests: Sequence[RefundRequest]) -> list[GatedRun]:
    """The refund service's requests as gated runs of their orders."""
    return [
        GatedRun(r.order, r.key, {"order": r.order, "amount": r.amount}, r.at) for r in requests
    ]
