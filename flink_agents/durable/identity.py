"""Deterministic identities: runs, events and durable calls.

Nothing here is random or derived from function names or pickles. Ids are digests of canonical
JSON (so user keys containing any separator cannot collide), computed from:

* a run: ``(agent, key, seq)``, ``seq`` being the key's input counter;
* an event: its run, the event it was sent in response to, the sending action and the ordinal of
  the send within that action invocation;
* a durable call: its run, the event being handled, the action and the call id (given by the
  caller, or ``#<ordinal>`` of the call within the action invocation).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any

# The one serializer for bytes that matter (also the store's record keys): sorted keys, compact,
# UTF-8; TypeError for values that are not JSON, ValueError for NaN and infinities.
from flink_agents.durable.store import canonical_json

__all__ = ["ActionInvocation", "CallIdentity", "RunId", "canonical_json", "digest", "event_id"]


def digest(value: Any) -> str:
    """A 128-bit hex digest of ``value``'s canonical JSON."""
    return _digest_text(canonical_json(value))


def _digest_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class RunId:
    """One run: the ``seq``-th input of ``key`` for ``agent``. Keys must be JSON values."""

    agent: str
    key: Any
    seq: int

    def as_list(self) -> list[Any]:
        return [self.agent, self.key, self.seq]

    def __str__(self) -> str:
        return f"{self.agent}/{canonical_json(self.key)}/{self.seq}"

    @property
    def input_event_id(self) -> str:
        """Id of the run's input event: `event_id` with no upstream, no action, ordinal 0.
        Computed once per run id (the engine names the event, the store recognises it)."""
        # In the instance's __dict__, which no field method reads (`functools.cached_property`
        # would do the same, but takes a lock in Python 3.11).
        cached: str | None = self.__dict__.get("_input_event_id")
        if cached is None:
            cached = self.__dict__["_input_event_id"] = _digest_text(
                f'["event",{self.canonical},null,null,0]'
            )
        return cached

    @property
    def canonical(self) -> str:
        """The canonical JSON of `as_list`, rendered once per run id (in every event id)."""
        cached: str | None = self.__dict__.get("_canonical")
        if cached is None:
            cached = self.__dict__["_canonical"] = canonical_json(self.as_list())
        return cached


def event_id(run: RunId, upstream_id: str | None, action: str | None, ordinal: int | str) -> str:
    """Id of the ``ordinal``-th event ``action`` sent while handling ``upstream_id``.

    The input event of a run has no upstream and no action (see `RunId.input_event_id`).
    """
    if upstream_id is None and action is None and type(ordinal) is int and ordinal == 0:
        return run.input_event_id
    tail = _int_or_string_json(ordinal)
    if tail is not None and _string_or_none(upstream_id) and _string_or_none(action):
        # The canonical JSON of the list below, written around the run's cached text: the
        # same bytes (a string as the encoder escapes it, an int as its repr) for a fraction
        # of the encoder's work.
        upstream = "null" if upstream_id is None else encode_basestring(upstream_id)
        sender = "null" if action is None else encode_basestring(action)
        return _digest_text(f'["event",{run.canonical},{upstream},{sender},{tail}]')
    return digest(["event", run.as_list(), upstream_id, action, ordinal])


def _int_or_string_json(value: Any) -> str | None:
    if type(value) is int:
        return str(value)
    if type(value) is str:
        return encode_basestring(value)
    return None  # a bool or a subclass: the encoder's own way


def _string_or_none(value: Any) -> bool:
    return value is None or type(value) is str


AUTO_CALL_PREFIX = "#"
"""Call ids starting with this are generated from ordinals; callers may not use it."""


@dataclass(frozen=True)
class ActionInvocation:
    """One invocation of ``action`` on the event ``event_id`` within ``run``."""

    run: RunId
    event_id: str
    action: str


@dataclass(frozen=True)
class CallIdentity:
    """Identity of one durable call, stable across replays of the same run."""

    run: RunId
    event_id: str
    action: str
    call_id: str

    @property
    def invocation(self) -> ActionInvocation:
        """The action invocation that makes this call."""
        return ActionInvocation(self.run, self.event_id, self.action)

    def as_list(self) -> list[Any]:
        return [self.run.as_list(), self.event_id, self.action, self.call_id]

    def digest(self) -> str:
        return digest(["call", *self.as_list()])
