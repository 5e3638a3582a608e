"""Scopes: a plan and the plans of its internal sub-agents, each with its own resources.

The root scope is the agent's plan. Each internal sub-agent is a child scope: its actions run
with its own action config, and a resource it does not declare is looked up in the enclosing
scope (so a child may use its parent's connection, but reads its own prompt and schema from its
own action config).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from flink_agents.plan.models import ActionPlan
from flink_agents.plan.resolve import ResolvedPlan
from flink_agents.runtime.resource_registry import ResourceRegistry


@dataclass
class Scope:
    """One plan in the scope tree, with its resources and child scopes."""

    name: str
    resolved: ResolvedPlan
    resources: ResourceRegistry
    parent: Scope | None = None
    children: dict[str, Scope] = field(default_factory=dict)
    _listeners: dict[str, list[ActionPlan]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @classmethod
    def build(
        cls,
        resolved: ResolvedPlan,
        environ: Mapping[str, str] | None = None,
        parent: Scope | None = None,
        name: str | None = None,
    ) -> Scope:
        """The scope of ``resolved`` and, recursively, of its sub-agents."""
        registry = ResourceRegistry(resolved, environ, parent.resources if parent else None)
        scope = cls(name or resolved.plan.name, resolved, registry, parent)
        scope.children = {
            child: cls.build(plan, environ, scope, child) for child, plan in resolved.scopes.items()
        }
        return scope

    def listeners(self, event_type: str) -> list[ActionPlan]:
        """The plan's actions handling ``event_type``, in plan order (found once per type:
        the plan does not change while it runs)."""
        found = self._listeners.get(event_type)
        if found is None:
            found = self._listeners[event_type] = self.resolved.plan.listeners(event_type)
        return found

    def child(self, name: str) -> Scope:
        """The child scope ``name``, searched here and then in enclosing scopes."""
        scope: Scope | None = self
        while scope is not None:
            if name in scope.children:
                return scope.children[name]
            scope = scope.parent
        raise LookupError(f"no internal sub-agent scope {name!r} in {self.name!r}")

    def open_all(self) -> None:
        """Open the resources of this scope and of every child scope."""
        self.resources.open_all()
        for child in self.children.values():
            child.open_all()

    async def aclose(self) -> None:
        """Close the resources of every child scope, then of this one."""
        for child in self.children.values():
            await child.aclose()
        await self.resources.aclose()
