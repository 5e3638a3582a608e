"""Deciding a waiting run from the console: the approver's edit checked against the tool's
schema, and the decision record written where the job's decisions input reads it -- the record
and the writer of ``flink-agents waits approve|reject``."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from flink_agents.api.resources import ResourceType
from flink_agents.api.tools import Tool
from flink_agents.cli.wait_records_io import decision_record

if TYPE_CHECKING:
    from flink_agents.console.console_sources import ConsoleSources
    from flink_agents.plan import AgentPlan

VERDICTS = ("approve", "edit", "reject")


class DecisionRefused(ValueError):
    """The decision cannot be written: its form is incomplete, or an edit does not fit."""


class ToolSchemas:
    """The agent's tools, opened on first use, to check an approver's edit as the tool-call
    action checks it before running the tool (``Tool.check_arguments``)."""

    def __init__(self, plan: AgentPlan | None) -> None:
        self._plan = plan
        self._registry: Any = None

    def check(self, tool: str, arguments: dict[str, Any]) -> None:
        """Raise :class:`DecisionRefused` if ``arguments`` do not fit the tool ``tool``; a tool
        the plan does not declare by name (one of an MCP server's, or no plan given) is
        checked by the job when the edit reaches it."""
        found = self._tool(tool)
        if found is None:
            return
        try:
            found.check_arguments(arguments)
        except ValueError as exc:  # pydantic's ValidationError is one
            raise DecisionRefused(f"the arguments do not fit tool {tool!r}: {exc}") from None

    def _tool(self, name: str) -> Tool | None:
        if self._plan is None or name not in self._plan.resources:
            return None
        if self._registry is None:
            from flink_agents.plan import resolve_plan
            from flink_agents.runtime import ResourceRegistry

            self._registry = ResourceRegistry(resolve_plan(self._plan))
        tool = self._registry.get(name, ResourceType.TOOL)
        return tool if isinstance(tool, Tool) else None


def parse_arguments(text: str) -> dict[str, Any]:
    """An edit's arguments as typed in the form: a JSON object."""
    try:
        arguments = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DecisionRefused(f"the arguments are not JSON: {exc}") from None
    if not isinstance(arguments, dict):
        raise DecisionRefused("the arguments must be a JSON object (the tool's arguments)")
    return arguments


def write_decision(
    sources: ConsoleSources,
    key: Any,
    wait_id: str,
    verdict: str,
    *,
    by: str,
    message: str | None,
    arguments: dict[str, Any] | None,
) -> str:
    """Write the decision record to the decisions topic (or file); where it went."""
    from flink_agents.cli.json_topic import TopicError
    from flink_agents.cli.waits_command import deliver_decision

    if sources.key_field is None:
        raise DecisionRefused("the console was started without --key-field (or --job)")
    if sources.decisions_topic is None and sources.decisions_file is None:
        raise DecisionRefused("the console was started without --decisions-topic (or --job)")
    try:
        record = decision_record(
            sources.key_field, key, wait_id, verdict, by=by, message=message, arguments=arguments
        )
        return deliver_decision(
            record,
            key,
            file=None if sources.decisions_topic else sources.decisions_file,
            topic=sources.decisions_topic,
            servers=sources.bootstrap_servers,
        )
    except (ValueError, TopicError) as exc:
        raise DecisionRefused(str(exc)) from None
