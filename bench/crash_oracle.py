"""The crash matrix's oracle: which calls a run had completed at its crash, and what was sent again.

A call is **completed** at a moment iff its SUCCEEDED or FAILED record is on the action-state
store's topic with a timestamp before that moment: the store, read after the run, decides, not
when a service answered nor when the action saw the result (a record may be acknowledged after
the action went on). The example services are the independent witness: they count every
request under an idempotency key (:mod:`examples.services`). Joining the two:

* **re-invoked**: requests for a call that a crash found completed, made after that crash;
* **in flight** at a crash: calls that the crashed attempt sent (from when it was armed to when
  the next attempt was, so also the ones its runs sent after the crash until it was closed)
  and that were not completed at the crash: the only calls a replay may send again;
* **sent again**: requests repeating an earlier one;
* **unmatched**: calls the services saw that have no completed record at all (the run ends with
  every call completed, so a miss means the join itself is broken).

The services key a request as follows, and :func:`witness_keys` derives the same key from a
call's record: an external sub-agent by its ``Idempotency-Key`` header (the record's
``delegation_key``), the tool by a digest of its name and arguments, a model request by a digest
of its body, an embedding request by its model and texts
(:func:`examples.services.embedding_key`); other joins (the soak's refund desk,
:func:`bench.soak_refunds.witness_key`) are handed to :func:`completed_at`. A model call's
record does not hold the body (the model's name is not an argument), so :class:`ModelCalls`
joins it through the conversation and the scripted reply, which a request body fixes.
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from examples.services import ExampleServices, _digest, _messages, embedding_key
from flink_agents.durable.store import (
    ActionState,
    CallResult,
    CallStatus,
    RecordCodec,
)
from flink_agents.durable.store.kafka import KafkaStoreSettings

TOOL = "lookup_fact"
"""The one tool the example services serve (``POST /tools/lookup_fact``)."""
_READ_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Request:
    """One request a service answered."""

    service: str
    key: str
    started: float
    finished: float


def requests_of(services: ExampleServices) -> list[Request]:
    """Every request the services answered, in the order they arrived."""
    found = [
        Request(service, key, started, finished)
        for service, per_key in services.counters.requests().items()
        for key, times in per_key.items()
        for started, finished in times
    ]
    return sorted(found, key=lambda r: r.started)


class ModelCalls:
    """Model requests by what their call's record holds: the conversation and the reply."""

    def __init__(self, services: ExampleServices) -> None:
        self._keys: dict[str, str] = {}
        for bodies in services.conversations.by_ticket().values():
            for raw in bodies:
                body = _json_object(raw)
                model = services.models.get(body.get("model", ""))
                if model is None:  # refused, so not counted: a cut body, an unknown model
                    continue
                reply = model.reply(_messages(body))
                signature = _signature(body["messages"], reply.model_dump(mode="json"))
                self._keys[signature] = _digest(body)

    def key(self, messages: list[dict[str, Any]], reply: dict[str, Any]) -> str | None:
        """The services' key of the request that sent ``messages`` and got ``reply``."""
        return self._keys.get(_signature(messages, reply))


def _json_object(raw: str) -> dict[str, Any]:
    try:
        found = json.loads(raw)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _signature(messages: list[dict[str, Any]], reply: dict[str, Any]) -> str:
    """What a model request and its call's record both show (an OpenAI request message and a
    recorded ChatMessage share role, content and tool_call_id)."""
    conversation = [[m["role"], m.get("content") or "", m.get("tool_call_id")] for m in messages]
    calls = [[c["name"], c["arguments"]] for c in reply.get("tool_calls") or []]
    return json.dumps([conversation, reply.get("content") or "", calls], sort_keys=True)


def witness_keys(call: CallResult, models: ModelCalls) -> list[str]:
    """The keys the services counted ``call``'s requests under (none for a call no service
    sees, such as an internal sub-agent's delegation, nor for arguments the record cut)."""
    try:
        arguments = json.loads(call.arguments or "")
    except ValueError:
        return []
    args = arguments.get("args") or [None]
    first = args[0]
    if isinstance(first, dict) and "delegation_key" in first:
        return [first["delegation_key"]]  # a sub-agent request: sent as its Idempotency-Key
    if call.call_id.startswith("tool:") and isinstance(first, dict):
        return [_digest([TOOL, first])]
    if ":embed:" in call.call_id and isinstance(first, dict) and len(args) == 2:
        return [embedding_key(str(first.get("model")), args[1])]  # (setup, texts)
    if call.call_id == "chat" and isinstance(first, list) and isinstance(call.payload, dict):
        key = models.key(first, call.payload)
        return [key] if key is not None else []
    return []


