"""Paths into a memory's nested values: ``"order.items.0.qty"`` or ``("order", "items", 0)``.

A dotted path is split at its dots; a sequence path names its segments as they are (so a key
that holds a dot is still reachable). A segment indexes a list when it is an integer or a
string of digits, and names a member of a dict otherwise (an integer naming the member of its
digits: JSON objects have string keys). The first segment names the memory's **entry**, the
unit that is journaled, expires and is reported changed (docs/memory.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

MemoryPath = str | Sequence[str | int]
"""Where a value lives in a memory: a dotted string or its segments."""


class MemoryPathError(LookupError):
    """A path that cannot be followed: empty, a segment that is empty or not a string or an
    integer, a step through a value that is not a container (a string, a number, a boolean,
    null), or a list index that is not a number or past the end."""


def path_segments(path: MemoryPath) -> tuple[str | int, ...]:
    """The segments of ``path``; :class:`MemoryPathError` for an empty path or segment."""
    segments: tuple[str | int, ...] = (
        tuple(path.split(".")) if isinstance(path, str) else tuple(path)
    )
    if not segments:
        raise MemoryPathError("an empty memory path")
    for segment in segments:
        if isinstance(segment, bool) or not isinstance(segment, str | int) or segment == "":
            raise MemoryPathError(f"memory path {path!r}: {segment!r} is not a segment")
    if not isinstance(segments[0], str):
        raise MemoryPathError(f"memory path {path!r}: an entry is named by a string")
    return segments


def render_path(segments: Sequence[str | int]) -> str:
    """``segments`` as the dotted path an error message names."""
    return ".".join(str(segment) for segment in segments)


def lookup(root: dict[str, Any], segments: Sequence[str | int]) -> tuple[bool, Any]:
    """``(True, value)`` at ``segments`` under ``root``, ``(False, None)`` if a step is missing
    (a member not there, an index past the end)."""
    here: Any = root
    for depth in range(len(segments)):
        found = _step(here, segments, depth)
        if found is None:
            return False, None
        here = found[0]
    return True, here


def assign(root: dict[str, Any], segments: Sequence[str | int], value: Any) -> None:
    """Put ``value`` at ``segments`` under ``root``, making the missing dicts on the way; a list
    index may be its length (to append) but not more."""
    here: Any = root
    for depth in range(len(segments) - 1):
        found = _step(here, segments, depth)
        if found is None:
            if isinstance(here, list):
                raise _past_end(segments, depth, here)
            made: dict[str, Any] = {}
            here[str(segments[depth])] = made
            here = made
        else:
            here = found[0]
    last = len(segments) - 1
    _container(here, segments, last)
    if isinstance(here, list):
        index = _index(here, segments, last)
        if index > len(here):
            raise _past_end(segments, last, here)
        if index == len(here):
            here.append(value)
        else:
            here[index] = value
    else:
        here[str(segments[last])] = value


def remove(root: dict[str, Any], segments: Sequence[str | int]) -> bool:
    """Remove what ``segments`` name under ``root``; whether there was something there."""
    found, parent = lookup(root, segments[:-1])
    if not found:
        return False
    last = len(segments) - 1
    _container(parent, segments, last)
    if isinstance(parent, list):
        index = _index(parent, segments, last)
        if index >= len(parent):
            return False
        del parent[index]
        return True
    return parent.pop(str(segments[last]), _MISSING) is not _MISSING


_MISSING = object()


def _step(here: Any, segments: Sequence[str | int], depth: int) -> tuple[Any] | None:
    """The value ``segments[depth]`` names inside ``here`` (in a 1-tuple), None if missing."""
    _container(here, segments, depth)
    if isinstance(here, list):
        index = _index(here, segments, depth)
        return (here[index],) if index < len(here) else None
    key = str(segments[depth])
    return (here[key],) if key in here else None


def _container(here: Any, segments: Sequence[str | int], depth: int) -> None:
    if not isinstance(here, dict | list):
        raise MemoryPathError(
            f"memory path {render_path(segments)!r}: {render_path(segments[:depth])!r} holds "
            f"{_kind(here)}, not a dict or a list, so it has no {str(segments[depth])!r}"
        )


def _index(here: list[Any], segments: Sequence[str | int], depth: int) -> int:
    segment = segments[depth]
    if isinstance(segment, int) and segment >= 0:
        return segment
    if isinstance(segment, str) and segment.isdigit() and segment.isascii():
        return int(segment)
    raise MemoryPathError(
        f"memory path {render_path(segments)!r}: {render_path(segments[:depth])!r} holds a "
        f"list, indexed by numbers from 0, not by {segment!r}"
    )


def _past_end(segments: Sequence[str | int], depth: int, here: list[Any]) -> MemoryPathError:
    return MemoryPathError(
        f"memory path {render_path(segments)!r}: {render_path(segments[:depth])!r} holds a "
        f"list of {len(here)} (a write may append at {len(here)}, not past it)"
    )


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    name = type(value).__name__
    return f"an {name}" if name[0] in "aeiou" else f"a {name}"
