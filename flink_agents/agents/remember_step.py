"""The built-in "remember" step: a model extracts facts from each run into a memory set.

Added to an agent with the set's name in its config, :func:`remember_run` keeps the run's input
(in sensory memory) and, for every output of the run, asks the set's extraction model for the
facts the input and that output state, and writes them into the set
(:meth:`~flink_agents.api.long_term_memory.MemorySet.remember`: one durable model call, whose
recorded facts a replay writes under the same ids)::

    agent.add_action(remember_run, config={"memory_set": "facts"})

In YAML::

    actions:
      - function: flink_agents.agents:remember_run
        config: {memory_set: facts}

The set needs ``extraction`` settings (docs/memory.md, "Extraction").
"""

from __future__ import annotations

import json
from typing import Any

from flink_agents.api.agent import action
from flink_agents.api.context import RunnerContext
from flink_agents.api.events import InputEvent, OutputEvent
from flink_agents.api.resources import ResourceType

RUN_INPUT = "remember_run:input"
"""The sensory-memory entry that keeps the run's input for the extraction at its outputs."""


def run_transcript(run_input: Any, output: Any) -> str:
    """The text the extraction model is shown: the run's input and one of its outputs."""

    def shown(value: Any) -> str:
        return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)

    return f"Input:\n{shown(run_input)}\n\nOutput:\n{shown(output)}"


@action(InputEvent, OutputEvent, resource_keys={"memory_set": ResourceType.LONG_TERM_MEMORY})
async def remember_run(event: InputEvent | OutputEvent, ctx: RunnerContext) -> None:
    """Keep the run's input; at each output, remember the facts input and output state in the
    memory set the action's ``memory_set`` config names."""
    if isinstance(event, InputEvent):
        ctx.sensory_memory.set(RUN_INPUT, event.input)
        return
    name = ctx.action_config.get("memory_set")
    if not isinstance(name, str):
        raise ValueError(
            "remember_run needs `memory_set` in its action config: the name of the "
            f"long_term_memory resource to remember into (got {name!r})"
        )
    memory_set = ctx.long_term_memory[name]
    text = run_transcript(ctx.sensory_memory.get(RUN_INPUT), event.output)
    await memory_set.remember(text, metadata={"source": "run"})
