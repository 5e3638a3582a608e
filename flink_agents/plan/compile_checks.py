"""What the compiler checks with the agent's code at hand (a plan loaded from JSON has only the
names of its functions, so these run when an agent is compiled, from Python or YAML).

* **Tool signatures.** A function tool must be describable to a model: a method (its ``self``
  would be offered as a required argument) and ``*args``/``**kwargs`` are errors; parameters
  without a type are a warning with the fix.
* **Chat requests written out in an action.** ``ChatRequestEvent(model="...", prompt_args={...})``
  with a literal model name and literal ``prompt_args`` keys is read from the action's source:
  a model name that is no chat model resource, and placeholders of the model's prompt that the
  ``prompt_args`` do not give, are errors (they would fail every run, blamed on the built-in
  ``chat_action``). A name or arguments computed at run time are not checked.
* **Setup prompts.** A chat model's prompt whose roles look wrong (no system message, so its
  user messages are sent as the system prompt; a system message after another role's; a
  ``tool`` message) is a warning.

Errors are :class:`~flink_agents.plan.errors.PlanIssue` s with the JSON pointer of the offending
resource or action; warnings are :class:`~flink_agents.plan.errors.PlanWarning` s.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from flink_agents.api.agent import Agent
from flink_agents.api.refs import class_path, import_reference
from flink_agents.api.resources import ResourceType
from flink_agents.api.tools import (
    FunctionTool,
    ToolSignatureError,
    function_tool_name,
    tool_signature_warnings,
)
from flink_agents.plan.checks import unresolved_reference
from flink_agents.plan.errors import PlanIssue, PlanWarning, json_pointer
from flink_agents.plan.models import AgentPlan, ResourcePlan

_FUNCTION_TOOL = class_path(FunctionTool)


def compile_issues(agent: Agent, plan: AgentPlan, source: str) -> list[PlanIssue]:
    """Every problem of ``agent`` (compiled to ``plan``) and its sub-agents that needs their
    code; warnings are issued as :class:`PlanWarning` s naming ``source``."""
    return _issues(agent, plan, (), [], source)


def _issues(
    agent: Agent,
    plan: AgentPlan,
    enclosing: Sequence[AgentPlan],
    prefix: list[str | int],
    source: str,
) -> list[PlanIssue]:
    visible = [plan, *enclosing]
    issues = _tool_issues(plan, prefix, source)
    functions = {declared.name: declared.function for declared in agent.actions}
    for index, action in enumerate(plan.actions):
        function = functions.get(action.name)
        if function is not None and not function.__module__.startswith("flink_agents."):
            location = json_pointer([*prefix, "actions", index, "function"])
            issues += _request_issues(action.name, function, visible, location)
    _warn_prompt_roles(plan, prefix, source)
    for scope, child_plan in plan.scopes.items():
        child = agent.children[scope]
        issues += _issues(child, child_plan, visible, [*prefix, "scopes", scope], source)
    return issues


def _tool_issues(plan: AgentPlan, prefix: list[str | int], source: str) -> list[PlanIssue]:
    issues: list[PlanIssue] = []
    for name, resource in plan.resources.items():
        reference = resource.arguments.get("function")
        if resource.class_path != _FUNCTION_TOOL or not isinstance(reference, str):
            continue
        try:
            function = import_reference(reference)
        except ImportError:
            continue  # resolving the plan reports it
        location = json_pointer([*prefix, "resources", name, "arguments", "function"])
        offered = function_tool_name(reference, resource.arguments.get("name"))
        try:
            found = tool_signature_warnings(function, offered)
        except ToolSignatureError as exc:
            issues.append(PlanIssue(location, str(exc)))
            continue
        for warning in found:
            warnings.warn(PlanWarning(source, location, warning), stacklevel=2)
    return issues


def _request_issues(
    action: str,
    function: Callable[..., Any],
    visible: Sequence[AgentPlan],
    location: str,
) -> list[PlanIssue]:
    """Problems of the chat requests ``function`` writes out with a literal model name."""
    issues: list[PlanIssue] = []
    for line, model, given in _chat_requests(function):
        where = f"action {action!r} ({line}) sends a ChatRequestEvent to chat model {model!r}"
        problem = unresolved_reference(model, ResourceType.CHAT_MODEL, visible)
        if problem is not None:
            issues.append(PlanIssue(location, f"{where}: {problem}"))
            continue
        if given is None:
            continue  # prompt_args computed at run time
        prompt_name, needed = _prompt_placeholders(model, visible)
        missing = [name for name in needed if name not in given]
        if missing:
            issues.append(
                PlanIssue(
                    location,
                    f"{where}, whose prompt {prompt_name!r} needs {missing}, but its "
                    f"prompt_args give {sorted(given)}",
                )
            )
    return issues


def _chat_requests(function: Callable[..., Any]) -> list[tuple[str, str, set[str] | None]]:
    """``(file:line, model, prompt_args keys)`` of each ``ChatRequestEvent(model="...")`` in
    ``function``'s source with a literal model name; the keys are None when they are not all
    literal (a ``**`` spread, a variable)."""
    try:
        lines, first = inspect.getsourcelines(function)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return []
    filename = inspect.getsourcefile(function) or "<unknown>"
    found: list[tuple[str, str, set[str] | None]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or _called_name(node.func) != "ChatRequestEvent":
            continue
        keywords = {keyword.arg: keyword.value for keyword in node.keywords}
        model = keywords.get("model")
        if not (isinstance(model, ast.Constant) and isinstance(model.value, str)):
            continue
        given = _literal_keys(keywords["prompt_args"]) if "prompt_args" in keywords else set()
        found.append((f"{filename}:{first + node.lineno - 1}", model.value, given))
    return found


def _called_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _literal_keys(value: ast.expr) -> set[str] | None:
    """The keys of a literal mapping (``{"a": ...}``, ``dict(a=...)``), None if not literal."""
    if isinstance(value, ast.Dict):
        keys = [key.value if isinstance(key, ast.Constant) else None for key in value.keys]
        return {key for key in keys if isinstance(key, str)} if all(keys) else None
    if isinstance(value, ast.Call) and _called_name(value.func) == "dict" and not value.args:
        names = [keyword.arg for keyword in value.keywords]
        return {name for name in names if name is not None} if all(names) else None
    return None


def _prompt_placeholders(model: str, visible: Sequence[AgentPlan]) -> tuple[str, list[str]]:
    """The prompt of chat model ``model`` and its placeholders (none when it has no prompt or
    a prompt of its own class)."""
    setup = _visible(model, visible)
    prompt_name = setup.arguments.get("prompt") if setup is not None else None
    prompt = _visible(prompt_name, visible) if isinstance(prompt_name, str) else None
    if prompt is None or prompt.placeholders is None:
        return "", []
    return str(prompt_name), prompt.placeholders


def _visible(name: str, visible: Sequence[AgentPlan]) -> ResourcePlan | None:
    return next((plan.resources[name] for plan in visible if name in plan.resources), None)


def _warn_prompt_roles(plan: AgentPlan, prefix: list[str | int], source: str) -> None:
    prompts = {
        resource.arguments.get("prompt")
        for resource in plan.resources.values()
        if resource.type is ResourceType.CHAT_MODEL
    }
    for name in sorted(p for p in prompts if isinstance(p, str)):
        prompt = plan.resources.get(name)
        messages = prompt.arguments.get("messages") if prompt is not None else None
        if not isinstance(messages, list):
            continue
        roles = [str(m.get("role")) for m in messages if isinstance(m, dict)]
        location = json_pointer([*prefix, "resources", name, "arguments", "messages"])
        if "system" not in roles:
            warnings.warn(
                PlanWarning(
                    source,
                    location,
                    f"the setup prompt {name!r} has no system message, so its "
                    f"{sorted(set(roles))} messages are all sent as the system prompt; to send "
                    "a user message as the user's turn, start the prompt with a system message",
                ),
                stacklevel=2,
            )
            continue
        for position, role in enumerate(roles):
            why = None
            if role == "system" and any(r != "system" for r in roles[:position]):
                why = (
                    "a system message after another role's is sent in the middle of the "
                    "conversation (and refused by strict chat templates); put system messages "
                    "first"
                )
            elif role == "tool":
                why = "a tool message answers a model's tool call, which a prompt has none of"
            if why is not None:
                warnings.warn(
                    PlanWarning(
                        source,
                        f"{location}/{position}",
                        f"the setup prompt {name!r} has a {role} message at {position}: {why}",
                    ),
                    stacklevel=2,
                )
