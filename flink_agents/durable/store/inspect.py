"""``flink-agents store inspect``: a key's action states and call results, as the store holds them.

The states are read with the store itself (a :class:`~flink_agents.durable.store.kafka.
KafkaActionStateStore` restored from the start of its topic), so records are authenticated and
decoded exactly as a restore does, and a corrupt one is skipped and counted. A summary shows
status, attempts, payload type and sizes; payloads only on request, written like the event log's
(secret-named fields redacted, cut at a size), and a pickled payload is never unpickled.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass

import pydantic_core

from flink_agents.durable.store._action_state import ActionState, ActionStateKey, CallResult
from flink_agents.durable.store._base import PartitionMark, RecoveryMarker
from flink_agents.durable.store._canonical import canonical_json
from flink_agents.durable.store._codec import DEFAULT_SECRET_ENV
from flink_agents.durable.store._log_store import LogStore
from flink_agents.durable.store._payload import PICKLE_TAG
from flink_agents.durable.store.kafka import KafkaActionStateStore
from flink_agents.observability import PayloadWriter


def open_store(
    bootstrap_servers: str, topic: str, secret_env: str = DEFAULT_SECRET_ENV
) -> tuple[KafkaActionStateStore, int]:
    """The store of ``topic`` with every state of the topic loaded; and the count of corrupt
    records skipped. The topic must exist (inspecting never creates one)."""
    store = KafkaActionStateStore.existing(
        bootstrap_servers, topic, secret_env=secret_env, client_id="flink-agents-inspect"
    )
    # From offset 0 with no run open at the marker: every state on the topic is loaded.
    start = {p: PartitionMark(low=0, end=0) for p in range(store.partitions)}
    report = store.restore(
        RecoveryMarker(
            topic=topic,
            store_id="inspect",
            taken=-1,
            partitions=start,
            placement=store.placement.name,
        )
    )
    return store, len(report.corrupt)


def key_states(store: LogStore, key: str, agent: str | None = None) -> list[ActionState]:
    """The states of the Flink key ``key`` (as written in the input, or as JSON), of every run
    and action, in run and first-put order."""
    wanted = _key_forms(key)
    found = [
        k for k in store.state_keys() if k.key in wanted and (agent is None or k.agent == agent)
    ]
    states = [store.get(k) for k in sorted(found, key=lambda k: (k.agent, k.seq))]
    return [state for state in states if state is not None]


def _key_forms(key: str) -> set[str]:
    """The store keeps a run's key as canonical JSON: ``Oslo`` and ``"Oslo"`` both mean the
    string, ``42`` the number or the string."""
    forms = {canonical_json(key)}
    with contextlib.suppress(ValueError):  # not JSON: the string only
        forms.add(canonical_json(json.loads(key)))
    return forms


def render_states(
    states: list[ActionState], *, payloads: PayloadWriter | None = None
) -> Iterator[str]:
    """One line per state, one per call under it; with ``payloads``, each call's payload; and
    the states' recorded spend when a call of them spent (docs/budgets.md)."""
    for state in states:
        yield _state_line(state.key, state)
        for call in state.calls:
            yield "  " + _call_line(call)
            if payloads is not None:
                yield "    payload " + payload_text(call, payloads)
    spend = recorded_spend(states)
    if spend.calls:
        yield spend.line()


@dataclass(frozen=True)
class RecordedSpend:
    """What the metered calls of some states spent, as recorded (costs as priced then)."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    price_versions: frozenset[str] = frozenset()

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def line(self) -> str:
        """The summary line ``store inspect`` prints."""
        text = (
            f"spend  {self.calls} metered calls  {self.tokens} tokens "
            f"({self.input_tokens} in, {self.output_tokens} out)"
        )
        if self.price_versions:
            text += f"  cost {self.cost:.6g} (prices {', '.join(sorted(self.price_versions))})"
        return text


def recorded_spend(states: list[ActionState]) -> RecordedSpend:
    """The sum of the spend recorded with the calls of ``states`` (a delegation's, which
    repeats the spend of calls recorded in the sub-agent's own states, is left out)."""
    calls, tokens_in, tokens_out, cost, versions = 0, 0, 0, 0.0, set()
    for state in states:
        for call in state.calls:
            if call.spend is None or call.spend.nested:  # a delegation: its calls are recorded
                continue
            calls += 1
            tokens_in += call.spend.input_tokens
            tokens_out += call.spend.output_tokens
            cost += call.spend.cost or 0.0
            if call.spend.price_version is not None:
                versions.add(call.spend.price_version)
    return RecordedSpend(calls, tokens_in, tokens_out, cost, frozenset(versions))


def _state_line(key: ActionStateKey, state: ActionState) -> str:
    on = f" on {key.event_id[:8]}" if key.event_id else ""
    return "  ".join(
        [
            f"state {key.agent} {key.key} #{key.seq} {key.action}{on}",
            "completed" if state.completed else "in progress",
            f"events {len(state.events)}",
            f"memory {len(state.memory_updates)}",
            f"calls {len(state.calls)}",
            f"{len(state.model_dump_json())} B",
        ]
    )


def _call_line(call: CallResult) -> str:
    attempts = f"attempts {call.attempts}"
    if call.failed_attempts:  # the rest were ended by restarts (or one is in flight)
        attempts += f" ({call.failed_attempts} failed)"
    parts = [f"call {call.call_id}", call.status.value, attempts]
    if call.status.value == "succeeded":
        size = len(pydantic_core.to_json(call.payload))
        parts.append(f"payload {call.payload_type or 'json'} {size} B")
    if call.error is not None:
        parts.append(f"error {call.error.type}")
    if call.spend is not None:
        parts.append(f"spent {call.spend.tokens} tokens")
    if call.function:
        parts.append(call.function)
    return "  ".join(parts)


def payload_text(call: CallResult, payloads: PayloadWriter) -> str:
    """A call's payload as shown to a person: its JSON (cut, secrets redacted), a failed
    call's error message, never a pickled value."""
    if call.error is not None:
        return json.dumps(payloads.text(call.error.message))
    if call.payload_type == PICKLE_TAG:
        return "<pickled: not shown>"
    return json.dumps(payloads(call.payload), ensure_ascii=False)
