"""Recorded runs: the action states of a store topic (or an exported file), grouped by run.

A store topic holds, per run, one :class:`ActionState` per action invocation; the state of the
first action invoked on the run's input event carries the input (:class:`RunInput`). Export
writes the latest state of every key as JSON lines, states of runs already pruned included while
compaction has not removed them; replay reads either.

An export is signed when a store secret is given: each line is then
``{"mac": "<HMAC-SHA256 hex>", "state": <the state's JSON>}``, the MAC over the state's bytes
(scoped to exports), at fixed offsets so a reader verifies it before parsing anything. A reader
given a secret accepts only lines that verify.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flink_agents.api.events import Event, OutputEvent
from flink_agents.durable.identity import RunId, event_id
from flink_agents.durable.journal_codec import read_action
from flink_agents.durable.store import (
    DEFAULT_MAX_RECORD_BYTES,
    ActionState,
    ActionStateKey,
    LogStore,
    RunInput,
    RunKey,
    canonical_json,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RecordedRun:
    """One run as recorded: its identity, its input (None if not recorded) and its states in
    the order they were first written."""

    key: RunKey
    input: RunInput | None
    states: tuple[ActionState, ...]

    @property
    def run_id(self) -> RunId:
        """The engine's id of this run (the key decoded from its canonical JSON)."""
        return RunId(self.key.agent, json.loads(self.key.key), self.key.seq)

    def outputs(self) -> list[Any] | None:
        """The output values the run emitted, in the engine's order; None if an action that
        received an event never completed (the run did not finish as recorded)."""
        outputs: list[Any] = []
        for item in self._dispatched():
            if isinstance(item, OutputEvent):
                if item.error is None:
                    outputs.append(item.output)
            elif not item.completed:
                return None
        return outputs

    def own_state_keys(self) -> set[ActionStateKey]:
        """The run's own action invocations: those its input event leads to through the
        recorded events. A sub-agent's invocations are recorded in the run too, but reached
        only through the sub-agent's call (whose record a replay hands back instead)."""
        return {item.key for item in self._dispatched() if isinstance(item, ActionState)}

    def _dispatched(self) -> Iterator[ActionState | OutputEvent]:
        """The engine's dispatch: breadth-first from the input event, listeners in plan order
        (the order their states were first written); the output events as they come. Ends at
        an action that never completed."""
        by_event: dict[str | None, list[ActionState]] = {}
        for state in self.states:
            by_event.setdefault(state.key.event_id, []).append(state)
        queue: list[str | Event] = [event_id(self.run_id, None, None, 0)]
        while queue:
            item = queue.pop(0)
            if isinstance(item, OutputEvent):
                yield item
            for state in by_event.get(item if isinstance(item, str) else item.id, []):
                yield state
                if not state.completed:
                    return
                queue.extend(read_action(state).events)


def read_store(store: LogStore) -> list[ActionState]:
    """The latest state of every key in ``store``'s topic, states of pruned runs included as
    long as compaction has not removed them (see :meth:`LogStore.history`)."""
    latest: dict[ActionStateKey, ActionState] = {}
    for state in store.history():
        latest[state.key] = state  # in the order keys were first written, as `get_run` gives
    return list(latest.values())


def write_states(states: Iterable[ActionState], path: Path, secret: bytes | None = None) -> int:
    """Write ``states`` to ``path`` as JSON lines, each signed when ``secret`` is given; returns
    how many."""
    count = 0
    with path.open("w") as handle:
        for state in states:
            body = state.model_dump_json()
            if secret is not None:
                body = f"{_SIGNED_HEAD}{_export_mac(secret, body)}{_SIGNED_MIDDLE}{body}}}"
            handle.write(body + "\n")
            count += 1
    return count


_EXPORT_SCOPE = b"flink-agents store export v1"
_SIGNED_HEAD = '{"mac": "'
_SIGNED_MIDDLE = '", "state": '
_MAC_HEX = 2 * hashlib.sha256().digest_size


