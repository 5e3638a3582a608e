"""Memory: a small store of JSON values an action reads and writes through its context.

* sensory memory lives for one run and is dropped when the run ends;
* short-term memory belongs to a key and survives from run to run (and in Flink state).

Values are kept in their JSON form, so they snapshot, checkpoint and restore faithfully:
:meth:`Memory.set` stores a pydantic model or a dataclass (also inside dicts and lists) as the
data it dumps in JSON mode, a tuple as a list, and refuses what JSON cannot hold (a set, an
arbitrary object, ``nan``) with a :class:`~flink_agents.api.json_values.NotJsonError` naming the
path. Read a model back with ``MyModel.model_validate(memory.get("key"))``.

Values are reached by paths (``"order.items.0.qty"``: :mod:`flink_agents.api.memory_paths`).
The first segment of a path names an **entry**: short-term memory entries may expire (a TTL,
measured on the run's clock so that a replay sees what the live run saw), and a change to an
entry can be reported as a :class:`MemoryChangedEvent` (docs/memory.md).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from flink_agents.api.events import Event
from flink_agents.api.json_values import json_generic, member_path
from flink_agents.api.memory_paths import (
    MemoryPath,
    MemoryPathError,
    assign,
    lookup,
    path_segments,
    remove,
    render_path,
)

__all__ = [
    "SHORT_TERM_MEMORY_TTL_KEY",
    "DanglingMemoryRefError",
    "Memory",
    "MemoryChangedEvent",
    "MemoryPath",
    "MemoryPathError",
    "MemoryRef",
    "MemoryScope",
    "memory_ttl_seconds",
]

MemoryScope = Literal["short_term", "sensory"]

SHORT_TERM_MEMORY_TTL_KEY = "short_term_memory_ttl_seconds"
"""Agent config key: seconds an entry of the agent's short-term memory lives after its last
write (every entry; an entry's own ``ttl=`` overrides it)."""


def memory_ttl_seconds(config: Mapping[str, Any]) -> float | None:
    """The agent's short-term memory TTL from its ``config``, None if unset; ValueError for a
    value that is not a positive number."""
    value = config.get(SHORT_TERM_MEMORY_TTL_KEY)
    if value is None:
        return None
    return _positive_seconds(value, SHORT_TERM_MEMORY_TTL_KEY)


class MemoryRef(BaseModel):
    """A reference to a value in a run's memory, small enough to pass in an event in place of
    the value; the receiving action resolves it (:meth:`RunnerContext.resolve`) to what the
    memory holds at that path when it resolves it, in the run's view (the run's own writes
    included). Make one with :meth:`Memory.ref`."""

    model_config = ConfigDict(frozen=True)

    scope: MemoryScope
    path: tuple[str | int, ...]

    def __str__(self) -> str:
        return f"{self.scope}:{render_path(self.path)}"


class DanglingMemoryRefError(LookupError):
    """A :class:`MemoryRef` names a path that holds nothing (deleted, expired, never set)."""


class MemoryChangedEvent(Event):
    """An action's writes changed the short-term memory entry ``key``: ``value`` is what the
    entry holds now (None when ``deleted``), ``previous`` what it held before the action.

    Sent after the action that wrote returns, one per changed entry, only when an action of
    the agent listens to it; journaled with that action like the events it sent itself.
    """

    EVENT_TYPE: ClassVar[str | None] = "MemoryChangedEvent"
    key: str
    value: Any = None
    previous: Any = None
    deleted: bool = False


class Memory:
    """Entries of JSON values, reached by paths; ``snapshot`` returns a copy of the content.

    ``scope`` is what :meth:`ref` puts in its references. ``now_ms`` is the run's clock (epoch
    milliseconds, fixed for the run): with it, ``expiry`` (entry -> epoch ms) drops the entries
    already expired, and writes give entries an expiry: ``now_ms`` plus the write's ``ttl`` or,
    without one, ``ttl_s`` (the agent's). Without a clock (sensory memory) nothing expires.
    """

    def __init__(
        self,
        content: Mapping[str, Any] | None = None,
        *,
        scope: MemoryScope = "short_term",
        expiry: Mapping[str, float] | None = None,
        now_ms: float | None = None,
        ttl_s: float | None = None,
    ) -> None:
        # Runs start from an empty memory far more often than not: nothing to copy then.
        self._content: dict[str, Any] = copy.deepcopy(dict(content)) if content else {}
        self._scope: MemoryScope = scope
        self._now_ms = now_ms
        self._ttl_ms = None if ttl_s is None else ttl_s * 1000.0
        self._expires: dict[str, float] = {}
        for key, at in (expiry or {}).items():
            if key not in self._content:
                continue
            if now_ms is not None and at <= now_ms:
                del self._content[key]  # expired before the run: invisible, and not committed
            else:
                self._expires[key] = at

    @property
    def scope(self) -> MemoryScope:
        """Which memory of the run this is."""
        return self._scope

    def get(self, path: MemoryPath, default: Any = None) -> Any:
        """The value at ``path`` (the stored value itself, not a copy), or ``default``."""
        if type(path) is str and path and "." not in path:  # an entry: most reads
            return self._content.get(path, default)
        found, value = lookup(self._content, path_segments(path))
        return value if found else default

    def set(self, path: MemoryPath, value: Any, *, ttl: float | timedelta | None = None) -> None:
        """Store ``value``'s JSON form (a copy) at ``path``, making the dicts missing on the way.

        The write renews the entry's expiry: ``ttl`` (seconds or a timedelta) after the run's
        clock, or the agent's TTL, or none (the entry lives until deleted).
        """
        expires = self._expiry_for(ttl)
        if type(path) is str and path and "." not in path:  # an entry: most writes
            self._content[path] = json_generic(value, member_path("$", path))
            self._renew(path, expires)
            return
        segments = path_segments(path)
        assign(self._content, segments, json_generic(value, _json_path(segments)))
        self._renew(str(segments[0]), expires)

    def delete(self, path: MemoryPath) -> None:
        """Remove what ``path`` names (nothing if it is not there); a nested delete is a write
        of its entry (renewing its expiry)."""
        segments = path_segments(path)
        if remove(self._content, segments):
            entry = str(segments[0])
            if len(segments) == 1:
                self._expires.pop(entry, None)
            else:
                self._renew(entry, self._expiry_for(None))

    def ref(self, path: MemoryPath) -> MemoryRef:
        """A reference to the value at ``path``, to pass in an event; it must hold one."""
        segments = path_segments(path)
        if not lookup(self._content, segments)[0]:
            raise DanglingMemoryRefError(f"{self._scope} memory holds nothing at {path!r}")
        return MemoryRef(scope=self._scope, path=segments)

    def resolve(self, ref: MemoryRef) -> Any:
        """A copy of the value ``ref`` names, as this memory holds it now."""
        if ref.scope != self._scope:
            raise ValueError(f"a reference into {ref.scope} memory, resolved in {self._scope}")
        found, value = lookup(self._content, ref.path)
        if not found:
            raise DanglingMemoryRefError(f"{ref} holds nothing (deleted, expired or never set)")
        return copy.deepcopy(value)

    def expires_at(self, entry: str) -> float | None:
        """When ``entry`` expires (epoch ms), None if it does not."""
        return self._expires.get(entry)

    def expiry(self) -> dict[str, float]:
        """Entry -> expiry (epoch ms) of the entries that expire (a copy)."""
        return dict(self._expires)

    def replace_entry(self, entry: str, value: Any, expires_at: float | None = None) -> None:
        """Set the whole ``entry`` (a name, not a path) to ``value`` expiring at ``expires_at``:
        how a journaled write is re-applied, exactly as it was made."""
        self._content[entry] = value
        self._renew(entry, expires_at)

    def drop_entry(self, entry: str) -> None:
        """Remove the whole ``entry`` (a name, not a path), if it is there."""
        self._content.pop(entry, None)
        self._expires.pop(entry, None)

    def __contains__(self, path: object) -> bool:
        if not isinstance(path, str | tuple | list):
            return False
        return lookup(self._content, path_segments(path))[0]

    def __iter__(self) -> Iterator[str]:
        """The entries' names."""
        return iter(list(self._content))

    def __len__(self) -> int:
        return len(self._content)

    def snapshot(self) -> dict[str, Any]:
        return copy.deepcopy(self._content) if self._content else {}

    def _expiry_for(self, ttl: float | timedelta | None) -> float | None:
        if ttl is None:
            return (
                None
                if self._ttl_ms is None or self._now_ms is None
                else self._now_ms + self._ttl_ms
            )
        seconds = _positive_seconds(
            ttl.total_seconds() if isinstance(ttl, timedelta) else ttl, "ttl"
        )
        if self._now_ms is None:
            raise ValueError(f"{self._scope} memory has no clock: its entries cannot expire")
        return self._now_ms + seconds * 1000.0

    def _renew(self, entry: str, expires: float | None) -> None:
        if expires is None:
            self._expires.pop(entry, None)
        else:
            self._expires[entry] = expires


def _json_path(segments: tuple[str | int, ...]) -> str:
    """Where a value is written, in the notation of :class:`NotJsonError`'s paths."""
    path = "$"
    for segment in segments:
        path = f"{path}[{segment}]" if isinstance(segment, int) else member_path(path, segment)
    return path


def _positive_seconds(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{what} must be a positive number of seconds, got {value!r}")
    return float(value)
