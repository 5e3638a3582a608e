"""What a compiler checks of an agent's long-term memory: each memory set's backend (its own, or
the agent's default from its config) and its compaction settings (docs/memory.md).

Every problem is reported with the JSON pointer of the offending value, so a YAML agent's error
names its line.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError

from flink_agents.api.long_term_memory import (
    LONG_TERM_MEMORY_BACKEND_KEY,
    LONG_TERM_MEMORY_STORE_KEY,
    MEMORY_BACKENDS,
    MemoryBackendError,
    memory_backend,
)
from flink_agents.api.memory_compaction import MemoryCompaction
from flink_agents.api.resources import ResourceType
from flink_agents.plan.errors import PlanIssue, json_pointer
from flink_agents.plan.models import AgentPlan


def memory_issues(
    plan: AgentPlan,
    prefix: list[str | int],
    unresolved: Sequence[tuple[list[str | int], str | None]] = (),
) -> list[PlanIssue]:
    """The problems of ``plan``'s memory backends and compaction settings. ``unresolved``: why
    the agent's default vector store (config ``long_term_memory_vector_store``) does not
    resolve, if it does not (the caller resolves references)."""
    issues = [
        PlanIssue(json_pointer([*prefix, *location]), why) for location, why in unresolved if why
    ]
    default = plan.config.get(LONG_TERM_MEMORY_BACKEND_KEY)
    if default is not None and default not in MEMORY_BACKENDS:
        issues.append(
            PlanIssue(
                json_pointer([*prefix, "config", LONG_TERM_MEMORY_BACKEND_KEY]),
                f"unknown long-term memory backend {default!r}: choose one of "
                f"{', '.join(MEMORY_BACKENDS)}",
            )
        )
        return issues
    for name, resource in plan.resources.items():
        if resource.type is not ResourceType.LONG_TERM_MEMORY:
            continue
        at: list[str | int] = [*prefix, "resources", name, "arguments"]
        try:
            backend, _ = memory_backend(resource.arguments, plan.config)
        except MemoryBackendError as error:
            issues.append(PlanIssue(json_pointer(at), f"memory set {name!r}: {error}"))
            continue
        compaction = resource.arguments.get("compaction")
        if compaction is None:
            continue
        try:
            MemoryCompaction.model_validate(compaction)
        except ValidationError as error:
            issues += [
                PlanIssue(json_pointer([*at, "compaction", *e["loc"]]), e["msg"])
                for e in error.errors()
            ]
            continue
        if prefix:  # a sub-agent's scope: its runs are its delegating run's
            issues.append(
                PlanIssue(
                    json_pointer([*at, "compaction"]),
                    f"memory set {name!r} of a sub-agent's scope: declare a compacted memory "
                    "set on the agent itself",
                )
            )
        elif backend != "keyed_state":
            issues.append(
                PlanIssue(
                    json_pointer([*at, "compaction"]),
                    f"memory set {name!r}: compaction is for backend 'keyed_state'; this set "
                    f"is on {backend!r}",
                )
            )
    return issues


DEFAULT_STORE_LOCATION: list[str | int] = ["config", LONG_TERM_MEMORY_STORE_KEY]
"""Where the agent's default vector store for memory is named."""
