"""Where modules and classes of earlier versions went: one table, read by the references plans
and YAML files name (:func:`~flink_agents.api.refs.import_reference`) and by Python imports
(:class:`MovedModuleFinder`), so an old path's error says what to use instead."""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import NoReturn

MOVED: dict[str, str] = {
    # The layout of 2026-11-30: integrations/ split into providers/ (its private helpers too,
    # not listed) and api/subagents/; the built-in agents out of api/; durable calls and the
    # store out of runtime/; YAML in plan/yaml/; the examples and plan regeneration out of the
    # package (importable from the repository root).
    "flink_agents.integrations.anthropic": "flink_agents.providers.anthropic",
    "flink_agents.integrations.ollama": "flink_agents.providers.ollama",
    "flink_agents.integrations.openai_compatible": "flink_agents.providers.openai_compatible",
    "flink_agents.integrations.scripted": "flink_agents.providers.scripted",
    "flink_agents.integrations.http_subagent": "flink_agents.providers.http_subagent",
    "flink_agents.api.react": "flink_agents.agents.react",
    "flink_agents.api.chat_actions": "flink_agents.agents.chat_actions",
    "flink_agents.api.subagent_tools": "flink_agents.api.subagents.offers",
    "flink_agents.runtime.durable": "flink_agents.durable.call",
    "flink_agents.runtime.durable_store": "flink_agents.durable.calls",
    "flink_agents.runtime.group_flush": "flink_agents.durable.group_flush",
    "flink_agents.runtime.identity": "flink_agents.durable.identity",
    "flink_agents.runtime.journal": "flink_agents.durable.journal",
    "flink_agents.runtime.journal_codec": "flink_agents.durable.journal_codec",
    "flink_agents.runtime.replay": "flink_agents.durable.mismatch",
    "flink_agents.runtime.store": "flink_agents.durable.store",
    "flink_agents.plan.yaml_agent": "flink_agents.plan.yaml.loader",
    "flink_agents.plan.yaml_schema": "flink_agents.plan.yaml.schema",
    "flink_agents.examples": "examples",
    "flink_agents.plan.regenerate": "scripts.regenerate",
    # The keyed logic's helpers moved from flink/ to runtime/; the protocol that mirrored the
    # operator's options went when the options moved beside the logic that reads them.
    "flink_agents.flink.options": "flink_agents.runtime.options",
    "flink_agents.flink.records": "flink_agents.runtime.json_records",
    "flink_agents.flink.recovery": "flink_agents.runtime.recovery",
    "flink_agents.runtime.keyed:KeyedOptions": "flink_agents.runtime.options:OperatorOptions",
    # The same layout took these names out of the faces of api/ and runtime/ (the modules that
    # define them say what they are; flink_agents re-exports ReActAgent too).
    "flink_agents.api:ReActAgent": "flink_agents.agents:ReActAgent",
    "flink_agents.api:chat_action": "flink_agents.agents:chat_action",
    "flink_agents.api:tool_call_action": "flink_agents.agents:tool_call_action",
    "flink_agents.api:BaseSubagentCallable": "flink_agents.api.subagents:BaseSubagentCallable",
    "flink_agents.api:ActionDeclaration": "flink_agents.api.agent:ActionDeclaration",
    "flink_agents.api:ActionSpec": "flink_agents.api.agent:ActionSpec",
    "flink_agents.api:action_spec": "flink_agents.api.agent:action_spec",
    "flink_agents.api:class_path": "flink_agents.api.refs:class_path",
    "flink_agents.api:import_reference": "flink_agents.api.refs:import_reference",
    "flink_agents.runtime:CallIdentity": "flink_agents.durable:CallIdentity",
    "flink_agents.runtime:CallRunner": "flink_agents.durable:CallRunner",
    "flink_agents.runtime:DirectCallRunner": "flink_agents.durable:DurableCalls",
    "flink_agents.runtime:DurableCall": "flink_agents.durable:DurableCall",
    "flink_agents.runtime:RunId": "flink_agents.durable:RunId",
    "flink_agents.runtime:event_id": "flink_agents.durable:event_id",
    # One object for every durable call (issue 31): the four call runners are DurableCalls
    # (no store: calls made, nothing recorded; a counting harness: a probe).
    "flink_agents.durable.runner": "flink_agents.durable.calls",
    "flink_agents.durable.runner:StoreCallRunner": "flink_agents.durable.calls:DurableCalls",
    "flink_agents.durable.call:DirectCallRunner": "flink_agents.durable.calls:DurableCalls",
    "flink_agents.testing.harness:CountingCallRunner": "flink_agents.testing.harness:CountingProbe",
    "flink_agents.replay.serving:RecordedCallRunner": "flink_agents.replay.serving:ReplayBook",
    "flink_agents.durable:DirectCallRunner": "flink_agents.durable:DurableCalls",
    "flink_agents.durable:StoreCallRunner": "flink_agents.durable:DurableCalls",
    "flink_agents.testing:CountingCallRunner": "flink_agents.testing:CountingProbe",
    # The decorators observing the runners: DurableCalls names each call's outcome itself.
    "flink_agents.observability.calls": "flink_agents.durable.calls",
    # observability/ as a small core (records, event log, listeners, settings) with its sinks
    # in sinks/; the Flink REST reader in flink/; trace and status rendering, and the replay
    # commands, in the cli/ package (issue 31).
    "flink_agents.observability.records": "flink_agents.observability.log_records",
    "flink_agents.observability.refs": "flink_agents.observability.call_refs",
    "flink_agents.observability.log": "flink_agents.observability.event_log",
    "flink_agents.observability.config": "flink_agents.observability.log_config",
    "flink_agents.observability.exports": "flink_agents.observability.sinks.sink_config",
    "flink_agents.observability.file_sink": "flink_agents.observability.sinks.json_lines",
    "flink_agents.observability.kafka_log": "flink_agents.observability.sinks.kafka_log",
    "flink_agents.observability.otel": "flink_agents.observability.sinks.otel",
    "flink_agents.observability.metrics": "flink_agents.observability.sinks.metrics",
    "flink_agents.observability.queued": "flink_agents.observability.sinks.queued",
    "flink_agents.observability.job_status": "flink_agents.flink.job_status",
    "flink_agents.observability.trace": "flink_agents.cli.trace_tree",
    "flink_agents.observability.trace:read_records": "flink_agents.observability:read_records",
    "flink_agents.observability.status": "flink_agents.cli.status_line",
    "flink_agents.replay.commands": "flink_agents.cli.replay_command",
    "flink_agents.replay.commands:cmd_store_export": (
        "flink_agents.cli.store_command:cmd_store_export"
    ),
    "flink_agents.replay.commands:add_bootstrap_option": (
        "flink_agents.cli.conventions:add_bootstrap_option"
    ),
    # One StoreConfig carries every Kafka store setting.
    "flink_agents.durable.store.kafka:KafkaStoreConfig": (
        "flink_agents.durable.store.store_config:StoreConfig"
    ),
    # Names that tell the rooms apart (issue 31): no two modules share a file name; the store's
    # implementation modules are private behind its face (import their names from it); "replay"
    # is the offline replayer's word only; the YAML format's classes are not named like the API's.
    "flink_agents.durable.store.config": "flink_agents.durable.store.store_config",
    "flink_agents.durable.store.base": "flink_agents.durable.store",
    "flink_agents.durable.store.canonical": "flink_agents.durable.store",
    "flink_agents.durable.store.codec": "flink_agents.durable.store",
    "flink_agents.durable.store.errors": "flink_agents.durable.store",
    "flink_agents.durable.store.limits": "flink_agents.durable.store",
    "flink_agents.durable.store.log": "flink_agents.durable.store",
    "flink_agents.durable.store.memory": "flink_agents.durable.store",
    "flink_agents.durable.store.payload": "flink_agents.durable.store",
    "flink_agents.durable.store.records": "flink_agents.durable.store",
    "flink_agents.runtime.records": "flink_agents.runtime.json_records",
    "flink_agents.runtime.resources": "flink_agents.runtime.resource_registry",
    "flink_agents.flink.ingestion": "flink_agents.flink.ingestion_job",
    "flink_agents.durable.replay": "flink_agents.durable.mismatch",
    "flink_agents.durable.replay:ReplayMismatchError": (
        "flink_agents.durable.mismatch:CallMismatchError"
    ),
    "flink_agents.plan.yaml.schema:ToolSpec": "flink_agents.plan.yaml.schema:FunctionToolSpec",
    "flink_agents.plan.yaml.schema:ActionSpec": "flink_agents.plan.yaml.schema:ActionFunctionSpec",
    # api/ holds declarations only (issue 31): the retry loop and the HTTP sub-agent are
    # providers' mechanics (RetryPolicy, and the attempt-tracker seam durable sets, stay).
    "flink_agents.api.attempts:AttemptFailure": "flink_agents.providers.retry_loop:AttemptFailure",
    "flink_agents.api.attempts:AttemptsFailed": "flink_agents.providers.retry_loop:AttemptsFailed",
    "flink_agents.api.attempts:is_retryable_status": (
        "flink_agents.providers.retry_loop:is_retryable_status"
    ),
    "flink_agents.api.attempts:parse_retry_after": (
        "flink_agents.providers.retry_loop:parse_retry_after"
    ),
    "flink_agents.api.attempts:request_target": "flink_agents.providers.retry_loop:request_target",
    "flink_agents.api.attempts:retry_within_budget": (
        "flink_agents.providers.retry_loop:retry_within_budget"
    ),
    "flink_agents.api.subagents.http": "flink_agents.providers.http_subagent",
    "flink_agents.api:HttpSubagent": "flink_agents.providers.http_subagent:HttpSubagent",
    "flink_agents.api.subagents:HttpSubagent": "flink_agents.providers.http_subagent:HttpSubagent",
    "flink_agents.api.subagents:IDEMPOTENCY_HEADER": (
        "flink_agents.providers.http_subagent:IDEMPOTENCY_HEADER"
    ),
    # Delegation's mechanics to the engine; the two context.py get names of their own.
    "flink_agents.api.subagents.delegation:delegation_call_id": (
        "flink_agents.runtime.delegated_calls:delegation_call_id"
    ),
    "flink_agents.runtime.context": "flink_agents.runtime.action_context",
    # One settings model of a runtime (issue 31): a job spec is RuntimeSettings plus its job.
    "flink_agents.flink.job:with_call_caps": "flink_agents.runtime.settings:with_call_caps",
}
"""Old path -> new path: a module (its submodules follow it), or a ``module:qualname``."""


