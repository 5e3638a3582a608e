"""Peer (a): the naive job users write today -- a plain keyed function calling the model inline.

The same scripted model as workload (1), called synchronously per record with ``asyncio.run``:
the operator thread waits for every call, so at most one call is in flight per operator.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

from pyflink.common import Types
from pyflink.datastream import DataStream, KeyedProcessFunction, StreamExecutionEnvironment

from bench.flink_job import Pipeline
from flink_agents.api.chat import ChatMessage, ChatRequest
from flink_agents.providers.scripted import ScriptedChatModelConnection


class BlockingChat(KeyedProcessFunction):
    """One blocking model call per record; emits the reply as the output."""

    def __init__(self, latency: float) -> None:
        self._latency = latency

    def open(self, runtime_context) -> None:
        self._model = ScriptedChatModelConnection(
            name="baseline_model", turns=[{"content": "ok: $input"}], latency_seconds=self._latency
        )

    def process_element(self, value: str, ctx: KeyedProcessFunction.Context) -> Iterator[str]:
        record = json.loads(value)
        request = ChatRequest(messages=[ChatMessage(role="user", content=record["text"])])
        reply = asyncio.run(self._model.chat(request))
        yield json.dumps({"key": record["k"], "output": reply.content})


def baseline_pipeline(latency: float) -> Pipeline:
    def build(env: StreamExecutionEnvironment, stamped: DataStream) -> DataStream:
        keyed = stamped.key_by(lambda text: str(json.loads(text)["k"]), key_type=Types.STRING())
        return keyed.process(BlockingChat(latency), output_type=Types.STRING())

    return build
