"""The event log's fast path: a record's JSON line rendered straight from its fields, for sinks
that write lines (the JSON-lines file), without building the record.

A line is what :func:`~flink_agents.observability.records.record_json` writes for the record
with the same fields (tests/observability/test_lines.py pins it for every kind): the fields in
the record's declaration order, serialized by the same serializer, with the payload fields
(always a record's last ones) rendered on their own by
:meth:`~flink_agents.observability.payloads.PayloadWriter.json` and appended. Building the
record, turning payloads into JSON values and serializing those again cost about half of the
event log's CPU (bench/results/analysis.md, "The event log's CPU").

A sink that renders the lines itself, on its own thread (:class:`PartsListener`: the JSON-lines
file), is handed a record's parts instead: its fields and its payloads' JSON. Only the payloads
are serialized on the engine's thread (a payload may change after the hook: a conversation
grows); the rest of the line is rendered later, at a moment the engine can spare
(bench/results/analysis.md, "The event log at 200 ms").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from pydantic_core import to_json


@runtime_checkable
class LineListener(Protocol):
    """A listener that takes each record as its JSON line (UTF-8, no newline).

    The event log hands it lines rendered from the fields when no other listener needs the
    record objects, and the record's :func:`~flink_agents.observability.records.record_json`
    line otherwise: the same bytes either way. Like any listener it runs on the engine's thread
    and must not block.
    """

    def on_line(self, line: bytes) -> None: ...


@runtime_checkable
class PartsListener(LineListener, Protocol):
    """A :class:`LineListener` that renders the lines of the fast path itself:
    :meth:`on_line_parts` gets a record's parts, and ``line_of(fields, tail)`` is its line.

    The parts are the listener's to keep (``fields`` is a fresh dict no one changes: strings,
    numbers, the run's key and a model call's token usage; ``tail`` is bytes: the payload
    fields, already JSON), so it may render them later, on another thread. Lines of the typed
    path (a listener of records beside it) still come through :meth:`on_line`.
    """

    def on_line_parts(self, fields: dict[str, Any], tail: bytes) -> None: ...


def render_line(
    fields: Mapping[str, Any], payloads: Mapping[str, Any], payload_json: Callable[[Any], bytes]
) -> bytes:
    """The JSON line (UTF-8) of a record with ``fields`` (every non-payload field, in
    declaration order, ``kind`` included) and ``payloads`` (its payload fields, raw values in
    order), each payload rendered by ``payload_json``."""
    return line_of(fields, payload_tail(payloads, payload_json))


def payload_tail(payloads: Mapping[str, Any], payload_json: Callable[[Any], bytes]) -> bytes:
    """The end of a line: ``,"name":JSON`` for each payload field in order (empty without)."""
    return b"".join(
        [b',"%s":%s' % (name.encode(), payload_json(value)) for name, value in payloads.items()]
    )


def line_of(fields: Mapping[str, Any], tail: bytes) -> bytes:
    """The JSON line of a record with ``fields`` (as for :func:`render_line`) and its payload
    fields' :func:`payload_tail`."""
    head = to_json(fields)
    return head[:-1] + tail + b"}" if tail else head  # the payloads before the closing brace
