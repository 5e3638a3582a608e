"""Map a plan's JSON pointer back to the YAML field that produced it.

A compile error names a place in the plan (``/resources/chat_model/arguments/connection``); a
YAML author wants the line of ``chat_models.chat_model.connection``. The mapping follows how
:mod:`flink_agents.plan.yaml.loader` builds an agent from its spec.
"""

from __future__ import annotations

from collections.abc import Sequence

from flink_agents.api.agent import Agent
from flink_agents.plan.compile import with_builtin_chat_actions
from flink_agents.plan.yaml.schema import AgentSpec

Location = Sequence[str | int]

_REACT_ACTIONS = {"react_start", "react_finish", "chat_action"}
"""Built-in actions whose config comes from the ``react:`` block."""


def pointer_parts(pointer: str) -> list[str]:
    """``/a/b~1c`` -> ``['a', 'b/c']`` (RFC 6901)."""
    if not pointer:
        return []
    return [p.replace("~1", "/").replace("~0", "~") for p in pointer.lstrip("/").split("/")]


def yaml_location(spec: AgentSpec, agent: Agent, parts: list[str]) -> list[str | int]:
    """The location, inside the agent's YAML, of the plan value at ``parts``.

    It may stop short (at the agent, say) where the plan value has no field of its own.
    """
    if len(parts) >= 2 and parts[0] == "resources":
        return _resource_location(spec, parts[1], parts[2:])
    if len(parts) >= 2 and parts[0] == "actions" and parts[1].isdigit():
        return _action_location(spec, agent, int(parts[1]), parts[2:])
    if len(parts) >= 2 and parts[0] == "scopes":
        return _scope_location(spec, agent, parts[1], parts[2:])
    if len(parts) == 2 and parts[0] == "config" and parts[1] in spec.config:  # a config key
        return ["config", parts[1]]
    if parts[:1] == ["budgets"] and spec.budgets is not None:  # the same shape in both
        return [int(p) if p.isdigit() else p for p in parts]
    return []


def _resource_location(spec: AgentSpec, name: str, rest: list[str]) -> list[str | int]:
    inner: list[str | int] = [int(p) if p.isdigit() else p for p in rest]
    if name in spec.chat_models:
        # A chat model's typed fields sit on the entry itself, not under ``arguments``.
        if (
            inner[:1] == ["arguments"]
            and inner[1:2]
            and inner[1] not in spec.chat_models[name].arguments
        ):
            inner = inner[1:]
        return ["chat_models", name, *inner]
    for block in (
        "connections",
        "resources",
        "subagents",
        "embedding_connections",
        "embedding_models",
        "vector_stores",
        "memory_sets",
    ):
        if name in getattr(spec, block):
            return [block, name, *inner]
    for block in ("prompts", "tools"):
        if name in getattr(spec, block):
            return [block, name]
    return []


def _action_location(spec: AgentSpec, agent: Agent, index: int, rest: list[str]) -> list[str | int]:
    actions = with_builtin_chat_actions(agent)
    if index >= len(actions):
        return []
    name = actions[index].name
    if spec.react and spec.react.retrieval and name == "retrieve_input":
        key = rest[1:2] if rest[:1] == ["config"] else []
        return ["react", "retrieval", *key]
    if spec.react and name in _REACT_ACTIONS:
        key = rest[1:2] if rest[:1] == ["config"] else []
        return ["react", *key]
    for position, declared in enumerate(spec.actions):
        if (declared.name or declared.function.rsplit(":", 1)[1].rsplit(".", 1)[-1]) == name:
            return ["actions", position, *(int(p) if p.isdigit() else p for p in rest)]
    return []


def _scope_location(spec: AgentSpec, agent: Agent, scope: str, rest: list[str]) -> list[str | int]:
    for registration, subagent in spec.subagents.items():
        inline = getattr(subagent, "agent", None)
        if isinstance(inline, AgentSpec) and inline.name == scope:
            child = agent.children[scope]
            return ["subagents", registration, "agent", *yaml_location(inline, child, rest)]
        if inline == scope:
            return ["subagents", registration, "agent"]
    return []