def store_codec(store: KafkaStoreSettings) -> RecordCodec:
    """The codec ``store`` reads its own records with: its secret, its topic in the signature."""
    return RecordCodec(store.signing_secret(required=False), scope=store.topic)


def terminal_calls(codec: RecordCodec, message: Message) -> list[tuple[float, CallResult]]:
    """The SUCCEEDED or FAILED call results of one store record (a state record repeats its
    action's calls; none for a tombstone), with the record's timestamp in epoch seconds."""
    key, value = message.key(), message.value()
    if key is None or value is None:  # a tombstone: nothing recorded
        return []
    record = codec.decode(
        key,
        value,
        topic=message.topic() or "",
        partition=message.partition() or 0,
        offset=message.offset() or 0,
    )
    at = message.timestamp()[1] / 1000
    calls = record.calls if isinstance(record, ActionState) else [record]
    return [(at, call) for call in calls if call.status is not CallStatus.PENDING]


def terminal_records(store: KafkaStoreSettings) -> Iterator[tuple[float, CallResult]]:
    """Every SUCCEEDED or FAILED call result on the ``store``'s topic, with its record's
    timestamp in epoch seconds (:func:`terminal_calls`)."""
    codec, topic, servers = store_codec(store), store.topic, store.bootstrap_servers
    consumer = Consumer(
        {
            "bootstrap.servers": servers if isinstance(servers, str) else ",".join(servers or []),
            "group.id": f"crash-oracle-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=_READ_TIMEOUT_S).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        todo = set(partitions)
        while todo:
            batch = consumer.consume(num_messages=1000, timeout=_READ_TIMEOUT_S)
            if not batch:
                raise TimeoutError(f"reading {topic!r}: no message in {_READ_TIMEOUT_S} s")
            for message in batch:
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise RuntimeError(f"reading {topic!r}: {error}")
                    todo.discard(message.partition())
                    continue
                yield from terminal_calls(codec, message)
    finally:
        consumer.close()


def completed_at(
    records: Iterable[tuple[float, CallResult]],
    models: ModelCalls,
    other: Callable[[CallResult], str | None] = lambda call: None,
) -> dict[str, float]:
    """Per witness key, when the store first held its call's outcome; ``other`` joins a
    call :func:`witness_keys` does not know (None: no witness)."""
    first: dict[str, float] = {}
    for at, call in records:
        keys = witness_keys(call, models)
        found = other(call) if not keys else None
        for key in [*keys, *([found] if found is not None else [])]:
            first[key] = min(at, first.get(key, at))
    return first


@dataclass(frozen=True)
class Verdict:
    """What the oracle found in one run."""

    reinvoked: int
    sent_again: int
    in_flight: int
    unmatched: int
    resent: list[str]
    """One line per call sent again: when each request arrived and when its outcome was
    recorded, in seconds from the (first) crash."""


def judge(
    requests: Sequence[Request],
    completed: Mapping[str, float],
    crashes: Sequence[float],
    armed: Sequence[float],
) -> Verdict:
    """The oracle over a run's ``requests`` and the times its calls were ``completed`` (per
    witness key), its ``crashes`` and the times its attempts were ``armed``."""
    by_call: dict[tuple[str, str], list[Request]] = defaultdict(list)
    for request in sorted(requests, key=lambda r: r.started):
        by_call[(request.service, request.key)].append(request)
    crashes = sorted(crashes)
    reinvoked = in_flight = 0
    resent = []
    for (service, key), sent in by_call.items():
        done = completed.get(key)
        # Requests after a crash that found the call completed.
        found_done = [t for t in crashes if done is not None and done < t]
        if found_done:
            reinvoked += sum(1 for r in sent if r.started > found_done[0])
        for crash in crashes:
            begin, end = _attempt_around(crash, armed)
            by_crashed = any(begin <= r.started < end for r in sent)
            if by_crashed and (done is None or done >= crash):
                in_flight += 1
        if len(sent) > 1:
            origin = crashes[0] if crashes else 0.0
            times = ", ".join(f"{r.started - origin:+.3f}" for r in sent)
            recorded = "never" if done is None else f"{done - origin:+.3f}"
            resent.append(f"{service} {key[:12]}: sent {times}, recorded {recorded}")
    return Verdict(
        reinvoked=reinvoked,
        sent_again=sum(len(sent) - 1 for sent in by_call.values()),
        in_flight=in_flight,
        unmatched=sum(1 for _, key in by_call if key not in completed),
        resent=resent,
    )


def _attempt_around(crash: float, armed: Sequence[float]) -> tuple[float, float]:
    """From when the attempt that crashed at ``crash`` was armed to when the next one was."""
    before = [at for at in armed if at <= crash]
    after = [at for at in armed if at > crash]
    return (max(before) if before else float("-inf"), min(after) if after else float("inf"))
