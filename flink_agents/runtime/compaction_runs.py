"""Compaction of a key's long-term memory sets, scheduled on the key's timer (docs/memory.md).

A memory set with :class:`~flink_agents.api.memory_compaction.MemoryCompaction` settings is
watched at the end of every successful run that wrote it: a run that leaves the key's set
holding more than ``max_items`` items, having started at or below it (a **crossing**), schedules
a follow-up of the key (:class:`~flink_agents.api.waits.ScheduledInput`, ``delay_seconds``
later) whose input names the set. The follow-up is kept in the key's state with the run's
commit, so it is made once per crossing whatever fails after: a replay of the crossing run
commits (and schedules) once, and a restored follow-up fires once.

The follow-up's run is the compaction, not a run of the agent's actions: it merges the items
written before the ``keep_recent`` most recent ones (earlier compactions' facts first) with one
durable model call (``memory:<set>:compact:0``), deletes them and writes the facts under ids
derived from its run (``memory:<set>:compacted:<i>``), committed with the run like any write. A
replay of it is handed the recorded reply and the recorded embeddings: the model is asked once.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any, cast

from flink_agents.api.chat import ChatMessage
from flink_agents.api.fact_extraction import ExtractionModel, facts_of
from flink_agents.api.long_term_memory import MEMORY_CALL_PREFIX, MemoryWrite
from flink_agents.api.memory_compaction import MemoryCompaction, compaction_request
from flink_agents.api.resources import ResourceType
from flink_agents.api.waits import ScheduledInput
from flink_agents.durable.identity import CallIdentity
from flink_agents.durable.store import now_ms
from flink_agents.plan.models import ActionPlan
from flink_agents.plan.resolve import ResolvedPlan
from flink_agents.runtime.action_context import ActionContext, RunState
from flink_agents.runtime.memory_backends import Compacted

COMPACTION_INPUT = "flink_agents.memory_compaction"
"""The one member of a compaction follow-up's input: the name of the set to compact."""

COMPACTED_FROM = "compacted_from"
"""Metadata of a fact a compaction wrote: how many items it merged."""

COMPACTION_ACTION = ActionPlan(
    name="memory_compaction",
    function="flink_agents.runtime.compaction_runs:MemoryCompactions",
    listen_to=["InputEvent"],
)
"""The action a compaction's durable calls are made under (their identity's action)."""


def compaction_input(set_name: str) -> dict[str, str]:
    """The input of the follow-up that compacts ``set_name``."""
    return {COMPACTION_INPUT: set_name}


def compaction_of(value: Any) -> str | None:
    """The set a follow-up's input asks to compact, or None for any other input."""
    if isinstance(value, dict) and len(value) == 1:
        name = value.get(COMPACTION_INPUT)
        if isinstance(name, str):
            return name
    return None


class MemoryCompactions:
    """The memory sets of an agent that are compacted, and the compaction itself."""

    def __init__(self, resolved: ResolvedPlan, external: Collection[str] = ()) -> None:
        """``external``: the sets on a vector store, never compacted (the compiler refuses
        their ``compaction``; a plan that skipped it has it ignored)."""
        self._settings: Mapping[str, MemoryCompaction] = {
            name: MemoryCompaction.model_validate(declared.arguments["compaction"])
            for name, declared in resolved.plan.resources.items()
            if declared.type is ResourceType.LONG_TERM_MEMORY
            and declared.arguments.get("compaction") is not None
            and name not in external
        }

    def compacts(self, set_name: str) -> bool:
        """Whether ``set_name`` is compacted."""
        return set_name in self._settings

    def requested(self, run: RunState) -> list[ScheduledInput]:
        """The compactions a successful ``run`` asks for: one per set it took past its
        ``max_items`` (from at or below it), as follow-ups of the key. A run that wrote no
        compacted set costs a set intersection."""
        if not self._settings:
            return []
        memory = run.long_term_memory
        crossed: list[ScheduledInput] = []
        for name in sorted(memory.activity.sets_written.intersection(self._settings)):
            settings = self._settings[name]
            if memory.committed_count(name) <= settings.max_items < memory.count(name):
                identity = CallIdentity(
                    run.run_id,
                    run.run_id.input_event_id,
                    COMPACTION_ACTION.name,
                    f"{MEMORY_CALL_PREFIX}{name}:compaction",
                )
                crossed.append(
                    ScheduledInput(
                        schedule_id=identity.digest(),
                        at_ms=int(now_ms()) + round(settings.delay_seconds * 1000),
                        input=compaction_input(name),
                    )
                )
        return crossed

    async def compact(self, ctx: ActionContext, run: RunState, set_name: str) -> Compacted:
        """Merge the older items of ``set_name`` for the run's key into facts (see the module
        docstring); the writes are staged in ``run``, committed with it."""
        settings = self._settings[set_name]
        memory = run.long_term_memory
        items = memory.listed(set_name)
        # Earlier compactions' facts stand for the oldest items: first, so that a later item
        # wins where the model is told two contradict.
        ordered = [i for i in items if COMPACTED_FROM in i[1].metadata]
        ordered += [i for i in items if COMPACTED_FROM not in i[1].metadata]
        merged = ordered[: len(ordered) - settings.keep_recent]
        if len(merged) < 2:  # deleted since the crossing: nothing to merge
            return Compacted(set_name, len(items), len(items), 0)
        model = cast(
            ExtractionModel, ctx.get_resource(settings.chat_model, ResourceType.CHAT_MODEL)
        )
        call_id = f"{MEMORY_CALL_PREFIX}{set_name}:compact:0"
        # A call of the connection's ``chat``: budgets meter it like any model call.
        reply = await ctx.durable_execute_async(
            model.chat_connection().chat,
            compaction_request(model, settings, [item.text for _, item in merged]),
            call_id=call_id,
            result_type=ChatMessage,
        )
        where = f"the compaction of key {json.dumps(ctx.key, default=str)}, call {call_id}"
        facts = facts_of(reply.content, where)
        for item_id, _ in merged:
            memory.apply(MemoryWrite(set=set_name, id=item_id))
        target = ctx.long_term_memory[set_name]
        for index, fact in enumerate(facts):
            fact_id = ctx.durable_call_key(f"{MEMORY_CALL_PREFIX}{set_name}:compacted:{index}")
            await target.upsert(fact_id, fact, {COMPACTED_FROM: len(merged)})
        usage = reply.usage
        tokens = 0 if usage is None else usage.input_tokens + usage.output_tokens
        return Compacted(set_name, len(items), memory.count(set_name), tokens)