def moved_module(module: str) -> str | None:
    """Where the module ``module`` moved (the entry of it or of the nearest package above it),
    following later moves of where it went (``flink_agents.runtime.store.config`` went with its
    package to ``flink_agents.durable.store``, then to ``store_config`` there)."""
    found: str | None = None
    step = _moved_once(module)
    while step is not None and step != found:
        found, step = step, _moved_once(step)
    return found


def _moved_once(module: str) -> str | None:
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        old = ".".join(parts[:end])
        if old in MOVED:
            return ".".join([MOVED[old], *parts[end:]])
    return None


def moved_reference(reference: str) -> str | None:
    """What to use instead of the ``module:qualname`` ``reference`` of an earlier version."""
    if reference in MOVED:
        return MOVED[reference]
    module, _, qualname = reference.partition(":")
    new = moved_module(module)
    return None if new is None else f"{new}:{qualname}"


def moved_module_hint(module: str) -> str | None:
    """Why ``module`` is not there, if it moved: where to, or, for a package split up, where
    its modules went."""
    new = moved_module(module)
    if new is not None:
        return f"it moved to {new}"
    by_package: dict[str, list[str]] = {}  # new package -> old names kept there
    renamed: list[str] = []
    for old in sorted(MOVED):
        parent, _, name = old.rpartition(".")
        if parent != module or ":" in old:
            continue
        package, _, new_name = MOVED[old].rpartition(".")
        if new_name == name:
            by_package.setdefault(package, []).append(name)
        else:
            renamed.append(f"{name} to {MOVED[old]}")
    kept = [f"{', '.join(names)} to {package}" for package, names in by_package.items()]
    return f"its modules moved: {'; '.join(kept + renamed)}" if kept or renamed else None


