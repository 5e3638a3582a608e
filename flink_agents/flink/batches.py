"""Stages that aggregate: a key's answers handed to the next agent in lists of ``every``.

``then(key, every=N)`` (and a job spec's ``then: [{key, every}]``) puts :class:`CountBatches`
between two agents: keyed like the next agent, it keeps a key's answers in keyed state until
``N`` are in and emits them as one list, in the order they came; a bounded input's end hands on
the last, shorter list of each key. The next agent runs once per list, so its run ``seq`` is the
list's number for that key. See docs/pipelines.md, "Stages that aggregate", for why this is a
count on keyed state rather than one of Flink's windows, and what a restore replays.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyflink.common import Types
from pyflink.datastream import DataStream, KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import ListStateDescriptor

from flink_agents.api.json_values import json_generic, read_json
from flink_agents.flink.operator import END_OF_INPUT
from flink_agents.flink.pemja_references import release_pemja_references, releasing
from flink_agents.runtime.json_records import KeySpec, encode_input, object_key_selector
from flink_agents.runtime.typed_outputs import OutputType


def in_batches(
    answers: DataStream, key: KeySpec, every: int, answer_type: OutputType, uid: str
) -> DataStream:
    """``answers`` (Python objects, or JSON values) keyed by ``key`` and handed on in lists of
    ``every`` answers of one key, each list of ``answer_type``'s objects (``uid``: the batching
    operator's, see :meth:`AgentsExecutionEnvironment.uid`)."""
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise ValueError(f"every must be a whole number of answers, 1 or more (got {every!r})")
    return (
        answers.key_by(releasing(object_key_selector(key)), key_type=Types.STRING())
        .process(CountBatches(every, answer_type), output_type=Types.PICKLED_BYTE_ARRAY())
        .name(f"every {every}:{uid}")
        .uid(uid)
    )


@dataclass(frozen=True)
class BatchKey:
    """The key of a list of answers: ``key`` (a field or a function) of its first answer, which
    every answer of the list shares (they were batched under it)."""

    key: KeySpec

    def __call__(self, batch: list[Any]) -> Any:
        first = batch[0]
        return self.key(first) if callable(self.key) else json_generic(first)[self.key]


class CountBatches(KeyedProcessFunction):
    """Lists of ``every`` answers per key, from answers kept in the key's list state.

    The answers wait as canonical JSON text, not pickles: a checkpoint or savepoint then holds
    no reference to the answer's class, and restores after that class moved. They are validated
    back into ``answer_type`` when their list leaves.
    """

    def __init__(self, every: int, answer_type: OutputType) -> None:
        self._every = every
        self._answer_type = answer_type

    def open(self, runtime_context: RuntimeContext) -> None:
        self._waiting = runtime_context.get_list_state(
            ListStateDescriptor("flink_agents.batch", Types.STRING())
        )

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        release_pemja_references()
        waiting = list(self._waiting.get() or [])
        if not waiting:  # the key's first answer of a list: hand on the rest at the input's end
            ctx.timer_service().register_event_time_timer(END_OF_INPUT)
        waiting.append(encode_input(value))
        if len(waiting) < self._every:
            self._waiting.add(waiting[-1])
            return
        self._waiting.clear()
        yield self._batch(waiting)

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Iterator[Any]:
        waiting = list(self._waiting.get() or [])
        if waiting:
            self._waiting.clear()
            yield self._batch(waiting)

    def _batch(self, texts: list[str]) -> list[Any]:
        return [self._answer_type.validate(read_json(text)) for text in texts]
