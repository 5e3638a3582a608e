"""Memory: a small key-value store an action reads and writes through its context.

* sensory memory lives for one run and is dropped when the run ends;
* short-term memory belongs to a key and survives from run to run (and in Flink state).

Keep values JSON-like (dicts, lists, strings, numbers) so they snapshot and restore faithfully.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any


class Memory:
    """A key-value store; ``snapshot`` returns an independent copy of its content."""

    def __init__(self, content: Mapping[str, Any] | None = None) -> None:
        self._content: dict[str, Any] = copy.deepcopy(dict(content or {}))

    def get(self, key: str, default: Any = None) -> Any:
        return self._content.get(key, default)

    def set(self, key: str, value: Any) -> None:
        self._content[key] = value

    def delete(self, key: str) -> None:
        self._content.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self._content

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._content))

    def __len__(self) -> int:
        return len(self._content)

    def snapshot(self) -> dict[str, Any]:
        return copy.deepcopy(self._content)
