"""The agent plan: what an agent compiles to and what a worker runs.

A plan is pure data. Functions and classes appear as ``module:qualname`` references that the
worker imports (see :mod:`flink_agents.plan.resolve`). Its JSON form is deterministic: keys are
sorted and lists keep declaration order, so the same agent compiled by the same version gives the
same bytes (``compiled_by`` records the version, so that a plan a later version cannot load says
who made it).
"""

from __future__ import annotations

import json
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from flink_agents.api.agent import ErrorPolicy, PausedPolicy
from flink_agents.api.budgets import Budgets
from flink_agents.api.json_values import JsonLimitError, read_json
from flink_agents.api.prompts import Prompt
from flink_agents.api.refs import REFERENCE_PATTERN, class_path
from flink_agents.api.resources import ResourceDescriptor, ResourceType
from flink_agents.api.routing_rules import RoutingRules
from flink_agents.api.subagents.delegation import SUBAGENT_TOOL_PREFIX
from flink_agents.api.tools import function_tool_name
from flink_agents.plan.errors import (
    PlanIssue,
    PlanValidationError,
    error_text,
    issues_from_validation,
)
from flink_agents.plan.subagent_budgets import subagent_budget_problem

PLAN_VERSION = 2
"""The plan format this code writes and reads."""

DISTRIBUTION = "flink-agents-py"


def installed_version() -> str | None:
    """This flink-agents-py's version, as installed (None for a source tree never installed)."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return None


RECOMPILE_HINT = (
    "compile the agent again with this version: flink-agents compile AGENT -o plan.json "
    "(AGENT: its YAML file or module:attr)"
)
"""What to do with a plan an earlier version compiled that this one cannot load."""


def compiled_by_text(compiled_by: str | None) -> str:
    """Who compiled a plan, for an error: its recorded version, or that it has none."""
    if compiled_by is not None:
        return f"flink-agents-py {compiled_by}"
    return "an earlier flink-agents-py (plans record their version since 2026-12-02)"


class ActionPlan(BaseModel):
    """One action: the function to call and the event types it handles."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    function: str = Field(pattern=REFERENCE_PATTERN, description="module:qualname")
    listen_to: list[str] = Field(min_length=1, description="Event type names.")
    config: dict[str, Any] = Field(default_factory=dict)
    sends: list[str] = Field(
        default_factory=list,
        exclude_if=lambda sends: not sends,
        description="Event types the action declares it sends; each needs a listener.",
    )
    resource_keys: dict[str, ResourceType] = Field(
        default_factory=dict,
        exclude_if=lambda keys: not keys,
        description="Config keys whose values name resources, with the type they name.",
    )


_PROMPT_CLASS = class_path(Prompt)
_ROUTER_CLASS = "flink_agents.providers.routing:RoutingChatModelConnection"
"""The routing connection, whose rules the plan checks (named, not imported: a sibling tier)."""


class ResourcePlan(ResourceDescriptor):
    """A named resource's type and descriptor (class path and arguments).

    A prompt of the built-in class is checked here and lists its ``placeholders``.
    """

    type: ResourceType
    placeholders: list[str] | None = Field(
        default=None,
        exclude_if=lambda names: names is None,
        description="A prompt's placeholders, in order (derived from its template).",
    )

    @model_validator(mode="after")
    def _prompt_placeholders(self) -> ResourcePlan:
        if self.type is not ResourceType.PROMPT or self.class_path != _PROMPT_CLASS:
            return self
        try:
            found = Prompt.model_validate(self.arguments).placeholders
        except ValidationError as exc:
            problems = "; ".join(error_text(error) for error in exc.errors())
            raise ValueError(f"not a valid prompt: {problems}") from None
        if self.placeholders is not None and self.placeholders != found:
            raise ValueError(
                f"placeholders {self.placeholders} do not match the template's {found}"
            )
        self.placeholders = found
        return self

    @model_validator(mode="after")
    def _routing_rules(self) -> ResourcePlan:
        """A routing connection's routes and classifier are checked when the plan is."""
        if self.type is ResourceType.CHAT_MODEL_CONNECTION and self.class_path == _ROUTER_CLASS:
            RoutingRules.model_validate(self.arguments)
        return self


