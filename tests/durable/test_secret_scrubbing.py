"""A key that came from a secret reference reaches no artifact of a run: not the store's records
(a failed call's message and traceback, a tool's result, the saved conversation), not the error
output the sink gets under ``error_policy: emit``, not what the model is told of a failed tool,
not the event log, not the log lines. Through the real store path: the in-memory store and the
Kafka store (the ``stores`` fixture), each record read back raw."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import traceback
import uuid
from pathlib import Path
from typing import Any, ClassVar

import pytest
from kafka import KafkaConsumer, TopicPartition

from flink_agents.agents import ReActAgent
from flink_agents.api import ChatModelSetup, Prompt, ResourceDescriptor, ResourceType
from flink_agents.api.agent import ErrorPolicy
from flink_agents.api.chat import ChatMessage, ChatRequest, ToolCall
from flink_agents.api.chat_models import ChatModelConnection
from flink_agents.api.secret_values import forget_secrets
from flink_agents.durable.store import ActionStateStore, InMemoryActionStateStore
from flink_agents.observability import EventLogConfig, build_event_log
from flink_agents.plan import compile_agent
from flink_agents.runtime import ActionError, RunResult, Runtime
from flink_agents.runtime.json_records import outputs_of
from flink_agents.testing import Stores

KEY_VARIABLE = "SCRUB_TEST_GATEWAY_KEY"


class EchoingGateway(ChatModelConnection):
    """A gateway that asks for two tools, then fails with a 401 whose body echoes the
    ``Authorization`` header it was sent (as some gateways do)."""

    api_key: str
    told: ClassVar[list[ChatMessage]] = []

    async def chat(self, request: ChatRequest) -> ChatMessage:
        tool_messages = [m for m in request.messages if m.role == "tool"]
        if not tool_messages:
            calls = [
                ToolCall(id="c1", name="fetch_page", arguments={"url": "https://api.test/v1"}),
                ToolCall(id="c2", name="whoami", arguments={}),
            ]
            return ChatMessage(role="assistant", tool_calls=calls)
        EchoingGateway.told.extend(tool_messages)
        raise RuntimeError(
            f"401 Unauthorized: {{'error': 'invalid key', 'headers': "
            f"{{'Authorization': 'Bearer {self.api_key}'}}}}"
        )


def fetch_page(url: str) -> str:
    """Fetch a page.

    Args:
        url: The page.
    """
    raise ValueError(f"GET {url}?key={os.environ[KEY_VARIABLE]} failed: 403")


def whoami() -> str:
    """Who the tool runs as (it echoes the credential it was given)."""
    return f"authenticated with {os.environ[KEY_VARIABLE]}"


def _agent(error_policy: ErrorPolicy = "emit") -> ReActAgent:
    agent = ReActAgent(
        name="scrubbed",
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection="gateway", model="m"),
        prompt=Prompt(text="{q}"),
        tools=[fetch_page, whoami],
        error_policy=error_policy,
    )
    agent.add_resource(
        "gateway",
        ResourceType.CHAT_MODEL_CONNECTION,
        EchoingGateway,
        api_key={"env": KEY_VARIABLE},
    )
    return agent


def _raw_records(store: ActionStateStore, request: pytest.FixtureRequest) -> list[bytes]:
    """Every record value the store wrote, as it is in its log or topic."""
    if isinstance(store, InMemoryActionStateStore):
        return [value for part in store.log.partitions for _, value in part if value is not None]
    servers = request.getfixturevalue("kafka_bootstrap")
    consumer = KafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False)
    try:
        parts = [TopicPartition(store.topic, p) for p in range(store.partitions)]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        ends = consumer.end_offsets(parts)
        values: list[bytes] = []
        while any(consumer.position(tp) < ends[tp] for tp in parts):
            for batch in consumer.poll(timeout_ms=1000).values():
                values.extend(r.value for r in batch if r.value is not None)
        return values
    finally:
        consumer.close()


@pytest.fixture
def secret(monkeypatch: pytest.MonkeyPatch) -> Any:
    value = f"sk-scrub-{uuid.uuid4().hex}"
    monkeypatch.setenv(KEY_VARIABLE, value)
    forget_secrets()
    EchoingGateway.told.clear()
    yield value
    forget_secrets()
    EchoingGateway.told.clear()


def test_a_key_reaches_no_artifact_of_a_run(
    stores: Stores,
    secret: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    request: pytest.FixtureRequest,
) -> None:
    log_path = tmp_path / "events.jsonl"
    event_log = build_event_log(EventLogConfig(path=str(log_path)))

    async def scenario() -> RunResult:
        engine = Runtime.build(
            compile_agent(_agent()), store=stores.first, event_log=event_log
        ).engine
        engine.submit("k", {"q": "hello"})
        await engine.drain()
        [result] = engine.take_results()
        return result

    with caplog.at_level(logging.DEBUG):
        result = asyncio.run(scenario())
    stores.first.flush()

    # The run did fail where the key was echoed, and the tools did see it: the test exercised
    # every path it means to.
    assert result.error is not None and "401 Unauthorized" in result.error.message
    assert [m.content for m in EchoingGateway.told][1].startswith("authenticated with")

    records = _raw_records(stores.first, request)
    assert records and all(secret.encode() not in value for value in records)
    assert any(b"<redacted>" in value for value in records)
    sink = [record.to_json() for record in outputs_of(result)]
    assert sink and all(secret not in line for line in sink)
    assert "Bearer <redacted>" in "".join(sink)
    told = [m.content for m in EchoingGateway.told]
    assert all(secret not in text for text in told), told
    assert "?key=<redacted>" in told[0]
    assert secret not in log_path.read_text()
    assert secret not in caplog.text
    # A restored store reads the records back: the redacted values, nothing else.
    restored = stores.restored()
    assert all(secret not in state.model_dump_json() for state in restored.history())
    assert json.dumps([m.model_dump() for m in EchoingGateway.told]).count("<redacted>") == 2


def test_a_job_failing_on_the_echoed_key_reports_it_scrubbed(secret: str) -> None:
    # Under error_policy "fail" the action's exception leaves the engine with the job's failure:
    # its text, and that of the exceptions it came from, is what Flink and the logs show.
    async def scenario() -> None:
        engine = Runtime.build(compile_agent(_agent("fail")), store=Stores.in_memory().first)
        engine.engine.submit("k", {"q": "hello"})
        await engine.engine.drain()

    with pytest.raises(ActionError) as raised:
        asyncio.run(scenario())
    shown = "".join(traceback.format_exception(raised.value))
    assert "401 Unauthorized" in shown and "Bearer <redacted>" in shown
    assert secret not in shown
