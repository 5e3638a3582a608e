"""Memory: a small key-value store an action reads and writes through its context.

* sensory memory lives for one run and is dropped when the run ends;
* short-term memory belongs to a key and survives from run to run (and in Flink state).

Values are kept in their JSON form, so they snapshot, checkpoint and restore faithfully:
:meth:`Memory.set` stores a pydantic model or a dataclass (also inside dicts and lists) as the
data it dumps in JSON mode, a tuple as a list, and refuses what JSON cannot hold (a set, an
arbitrary object, ``nan``) with a :class:`~flink_agents.api.json_values.NotJsonError` naming the
key. Read a model back with ``MyModel.model_validate(memory.get("key"))``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

from flink_agents.api.json_values import json_generic, member_path


class Memory:
    """A key-value store; ``snapshot`` returns an independent copy of its content."""

    def __init__(self, content: Mapping[str, Any] | None = None) -> None:
        # Runs start from an empty memory far more often than not: nothing to copy then.
        self._content: dict[str, Any] = copy.deepcopy(dict(content)) if content else {}

    def get(self, key: str, default: Any = None) -> Any:
        return self._content.get(key, default)

    def set(self, key: str, value: Any) -> None:
        """Store ``value``'s JSON form (a copy) under ``key``."""
        self._content[key] = json_generic(value, member_path("$", key))

    def delete(self, key: str) -> None:
        self._content.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self._content

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._content))

    def __len__(self) -> int:
        return len(self._content)

    def snapshot(self) -> dict[str, Any]:
        return copy.deepcopy(self._content) if self._content else {}
