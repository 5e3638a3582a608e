"""Resources: models, tools, prompts and sub-agents that actions look up by name.

A resource is declared in the plan by a :class:`ResourceDescriptor` (a class path and arguments)
and instantiated on the worker. Secrets never appear in a plan: an argument may reference an
environment variable as ``{"env": "NAME"}`` or ``"${env:NAME}"``; references are resolved when
the resource is opened.
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from flink_agents.api.refs import class_path
from flink_agents.api.secret_values import looks_like_credential, remember_secret


class ResourceType(str, enum.Enum):
    """Kinds of resources an action can look up."""

    CHAT_MODEL_CONNECTION = "chat_model_connection"
    CHAT_MODEL = "chat_model"
    TOOL = "tool"
    PROMPT = "prompt"
    AGENT = "agent"
    """A sub-agent (see :mod:`flink_agents.api.subagents.delegation`)."""
    EMBEDDING_MODEL_CONNECTION = "embedding_model_connection"
    EMBEDDING_MODEL = "embedding_model"
    VECTOR_STORE = "vector_store"
    """Embeddings and vector search (see :mod:`flink_agents.api.embeddings`, ``vector_stores``)."""
    LONG_TERM_MEMORY = "long_term_memory"
    """A memory set of each key (see :mod:`flink_agents.api.long_term_memory`)."""


_ENV_STRING = re.compile(r"^\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}$")
# Argument and header names whose value is a credential. "auth" only as a word of the name
# (``auth``, ``x-auth-token``, ``authorization``), so ``author`` stays an ordinary argument.
_SECRET_NAME = re.compile(
    r"(api[_-]?key|secret|token|passw(or)?d|bearer|credential|private[_-]?key|cookie"
    r"|(^|[_-])auth($|[_-]|orization))",
    re.IGNORECASE,
)


def env_reference(value: Any) -> str | None:
    """The variable name if ``value`` is an environment reference, else None."""
    if isinstance(value, Mapping) and set(value) == {"env"} and isinstance(value["env"], str):
        return value["env"]
    if isinstance(value, str):
        match = _ENV_STRING.match(value)
        if match:
            return match.group(1)
    return None


def _literal_secrets(arguments: Any, path: str) -> list[str]:
    """Paths of arguments whose name says 'secret', or whose value has a credential's shape
    (``Bearer ...``, ``sk-...``: :func:`looks_like_credential`), but whose value is a literal
    string. Every level is checked, so a header of any resource is too."""
    found: list[str] = []
    if isinstance(arguments, Mapping):
        for name, value in arguments.items():
            sub = f"{path}/{name}"
            if (
                isinstance(value, str)
                and (_SECRET_NAME.search(str(name)) or looks_like_credential(value))
                and not env_reference(value)
            ):
                found.append(sub)
            elif env_reference(value) is None:
                found.extend(_literal_secrets(value, sub))
    elif isinstance(arguments, list):
        for index, value in enumerate(arguments):
            if isinstance(value, str) and looks_like_credential(value):
                found.append(f"{path}/{index}")
            else:
                found.extend(_literal_secrets(value, f"{path}/{index}"))
    return found


class UnresolvedSecretError(LookupError):
    """An environment reference names a variable that is not set."""


def resolve_env_references(value: Any, environ: Mapping[str, str] | None = None) -> Any:
    """Replace every environment reference inside ``value`` by the variable's value."""
    environ = os.environ if environ is None else environ
    name = env_reference(value)
    if name is not None:
        if name not in environ:
            raise UnresolvedSecretError(f"environment variable {name!r} is not set")
        remember_secret(environ[name])  # scrubbed from whatever this process writes
        return environ[name]
    if isinstance(value, Mapping):
        return {key: resolve_env_references(item, environ) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve_env_references(item, environ) for item in value]
    return value


class LiteralSecretError(ValueError):
    """A secret-looking argument holds a literal value; the message names the argument only."""


def refuse_literal_secrets(arguments: dict[str, Any]) -> dict[str, Any]:
    """``arguments`` as they are, or :class:`LiteralSecretError` naming each secret-looking
    argument that holds a literal value instead of an environment reference."""
    literal = _literal_secrets(arguments, "")
    if literal:
        raise LiteralSecretError(
            f"secret-looking argument(s) {', '.join(literal)} hold a literal value; "
            'use an environment reference such as {"env": "NAME"} or "${env:NAME}"'
        )
    return arguments


class ResourceDescriptor(BaseModel):
    """How to build a resource: ``class`` as ``module:qualname`` plus constructor ``arguments``."""

    # Arguments may hold a literal secret being refused: never echo them in an error.
    model_config = ConfigDict(populate_by_name=True, extra="forbid", hide_input_in_errors=True)

    class_path: str = Field(alias="class", pattern=r"^[\w.]+:[\w.]+$")
    arguments: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def of(cls, resource_class: type[Resource] | str, /, **arguments: Any) -> ResourceDescriptor:
        """Describe ``resource_class`` built with ``arguments``."""
        path = resource_class if isinstance(resource_class, str) else class_path(resource_class)
        return cls(class_path=path, arguments=arguments)

    @field_validator("arguments")
    @classmethod
    def _no_literal_secrets(cls, arguments: dict[str, Any]) -> dict[str, Any]:
        return refuse_literal_secrets(arguments)


ResourceLookup = Callable[[str, ResourceType], "Resource"]


class Resource(BaseModel):
    """Base of resources. Fields are the descriptor's arguments, validated on open."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    resource_type: ClassVar[ResourceType]
    _lookup: ResourceLookup | None = PrivateAttr(default=None)

    def bind(self, lookup: ResourceLookup) -> None:
        """Give the resource access to its siblings (a chat model finds its connection)."""
        self._lookup = lookup

    def open(self) -> None:
        """Check the configuration and prepare for use; called once when the resource is opened.

        Resources should be opened when the job starts, so a bad configuration (a missing
        credential, say) fails the start rather than the first record. The default does nothing.
        """

    async def aclose(self) -> None:
        """Release what the resource holds (sessions, server processes); called on the event
        loop of its calls when the engine stops. The default does nothing."""

    def get_resource(self, name: str, resource_type: ResourceType) -> Resource:
        lookup: ResourceLookup | None = self._private("_lookup")
        if lookup is None:
            raise RuntimeError(f"{type(self).__name__} is not bound to a resource registry")
        return lookup(name, resource_type)

    def _private(self, name: str) -> Any:
        """The private attribute ``name``, for paths every run takes.

        ``self._name`` finds it only after the ordinary lookup failed and raised, in pydantic's
        ``__getattr__`` (a few thousand instructions); the values' own dict is one lookup.
        """
        values = self.__pydantic_private__
        assert values is not None  # every Resource declares at least `_lookup`
        return values[name]