class AgentPlan(BaseModel):
    """A compiled agent."""

    model_config = ConfigDict(extra="forbid")

    compiled_by: str | None = Field(  # before plan_version: its check names it
        default=None,
        exclude_if=lambda version: version is None,
        description="The flink-agents-py version that compiled the plan (set on the top plan).",
    )
    plan_version: int = PLAN_VERSION
    name: str = Field(min_length=1)
    description: str | None = Field(default=None, exclude_if=lambda text: text is None)
    error_policy: ErrorPolicy = "fail"
    while_paused: PausedPolicy = Field(
        default="queue",
        exclude_if=lambda policy: (
            policy == "queue"
        ),  # plans that keep per-key order keep their bytes
        description="While a run of a key is paused at a wait: its later inputs queue behind "
        "it (queue) or run alongside it (alongside); the top plan's is the job's "
        "(docs/waits.md).",
    )
    config: dict[str, Any] = Field(default_factory=dict)
    actions: list[ActionPlan] = Field(min_length=1)
    resources: dict[str, ResourcePlan] = Field(default_factory=dict)
    scopes: dict[str, AgentPlan] = Field(
        default_factory=dict,
        exclude_if=lambda scopes: not scopes,  # plans without sub-agents keep their bytes
        description="Plans of internal sub-agents, by scope name; they run inside this plan.",
    )
    budgets: Budgets | None = Field(
        default=None,
        exclude_if=lambda budgets: budgets is None,  # plans without budgets keep their bytes
        description="What the agent's model calls may spend (docs/budgets.md).",
    )

    @field_validator("plan_version")
    @classmethod
    def _supported_version(cls, plan_version: int, info: ValidationInfo) -> int:
        if plan_version != PLAN_VERSION:
            this = installed_version() or "(not installed)"
            by = compiled_by_text(info.data.get("compiled_by"))
            raise ValueError(
                f"plan_version {plan_version} is not supported; expected {PLAN_VERSION}: the plan "
                f"was compiled by {by} and this is flink-agents-py {this}; {RECOMPILE_HINT}"
            )
        return plan_version

    @field_validator("actions")
    @classmethod
    def _unique_action_names(cls, actions: list[ActionPlan]) -> list[ActionPlan]:
        seen: set[str] = set()
        for action in actions:
            if action.name in seen:
                raise ValueError(f"two actions are named {action.name!r}; names must be unique")
            seen.add(action.name)
        return actions

    @field_validator("resources")
    @classmethod
    def _no_reserved_tool_names(cls, resources: dict[str, ResourcePlan]) -> dict[str, ResourcePlan]:
        for name, resource in resources.items():
            if resource.type is not ResourceType.TOOL:
                continue
            given = resource.arguments.get("name")
            names = [name, given if isinstance(given, str) else None]
            function = resource.arguments.get("function")
            if isinstance(function, str):  # a function tool is offered under its function's name
                names.append(function_tool_name(function, names[1]))
            for offered in names:
                if offered is not None and offered.startswith(SUBAGENT_TOOL_PREFIX):
                    raise ValueError(
                        f"tool {name!r} would be offered as {offered!r}: the prefix "
                        f"{SUBAGENT_TOOL_PREFIX!r} is reserved for sub-agent callables"
                    )
        return resources

    @field_validator("budgets")
    @classmethod
    def _budget_fallbacks_are_connections(
        cls, budgets: Budgets | None, info: ValidationInfo
    ) -> Budgets | None:
        resources: dict[str, ResourcePlan] = info.data.get("resources", {})
        for index, budget in enumerate(budgets.limits if budgets else []):
            declared = resources.get(budget.fallback or "")
            if budget.fallback is not None and (
                declared is None or declared.type is not ResourceType.CHAT_MODEL_CONNECTION
            ):
                raise ValueError(
                    f"limits[{index}].fallback: {budget.fallback!r} is not a chat model "
                    "connection of the agent"
                )
        return budgets

    @model_validator(mode="after")
    def _subagent_budgets_fit(self) -> AgentPlan:
        problem = subagent_budget_problem(self.budgets, self.scopes)
        if problem is not None:
            raise ValueError(problem)
        return self

    def listeners(self, event_type: str) -> list[ActionPlan]:
        """Actions handling ``event_type``, in plan order."""
        return [action for action in self.actions if event_type in action.listen_to]

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)

    def to_json(self) -> str:
        """Deterministic JSON: sorted keys, two-space indent, trailing newline."""
        return json.dumps(self.to_dict(), sort_keys=True, indent=2, ensure_ascii=False) + "\n"

    @classmethod
    def from_dict(cls, data: Any, source: str | None = None) -> AgentPlan:
        """Validate ``data``; errors become a :class:`PlanValidationError` with JSON pointers.

        This checks the format; :func:`flink_agents.plan.checks.check_plan` checks the event flow
        and references (the compiler and ``load_plan`` run both).
        """
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise PlanValidationError(issues_from_validation(exc, data), source) from None

    @classmethod
    def from_json(cls, text: str, source: str | None = None) -> AgentPlan:
        try:
            data = read_json(text)
        except json.JSONDecodeError as exc:
            issue = PlanIssue("", f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
            raise PlanValidationError([issue], source) from None
        except JsonLimitError as exc:
            raise PlanValidationError([PlanIssue("", f"not a plan: {exc}")], source) from None
        return cls.from_dict(data, source)
