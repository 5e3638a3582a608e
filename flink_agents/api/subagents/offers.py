"""Offering sub-agents to a chat model as ``subagent_<name>`` callables.

A chat model setup lists the AGENT resources it may delegate to. :func:`offer_subagents` turns
that list into tool specs (after the model's tools) and records the sub-agents it could not
offer, and why. The model tells a delegation from a tool by the description's marker alone; no
listing message is added to the conversation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from flink_agents.api.chat import ToolSpec
from flink_agents.api.resources import Resource, ResourceType
from flink_agents.api.subagents.delegation import (
    DELEGATION_MARKER,
    SUBAGENT_TOOL_PREFIX,
    SubagentSetup,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SubagentOffer:
    """What a chat model is offered: specs in order, callable -> AGENT resource, and skips."""

    specs: list[ToolSpec] = field(default_factory=list)
    resources: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def callable_name(name: str) -> str:
    """The callable a model uses to delegate to the AGENT resource ``name``."""
    return f"{SUBAGENT_TOOL_PREFIX}{name}"


def delegation_description(name: str, setup: SubagentSetup) -> str:
    """The setup's description (or a generic one) ending with the delegation marker."""
    text = (setup.description or "").strip() or f"Delegates a task to the sub-agent {name!r}."
    return f"{text} {DELEGATION_MARKER}"


def offer_subagents(
    names: list[str], lookup: Callable[[str, ResourceType], Resource], model: str = "chat model"
) -> SubagentOffer:
    """Build the offer for ``names``.

    A sub-agent without a usable input schema is skipped with a warning naming it; the others
    are still offered. An entry that is not a sub-agent, or is listed twice, raises.
    """
    offer = SubagentOffer()
    for name in names:
        callable_ = callable_name(name)
        if callable_ in offer.resources or name in offer.skipped:
            raise ValueError(f"{model}: sub-agent {name!r} is listed twice")
        try:
            setup = lookup(name, ResourceType.AGENT)
        except LookupError as exc:
            raise ValueError(f"{model}: sub-agent {name!r} cannot be offered: {exc}") from None
        if not isinstance(setup, SubagentSetup):
            raise ValueError(
                f"{model}: AGENT resource {name!r} is a {type(setup).__name__}, not a "
                "SubagentSetup, so it cannot be offered as a callable"
            )
        try:
            schema = setup.tool_schema()
        except ValueError as exc:
            raise ValueError(f"{model}: sub-agent {name!r}: {exc}") from None
        if schema is None:
            reason = "no input schema: give it input_schema or an input_type rendering an object"
            logger.warning("%s: sub-agent %r is not offered (%s)", model, name, reason)
            offer.skipped[name] = reason
            continue
        offer.specs.append(
            ToolSpec(
                name=callable_, description=delegation_description(name, setup), parameters=schema
            )
        )
        offer.resources[callable_] = name
    return offer