def _export_mac(secret: bytes, body: str) -> str:
    return hmac.new(secret, _EXPORT_SCOPE + b"\0" + body.encode(), hashlib.sha256).hexdigest()


def _verified_body(line: str, secret: bytes | None) -> tuple[str | None, str]:
    """The state's JSON of an export line (None if it must be skipped) and why not."""
    if not line.startswith(_SIGNED_HEAD):
        if secret is not None:
            return None, "not signed (a store secret is set: only signed lines are read)"
        return line, ""
    mac_end = len(_SIGNED_HEAD) + _MAC_HEX
    mac, middle = line[len(_SIGNED_HEAD) : mac_end], line[mac_end : mac_end + len(_SIGNED_MIDDLE)]
    body = line[mac_end + len(_SIGNED_MIDDLE) :].rstrip("\n")
    if middle != _SIGNED_MIDDLE or not body.endswith("}"):
        return None, "not an export line"
    body = body[:-1]
    if secret is not None and not hmac.compare_digest(mac, _export_mac(secret, body)):
        return None, "its signature does not verify with the store secret"
    return body, ""


#: The longest line of an export read: a state is at most a store record (``max_record_bytes``,
#: raised at most to the producer's message size), with room for an export's own escaping.
MAX_EXPORT_LINE_CHARS = 16 * DEFAULT_MAX_RECORD_BYTES


def read_states(
    path: Path, max_line_chars: int = MAX_EXPORT_LINE_CHARS, secret: bytes | None = None
) -> list[ActionState]:
    """The states of an exported file (see :func:`write_states`).

    An export is data from outside the process: a line longer than ``max_line_chars`` (never
    read whole), not a state (not JSON, nested too deep, invalid) or, with ``secret``, not signed
    with it is skipped and logged at ERROR naming the file and line, as a restore skips a corrupt
    record. A signature is verified before the line is parsed.
    """
    states: list[ActionState] = []
    with path.open() as handle:
        number = 0
        while line := handle.readline(max_line_chars + 1):
            number += 1
            if len(line) > max_line_chars:
                logger.error(
                    "skipping %s:%d: longer than %d characters", path, number, max_line_chars
                )
                while line and not line.endswith("\n"):  # the rest of the line, in pieces
                    line = handle.readline(max_line_chars + 1)
                continue
            if not line.strip():
                continue
            body, why_not = _verified_body(line, secret)
            if body is None:
                logger.error("skipping %s:%d: %s", path, number, why_not)
                continue
            try:
                states.append(ActionState.model_validate_json(body))
            except ValueError as exc:  # pydantic's ValidationError: not JSON, too deep, invalid
                reason = " ".join(str(exc).split())[:200]  # one line
                logger.error("skipping %s:%d: not an action state (%s)", path, number, reason)
    return states


def key_matches(state: ActionState, key: str | None) -> bool:
    """Whether ``state`` belongs to the Flink key ``key`` (a JSON value, or else a string)."""
    if key is None:
        return True
    try:
        value = json.loads(key)
    except json.JSONDecodeError:
        value = key
    return state.key.key in (canonical_json(value), canonical_json(key))


def group_runs(states: Iterable[ActionState]) -> list[RecordedRun]:
    """``states`` grouped by run, runs ordered by agent, key and seq."""
    by_run: dict[RunKey, list[ActionState]] = {}
    for state in states:
        by_run.setdefault(state.key.run, []).append(state)
    return [
        RecordedRun(run, _input_of(by_run[run]), tuple(by_run[run]))
        for run in sorted(by_run, key=lambda r: (r.agent, r.key, r.seq))
    ]


def _input_of(states: list[ActionState]) -> RunInput | None:
    return next((s.run_input for s in states if s.run_input is not None), None)


def in_window(run: RecordedRun, since_ms: float | None, until_ms: float | None) -> bool:
    """Whether the run was admitted in ``[since_ms, until_ms)`` (a run without a recorded
    input has no time and is kept, to be reported)."""
    if run.input is None:
        return True
    at = run.input.admitted_at
    return (since_ms is None or at >= since_ms) and (until_ms is None or at < until_ms)
