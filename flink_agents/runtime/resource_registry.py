"""Opening resources from plan descriptors, once per engine, on first use."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from pydantic import ValidationError

from flink_agents.api.resources import (
    Resource,
    ResourceType,
    UnresolvedSecretError,
    resolve_env_references,
)
from flink_agents.plan.errors import PlanIssue, PlanValidationError, issues_from_validation
from flink_agents.plan.resolve import ResolvedPlan

logger = logging.getLogger(__name__)


class ResourceRegistry:
    """Resources of one plan, shared by all keys (they are clients, not per-key state).

    The registry of an internal sub-agent's scope has its parent's registry as ``parent``: a
    name the scope does not declare is looked up there.
    """

    def __init__(
        self,
        resolved: ResolvedPlan,
        environ: Mapping[str, str] | None = None,
        parent: ResourceRegistry | None = None,
    ) -> None:
        self._resolved = resolved
        self._environ = environ
        self._parent = parent
        self._open: dict[str, Resource] = {}

    def get(self, name: str, resource_type: ResourceType) -> Resource:
        """The resource ``name``, opened on first use; it must be of ``resource_type``."""
        resources = self._resolved.plan.resources
        if name not in resources and self._parent is not None:
            return self._parent.get(name, resource_type)
        if name not in resources:
            raise LookupError(
                f"no resource named {name!r}; the plan declares {sorted(resources) or 'none'}"
            )
        declared = resources[name]
        if declared.type != resource_type:
            raise LookupError(
                f"resource {name!r} is a {declared.type.value}, not a {resource_type.value}"
            )
        if name not in self._open:
            self._open[name] = self._open_resource(name)
        return self._open[name]

    def _open_resource(self, name: str) -> Resource:
        declared = self._resolved.plan.resources[name]
        try:
            arguments = resolve_env_references(declared.arguments, self._environ)
            resource = self._resolved.resource_classes[name].model_validate(arguments)
        except ValidationError as exc:
            issues = [
                PlanIssue(f"/resources/{name}/arguments{issue.path}", issue.message)
                for issue in issues_from_validation(exc, arguments)
            ]
            raise PlanValidationError(issues, f"resource {name!r}") from None
        except (ImportError, UnresolvedSecretError) as exc:
            issue = PlanIssue(f"/resources/{name}/arguments", str(exc))
            raise PlanValidationError([issue], f"resource {name!r}") from None
        resource.bind(self.get)
        resource.open()
        return resource

    async def aclose(self) -> None:
        """Close the resources opened so far; one that fails to close is logged, not raised,
        so the others still close."""
        opened, self._open = self._open, {}
        for name, resource in opened.items():
            try:
                await resource.aclose()
            except Exception:
                logger.warning("resource %r failed to close", name, exc_info=True)

    def open_all(self) -> None:
        """Open every declared resource now, so bad configuration fails at start-up."""
        for name, declared in self._resolved.plan.resources.items():
            self.get(name, declared.type)
