"""No secret given through the environment reaches an artifact of a run, whatever the secret's
characters (quotes, backslashes, non-ASCII letters) and wherever a tool or a failing model
echoes it: inside a longer string, as an object's key, deep in a list, in an exception's
message. Checked in the plan, every store record as written (the in-memory store for the
property; the real Kafka store for one adversarial secret), the sink's outputs, the event log
and the log lines, in the secret's raw, JSON-escaped and ASCII-escaped forms.

tests/durable/test_secret_scrubbing.py pins the paths one fixed key takes (issue 40's work);
this varies the key and where it is echoed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flink_agents.agents import ReActAgent
from flink_agents.api import ChatModelSetup, Prompt, ResourceDescriptor, ResourceType
from flink_agents.api.chat import ChatMessage, ChatRequest, ToolCall
from flink_agents.api.chat_models import ChatModelConnection
from flink_agents.api.secret_values import forget_secrets
from flink_agents.observability import EventLogConfig, build_event_log
from flink_agents.plan import compile_agent
from flink_agents.runtime import Runtime
from flink_agents.runtime.json_records import outputs_of
from flink_agents.testing import Stores
from tests.durable.test_secret_scrubbing import _raw_records

VARIABLE = "SECRET_PROPERTY_TEST_KEY"

PLACEMENTS: dict[str, Callable[[str], Any]] = {
    "in a sentence": lambda secret: f"connected as {secret} just now",
    "as an object key": lambda secret: {secret: "the key of this object"},
    "deep in a list": lambda secret: [[[{"token": [secret]}]]],
    "alone": lambda secret: secret,
}


class LeakingGateway(ChatModelConnection):
    """Asks for the ``leak`` tool, then fails with an error that quotes its key."""

    api_key: str
    placement: ClassVar[str] = "alone"

    async def chat(self, request: ChatRequest) -> ChatMessage:
        if not any(m.role == "tool" for m in request.messages):
            return ChatMessage(role="assistant", tool_calls=[ToolCall(id="c1", name="leak")])
        raise RuntimeError(f"refused: {self.api_key!r} / {json.dumps(self.api_key)}")


def leak() -> Any:
    """Report the credential this tool runs with, in the placement under test."""
    return PLACEMENTS[LeakingGateway.placement](os.environ[VARIABLE])


def leaking_agent() -> ReActAgent:
    agent = ReActAgent(
        name="leaky",
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection="gateway", model="m"),
        prompt=Prompt(text="{q}"),
        tools=[leak],
        error_policy="emit",
    )
    agent.add_resource(
        "gateway", ResourceType.CHAT_MODEL_CONNECTION, LeakingGateway, api_key={"env": VARIABLE}
    )
    return agent


def forms(secret: str) -> list[str]:
    """The ways a secret can be written: as is, JSON-escaped, ASCII-escaped, repr'd."""
    return sorted(
        {
            secret,
            json.dumps(secret, ensure_ascii=False)[1:-1],
            json.dumps(secret)[1:-1],
            repr(secret)[1:-1],
        }
    )


def run_and_collect(
    stores: Stores, secret: str, placement: str, tmp_path: Path, request: pytest.FixtureRequest
) -> list[str]:
    """Every artifact of one run whose tool echoes ``secret`` in ``placement``, as text."""
    LeakingGateway.placement = placement
    os.environ[VARIABLE] = secret
    forget_secrets()
    log_path = tmp_path / f"events-{abs(hash((secret, placement)))}.jsonl"
    plan = compile_agent(leaking_agent())
    event_log = build_event_log(EventLogConfig(path=str(log_path)))

    async def scenario() -> Any:
        engine = Runtime.build(plan, store=stores.first, event_log=event_log).engine
        engine.submit("k", {"q": "hello"})
        await engine.drain()
        [result] = engine.take_results()
        return result

    result = asyncio.run(scenario())
    stores.first.flush()
    assert result.error is not None and "refused" in result.error.message  # the leak happened
    records = [
        value.decode("utf-8", "surrogateescape") for value in _raw_records(stores.first, request)
    ]
    assert records
    sink = [record.to_json() for record in outputs_of(result)]
    assert any("<redacted>" in record for record in records)  # the secret was there to scrub
    return [plan.to_json(), *records, *sink, log_path.read_text()]


SECRETS = st.text(
    alphabet=st.sampled_from("abcXYZ0189-_.~+/=\"'\\éß€😀"), min_size=12, max_size=40
).filter(lambda text: len(set(text)) > 4)


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(secret=SECRETS, placement=st.sampled_from(sorted(PLACEMENTS)))
def test_no_secret_of_any_characters_reaches_an_artifact_wherever_it_is_echoed(
    secret: str,
    placement: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(VARIABLE, "placeholder")  # restored after the test
    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        artifacts = run_and_collect(Stores.in_memory(), secret, placement, tmp_path, request)
    for text in [*artifacts, caplog.text]:
        for form in forms(secret):
            assert form not in text, (placement, form)


@pytest.mark.kafka
def test_an_adversarial_secret_reaches_no_record_of_the_kafka_store(
    kafka_bootstrap: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import uuid

    from flink_agents.durable.store.store_config import StoreConfig

    config = StoreConfig(
        kind="kafka",
        bootstrap_servers=kafka_bootstrap,
        topic=f"test-secret-props-{uuid.uuid4().hex[:12]}",
        partitions=2,
    )
    stores = Stores(config.build)
    secret = 'sk-"quoted\\back-slashé€-key'
    monkeypatch.setenv(VARIABLE, "placeholder")
    with caplog.at_level(logging.DEBUG):
        artifacts = run_and_collect(stores, secret, "as an object key", tmp_path, request)
    for text in [*artifacts, caplog.text]:
        for form in forms(secret):
            assert form not in text, form
