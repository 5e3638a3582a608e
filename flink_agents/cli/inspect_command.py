"""``flink-agents inspect PLAN.json|FILE.yaml|module:attr``: what each chat model is offered,
and what each retrieval step searches."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from flink_agents.cli.conventions import EXIT_FAILED, add_source
from flink_agents.plan.sources import load_plan

if TYPE_CHECKING:
    from flink_agents.plan.models import AgentPlan
    from flink_agents.runtime.scopes import Scope


def add_command(commands: Any) -> None:
    """Add ``inspect`` to the ``flink-agents`` subcommands."""
    parser = commands.add_parser(
        "inspect", help="list what each chat model is offered and what retrieval searches"
    )
    add_source(parser, "a plan .json, a YAML agents file or module:attr")
    parser.set_defaults(handler=cmd_inspect)


def cmd_inspect(args: argparse.Namespace) -> int:
    """List, per scope and chat model, the tools (and what each MCP server offers), the
    sub-agent callables offered and the sub-agents skipped with the reason (a skipped sub-agent
    is never dropped silently); then the embedding models, the vector stores and the actions
    that use them (read from the plan: no store is contacted). Listing an MCP server's tools
    contacts it: one that cannot be reached is reported in one line (exit 1), not as a
    traceback."""
    from flink_agents.plan.resolve import resolve_plan
    from flink_agents.providers import ModelCallError
    from flink_agents.runtime.scopes import Scope

    try:
        _show(Scope.build(resolve_plan(load_plan(args.source, args.agent))), "")
    except ModelCallError as exc:
        print(f"flink-agents inspect: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return 0


def _show(scope: Scope, indent: str) -> None:
    from flink_agents.api.chat_models import ChatModelSetup
    from flink_agents.api.resources import ResourceType

    print(f"{indent}scope {scope.name}")
    for name, declared in scope.resolved.plan.resources.items():
        if declared.type is not ResourceType.CHAT_MODEL:
            continue
        model = scope.resources.get(name, ResourceType.CHAT_MODEL)  # opens the setup only
        assert isinstance(model, ChatModelSetup)
        offer = model.subagent_offer
        skipped = [f"{sub} ({reason})" for sub, reason in offer.skipped.items()]
        print(f"{indent}  chat model {name}")
        print(f"{indent}    tools: {', '.join(model.tools) or '-'}")
        for resource in model.tools:  # what a toolset (an MCP server) offers, by name
            offered = [n for n, source in model.offered_tools.items() if source == resource]
            if offered != [resource]:
                print(f"{indent}      from {resource}: {', '.join(offered) or '-'}")
        print(f"{indent}    sub-agent tools: {', '.join(offer.resources) or '-'}")
        print(f"{indent}    skipped sub-agents: {', '.join(skipped) or '-'}")
    _show_retrieval(scope.resolved.plan, indent)
    for child in scope.children.values():
        _show(child, indent + "  ")


_RETRIEVAL_FIELDS = ("connection", "model", "dimensions", "collection", "top_k", "where")
"""The arguments and config entries that say what a retrieval resource or step is."""


def _show_retrieval(plan: AgentPlan, indent: str) -> None:
    """The plan's embedding models and vector stores, and the actions naming them."""
    from flink_agents.api.resources import ResourceType

    for name, declared in plan.resources.items():
        kind = {
            ResourceType.EMBEDDING_MODEL: "embedding model",
            ResourceType.VECTOR_STORE: "vector store",
        }.get(declared.type)
        if kind is not None:
            print(f"{indent}  {kind} {name}: {_described(declared.arguments, declared.class_path)}")
    for action in plan.actions:
        uses = {
            key: action.config.get(key)
            for key, kind in action.resource_keys.items()
            if kind in (ResourceType.EMBEDDING_MODEL, ResourceType.VECTOR_STORE)
        }
        if uses:
            print(f"{indent}  action {action.name}: {_described({**action.config, **uses})}")


def _described(values: dict[str, Any], class_path: str | None = None) -> str:
    shown = [class_path.rpartition(":")[2]] if class_path else []
    shown += [
        f"{key} {values[key]}"
        for key in ("embedding_model", "vector_store", *_RETRIEVAL_FIELDS)
        if values.get(key) is not None
    ]
    return ", ".join(shown)