class MovedNameError(ImportError):
    """A name a package's face exported in an earlier version: says where it is now."""


def missing_name_error(module: str, name: str) -> AttributeError | MovedNameError:
    """The error for a package face's ``__getattr__`` to raise for ``module.name``: a
    :class:`MovedNameError` naming the new place if the name moved (an ``ImportError``, since
    ``from module import name`` drops an ``AttributeError``'s message), else the usual
    ``AttributeError``."""
    new = MOVED.get(f"{module}:{name}")
    if new is None:
        return AttributeError(f"module {module!r} has no attribute {name!r}", name=name)
    return MovedNameError(
        f"cannot import name {name!r} from {module!r}; it moved: use {new!r}", name=module
    )


def moved_names_getattr(module: str) -> Callable[[str], NoReturn]:
    """A ``__getattr__`` for the package face ``module``: a name it exported in an earlier
    version says where it is now (:func:`missing_name_error`)."""

    def __getattr__(name: str) -> NoReturn:
        raise missing_name_error(module, name)

    return __getattr__


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Last on ``sys.meta_path``: asked only for a module no other finder has, it turns an old
    module's import into a ``ModuleNotFoundError`` that says where the module moved."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        hint = moved_module_hint(fullname) if fullname.startswith("flink_agents.") else None
        if hint is None:
            return None
        raise ModuleNotFoundError(f"No module named {fullname!r}; {hint}", name=fullname)


def install_moved_module_finder() -> None:
    """Append :class:`MovedModuleFinder` to ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())
