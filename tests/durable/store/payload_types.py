"""Payload types used by the store tests (importable by module path, also in subprocesses)."""

from __future__ import annotations

import dataclasses
import datetime

from pydantic import BaseModel

from flink_agents.api.events import Event


class Reply(BaseModel):
    text: str
    tokens: int


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Opaque:
    """No JSON form: only storable pickled."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and other.value == self.value

    __hash__ = None  # type: ignore[assignment]


#: Set when an `Exploding` payload is unpickled; tests assert it never is from a bad record.
UNPICKLED: list[str] = []


def _explode(tag: str) -> Opaque:
    UNPICKLED.append(tag)
    return Opaque(-1)


class Exploding:
    """Unpickling it runs code (records a side effect)."""

    def __init__(self, tag: str) -> None:
        self.tag = tag

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (_explode, (self.tag,))


class Reading(Event):
    """An event with fields whose JSON form differs from their value (a datetime, floats that
    are not finite, a tuple)."""

    at: datetime.datetime
    values: list[float]
    pair: tuple[int, int]
