"""Loading agents from YAML. Errors name the file, the line and the field.

The YAML is validated against :mod:`flink_agents.plan.yaml.schema`, every ``module:qualname`` it
names is imported, and each agent is then built with the Python API, so YAML and Python agents
compile through the very same path.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from flink_agents.agents.react import ReActAgent
from flink_agents.api.agent import Agent, ResourceDeclaration
from flink_agents.api.json_values import MAX_JSON_DEPTH, json_depth_within
from flink_agents.api.refs import REFERENCE_PATTERN, import_reference
from flink_agents.api.resources import ResourceDescriptor, ResourceType
from flink_agents.plan.compile import compile_agent
from flink_agents.plan.errors import (
    PlanValidationError,
    PlanWarning,
    clean_location,
    describe_error,
)
from flink_agents.plan.models import AgentPlan
from flink_agents.plan.yaml.locate import pointer_parts, yaml_location
from flink_agents.plan.yaml.schema import (
    AgentsFile,
    AgentSpec,
    ChatModelSpec,
    DescriptorSpec,
    InternalSubagentSpec,
    McpServerSpec,
    PromptSpec,
)

MCP_SERVER_CLASS = "flink_agents.providers.mcp.server:McpServer"
MCP_PROMPT_CLASS = "flink_agents.providers.mcp.prompt:McpPrompt"

Location = Sequence[str | int]


@dataclass(frozen=True)
class YamlIssue:
    """One problem in a YAML file: line (1-based), column, dotted field path and message."""

    line: int
    column: int
    field: str
    message: str


class YamlAgentError(ValueError):
    """A YAML agents file that cannot be loaded."""

    def __init__(self, file: str, issues: Sequence[YamlIssue]) -> None:
        self.file = file
        self.issues = list(issues)
        lines = [
            f"{file}:{i.line}:{i.column}: {i.field or '<document>'}: {i.message}" for i in issues
        ]
        super().__init__("\n".join(lines))


def field_path(location: Location) -> str:
    """``('agents', 0, 'actions', 1)`` -> ``agents[0].actions[1]``."""
    text = ""
    for part in location:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


_TOO_DEEP = f"nested deeper than {MAX_JSON_DEPTH} levels"


MAX_YAML_VALUES = 200_000
"""How many values (scalars, lists and mappings) a YAML file may hold with its aliases expanded:
far beyond any agents file or job spec, far below what would take minutes to validate and
compile (a "billion laughs" file of nested aliases holds billions)."""


def _expanded_size(value: Any, sizes: dict[int, int]) -> int:
    """How many values ``value`` holds with shared containers counted at each use; ``sizes``
    remembers each container's, so the count takes one pass over the document as parsed. The
    value is known to be at most :data:`MAX_JSON_DEPTH` deep."""
    if isinstance(value, dict):
        children: Any = [*value.keys(), *value.values()]
    elif isinstance(value, list):
        children = value
    else:
        return 1
    known = sizes.get(id(value))
    if known is None:
        known = sizes[id(value)] = 1 + sum(_expanded_size(child, sizes) for child in children)
    return known


def _reader_issue(text: str | bytes, error: yaml.YAMLError) -> YamlIssue:
    """A character PyYAML's reader refuses (NUL and other control characters, bytes that are
    not UTF-8), at its line and column."""
    if not isinstance(error, yaml.reader.ReaderError):
        return YamlIssue(1, 1, "", f"not valid YAML: {error}")
    before = text[: error.position]
    newline = b"\n" if isinstance(before, bytes) else "\n"
    line = before.count(newline) + 1  # type: ignore[arg-type]
    column = error.position - before.rfind(newline)  # type: ignore[arg-type]
    what = (
        f"byte {error.character:#04x}"
        if isinstance(text, bytes)
        else (f"character U+{error.character:04X}")
    )
    return YamlIssue(line, column, "", f"not valid YAML: {what} ({error.reason})")


class _Document:
    """Parsed YAML with its node tree, to map a field path back to a line."""

    def __init__(self, text: str | bytes, file: str) -> None:
        self.file = file
        try:
            loader = yaml.SafeLoader(text)
        except yaml.YAMLError as exc:  # bytes that are not UTF-8
            raise YamlAgentError(file, [_reader_issue(text, exc)]) from None
        try:
            self.root = loader.get_single_node()
            self.data = loader.construct_document(self.root) if self.root is not None else None
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
            raise YamlAgentError(
                file, [YamlIssue(line, column, "", f"not valid YAML: {exc.problem}")]
            ) from None
        except yaml.YAMLError as exc:  # a character YAML does not allow (NUL, ...), with where
            raise YamlAgentError(file, [_reader_issue(text, exc)]) from None
        except RecursionError:  # the parser recurses per level of nesting
            raise YamlAgentError(file, [YamlIssue(1, 1, "", _TOO_DEEP)]) from None
        except ValueError as exc:  # an integer of thousands of digits
            message = f"not readable: {str(exc).split(';')[0]}"
            raise YamlAgentError(file, [YamlIssue(1, 1, "", message)]) from None
        finally:
            loader.dispose()
        if not json_depth_within(self.data):
            raise YamlAgentError(file, [YamlIssue(1, 1, "", _TOO_DEEP)])
        if _expanded_size(self.data, {}) > MAX_YAML_VALUES:
            message = (
                f"more than {MAX_YAML_VALUES} values once its aliases are expanded (an alias "
                "repeats the whole value it names, so aliases of aliases multiply)"
            )
            raise YamlAgentError(file, [YamlIssue(1, 1, "", message)])

    def issue(self, location: Location, message: str) -> YamlIssue:
        node = self.root
        for part in location:
            child = self._child(node, part)
            if (
                child is not None
            ):  # parts missing from the file (a missing field) stay on the parent
                node = child
        mark = node.start_mark if node is not None else None
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        return YamlIssue(line, column, field_path(location), message)

    @staticmethod
    def _child(node: yaml.Node | None, part: str | int) -> yaml.Node | None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if key.value == part:
                    return value
        if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            return node.value[part]
        return None


def _validation_issues(document: _Document, error: ValidationError) -> list[YamlIssue]:
    return [
        document.issue(clean_location(document.data, item["loc"]), describe_error(item))
        for item in error.errors()
    ]


def _references(spec: AgentSpec) -> list[tuple[Location, str]]:
    """Every ``module:qualname`` an agent (and its inline sub-agents) names, with where."""
    found: list[tuple[Location, str]] = []
    for index, action in enumerate(spec.actions):
        found.append((("actions", index, "function"), action.function))
    for name, tool in spec.tools.items():
        found.append((("tools", name, "function"), tool.function))
    for block in (
        "connections",
        "chat_models",
        "resources",
        "embedding_connections",
        "embedding_models",
        "vector_stores",
        "memory_sets",
    ):
        for name, resource in getattr(spec, block).items():
            found.append(((block, name, "class"), resource.class_path))
    for name, subagent in spec.subagents.items():
        if isinstance(subagent, DescriptorSpec):
            found.append((("subagents", name, "class"), subagent.class_path))
            continue
        for field in ("input_type", "result_type"):
            reference = getattr(subagent, field)
            if reference:
                found.append((("subagents", name, field), reference))
        if isinstance(subagent.agent, AgentSpec):
            inner = _references(subagent.agent)
            found.extend((("subagents", name, "agent", *where), ref) for where, ref in inner)
    if spec.react and spec.react.output_schema:
        found.append((("react", "output_schema"), spec.react.output_schema))
    return found


def _add_mcp_server(agent: Agent, name: str, spec: McpServerSpec) -> None:
    """The server as a TOOL resource ``name`` and each of its prompts as a PROMPT resource."""
    options = spec.model_dump(
        include={"include", "timeout_seconds", "retry", "tool_settings"}, exclude_none=True
    )
    agent.add_resource(
        name,
        ResourceType.TOOL,
        MCP_SERVER_CLASS,
        namespace=spec.namespace or name,
        transport=spec.transport,
        **options,
    )
    for prompt_name, prompt in spec.prompts.items():
        agent.add_resource(
            prompt_name,
            ResourceType.PROMPT,
            MCP_PROMPT_CLASS,
            server=name,
            prompt=prompt.prompt,
            arguments=prompt.arguments,
        )


def _add_retrieval_resources(agent: Agent, spec: AgentSpec) -> None:
    """Embedding connections and models, vector stores (docs/retrieval.md) and memory sets
    (docs/memory.md)."""
    for name, connection in spec.embedding_connections.items():
        agent.add_resource(
            name,
            ResourceType.EMBEDDING_MODEL_CONNECTION,
            connection.class_path,
            **connection.arguments,
        )
    for name, model in spec.embedding_models.items():
        typed = model.model_dump(exclude={"class_path", "arguments"}, exclude_none=True)
        descriptor = ResourceDescriptor(
            class_path=model.class_path, arguments={**typed, **model.arguments}
        )
        agent.add_resource(name, ResourceType.EMBEDDING_MODEL, descriptor)
    for name, store in spec.vector_stores.items():
        agent.add_resource(name, ResourceType.VECTOR_STORE, store.class_path, **store.arguments)
    for name, memory_set in spec.memory_sets.items():
        typed = memory_set.model_dump(exclude={"class_path", "arguments"}, exclude_none=True)
        descriptor = ResourceDescriptor(
            class_path=memory_set.class_path, arguments={**typed, **memory_set.arguments}
        )
        agent.add_resource(name, ResourceType.LONG_TERM_MEMORY, descriptor)


def _chat_model_descriptor(spec: ChatModelSpec) -> ResourceDescriptor:
    typed = spec.model_dump(exclude={"class_path", "arguments"}, exclude_none=True)
    return ResourceDescriptor(class_path=spec.class_path, arguments={**typed, **spec.arguments})


def _prompt_arguments(spec: str | PromptSpec) -> dict[str, Any]:
    if isinstance(spec, str):
        return {"text": spec}
    return spec.model_dump(mode="json", exclude_defaults=True)


@dataclass(frozen=True)
class _NamedChild:
    """A sub-agent registration naming another agent of the file, wired once all are built."""

    parent: Agent
    name: str
    spec: InternalSubagentSpec
    location: Location


def _register_child(parent: Agent, name: str, spec: InternalSubagentSpec, child: Agent) -> None:
    parent.add_subagent(
        name,
        child,
        description=spec.description,
        input_schema=spec.input_schema,
        input_type=spec.input_type,
        result_type=spec.result_type,
        timeout_seconds=spec.timeout_seconds,
    )


def _build_agent(spec: AgentSpec, location: Location, named: list[_NamedChild]) -> Agent:
    """Build ``spec``; registrations of sub-agents given by name are appended to ``named``."""
    agent: Agent
    if spec.react:
        schema = import_reference(spec.react.output_schema) if spec.react.output_schema else None
        agent = ReActAgent(
            name=spec.name,
            config=spec.config,
            error_policy=spec.error_policy,
            chat_model=spec.react.chat_model,
            prompt=spec.react.prompt,
            output_schema=schema,
            max_tool_rounds=spec.react.max_tool_rounds,
            max_tool_calls_per_reply=spec.react.max_tool_calls_per_reply,
            max_tool_calls_per_run=spec.react.max_tool_calls_per_run,
            output_retries=spec.react.output_retries,
            description=spec.description,
            retrieval=spec.react.retrieval,
            compaction=spec.react.compaction,
        )
    else:
        agent = Agent(
            name=spec.name,
            config=spec.config,
            error_policy=spec.error_policy,
            description=spec.description,
        )
    agent.budgets = spec.budgets
    agent.while_paused = spec.while_paused
    for name, connection in spec.connections.items():
        agent.add_resource(
            name, ResourceType.CHAT_MODEL_CONNECTION, connection.class_path, **connection.arguments
        )
    for name, model in spec.chat_models.items():
        agent.add_resource(name, ResourceType.CHAT_MODEL, _chat_model_descriptor(model))
    for name, prompt in spec.prompts.items():
        agent.add_resource(
            name,
            ResourceType.PROMPT,
            "flink_agents.api.prompts:Prompt",
            **_prompt_arguments(prompt),
        )
    for name, tool in spec.tools.items():
        agent.add_tool(
            import_reference(tool.function),
            name=name,
            description=tool.description,
            requires_approval=tool.requires_approval,
            approval_timeout_s=tool.approval_timeout_s,
            approval_deciders=tool.approval_deciders,
        )
    for name, subagent in spec.subagents.items():
        if isinstance(subagent, DescriptorSpec):
            agent.add_resource(name, ResourceType.AGENT, subagent.class_path, **subagent.arguments)
        elif isinstance(subagent.agent, str):
            named.append(_NamedChild(agent, name, subagent, (*location, "subagents", name)))
        else:
            inner = (*location, "subagents", name, "agent")
            _register_child(agent, name, subagent, _build_agent(subagent.agent, inner, named))
    for name, resource in spec.resources.items():
        agent.add_resource(name, resource.type, resource.class_path, **resource.arguments)
    for name, server in spec.mcp_servers.items():
        _add_mcp_server(agent, name, server)
    _add_retrieval_resources(agent, spec)
    for index, action in enumerate(spec.actions):
        try:
            agent.add_action(
                import_reference(action.function),
                *(action.listen_to or ()),
                name=action.name,
                config=action.config,
            )
        except (TypeError, ValueError) as exc:  # e.g. a function that is not (event, ctx)
            raise _ActionEntryError((*location, "actions", index), str(exc)) from None
    return agent


class _ActionEntryError(Exception):
    """An action of a YAML agent that cannot be added, with the location of its entry."""

    def __init__(self, location: Location, message: str) -> None:
        super().__init__(message)
        self.location = location
        self.message = message


def _refuse_job_spec(document: _Document) -> None:
    """A job spec given where an agents file is expected: say so in one issue, at its
    ``agent:`` field, with the commands that take it, not one "unknown field" per field."""
    data = document.data
    if not isinstance(data, dict) or "agents" in data or not {"agent", "source"} <= data.keys():
        return
    agent = data["agent"]
    if isinstance(agent, str) and not re.fullmatch(REFERENCE_PATTERN, agent):
        agent = os.path.normpath(Path(document.file).parent / agent)  # as the job resolves it
    if isinstance(data.get("agent_name"), str):
        agent = f"{agent} --agent {data['agent_name']}"
    message = (
        f"this is a job spec, not an agents file: run it with `flink-agents run "
        f"{document.file}` (a local mini-cluster) or `flink-agents submit {document.file}`; "
        f"to compile, inspect or run --local its agent, give {agent}"
    )
    raise YamlAgentError(document.file, [document.issue(("agent",), message)])


def load_yaml_agents(path: str | Path, text: str | None = None) -> dict[str, Agent]:
    """All agents of a YAML file, by name."""
    file = str(path)
    document = _Document(Path(path).read_bytes() if text is None else text, file)
    _refuse_job_spec(document)
    try:
        parsed = AgentsFile.model_validate(document.data)
    except ValidationError as exc:
        raise YamlAgentError(file, _validation_issues(document, exc)) from None

    issues: list[YamlIssue] = []
    for name, connection in parsed.connections.items():
        try:
            import_reference(connection.class_path)
        except ImportError as exc:
            issues.append(document.issue(("connections", name, "class"), str(exc)))
    for index, spec in enumerate(parsed.agents):
        for name in sorted(set(spec.connections) & set(parsed.connections)):
            message = f"connection {name!r} is already declared for the whole file"
            issues.append(document.issue(("agents", index, "connections", name), message))
        for location, reference in _references(spec):
            try:
                import_reference(reference)
            except ImportError as exc:
                issues.append(document.issue(("agents", index, *location), str(exc)))
    if issues:
        raise YamlAgentError(file, issues)

    shared = [
        ResourceDeclaration.connection(name, c.class_path, **c.arguments)
        for name, c in parsed.connections.items()
    ]
    agents: dict[str, Agent] = {}
    named: list[_NamedChild] = []
    for index, spec in enumerate(parsed.agents):
        try:
            agent = _build_agent(spec, ("agents", index), named).add_shared(shared)
        except _ActionEntryError as exc:
            raise YamlAgentError(file, [document.issue(exc.location, exc.message)]) from None
        except (TypeError, ValueError) as exc:
            raise YamlAgentError(file, [document.issue(("agents", index), str(exc))]) from None
        if spec.name in agents:
            raise YamlAgentError(
                file, [document.issue(("agents", index, "name"), f"duplicate agent {spec.name!r}")]
            )
        agents[spec.name] = agent
    for child in named:
        target = child.spec.agent
        assert isinstance(target, str)
        if target not in agents:
            message = f"no agent {target!r} in this file; it defines {sorted(agents)}"
            raise YamlAgentError(file, [document.issue((*child.location, "agent"), message)])
        try:
            _register_child(child.parent, child.name, child.spec, agents[target])
        except ValueError as exc:
            raise YamlAgentError(file, [document.issue(child.location, str(exc))]) from None
    for index, spec in enumerate(parsed.agents):
        agent = agents[spec.name]
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                compile_agent(agent)
            for warned in caught:  # a plan warning at the YAML field behind its pointer
                said = warned.message
                if isinstance(said, PlanWarning):
                    parts = yaml_location(spec, agent, pointer_parts(said.path))
                    found = document.issue(("agents", index, *parts), said.text)
                    said = PlanWarning(
                        f"{file}:{found.line}:{found.column}", found.field, said.text
                    )
                warnings.warn_explicit(said, warned.category, warned.filename, warned.lineno)
        except PlanValidationError as exc:  # each issue at the YAML field behind its pointer
            located = [
                document.issue(
                    ("agents", index, *yaml_location(spec, agent, pointer_parts(issue.path))),
                    issue.message,
                )
                for issue in exc.issues
            ]
            raise YamlAgentError(file, located) from None
        except (TypeError, ValueError) as exc:
            raise YamlAgentError(file, [document.issue(("agents", index), str(exc))]) from None
    return agents


def load_yaml_agent(path: str | Path, name: str | None = None) -> Agent:
    """The agent ``name`` of a YAML file (or its only agent)."""
    agents = load_yaml_agents(path)
    if name is None:
        if len(agents) != 1:
            raise ValueError(
                f"{path} defines agents {sorted(agents)}; say which one (--agent NAME, or name=)"
            )
        return next(iter(agents.values()))
    if name not in agents:
        raise ValueError(f"{path} has no agent {name!r}; it defines {sorted(agents)}")
    return agents[name]


def compile_yaml(path: str | Path, name: str | None = None) -> AgentPlan:
    """Compile the agent ``name`` of a YAML file to its plan."""
    agent = load_yaml_agent(path, name)  # warns, each warning at its line
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PlanWarning)  # said by the load, where it is
        return compile_agent(agent)


__all__ = [
    "YamlAgentError",
    "YamlIssue",
    "compile_yaml",
    "load_yaml_agent",
    "load_yaml_agents",
]


ModelT = TypeVar("ModelT", bound=BaseModel)


def load_yaml_model(path: str | Path, model: type[ModelT], text: str | None = None) -> ModelT:
    """Validate a YAML file against ``model``; errors name file, line and field (job specs)."""
    file = str(path)
    document = _Document(Path(path).read_bytes() if text is None else text, file)
    if isinstance(document.data, dict) and "agents" in document.data:
        message = (
            "this is an agents file, not a job spec: run its agent with `flink-agents run --local "
            f"{file} --input IN.jsonl --key FIELD`, or name it in a job spec (agent: {file})"
        )
        raise YamlAgentError(file, [document.issue(("agents",), message)])
    try:
        return model.model_validate(document.data)
    except ValidationError as exc:
        raise YamlAgentError(file, _validation_issues(document, exc)) from None
