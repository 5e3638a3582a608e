"""The event log's fast path: a record's JSON line rendered straight from its fields, for sinks
that write lines (the JSON-lines file), without building the record.

A line is what :func:`~flink_agents.observability.records.record_json` writes for the record
with the same fields (tests/observability/test_lines.py pins it for every kind): the fields in
the record's declaration order, serialized by the same serializer, with the payload fields
(always a record's last ones) rendered on their own by
:meth:`~flink_agents.observability.payloads.PayloadWriter.json` and appended. Building the
record, turning payloads into JSON values and serializing those again cost about half of the
event log's CPU (bench/results/analysis.md, "The event log's CPU").
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


def render_line(
    fields: Mapping[str, Any], payloads: Mapping[str, Any], payload_json: Callable[[Any], bytes]
) -> bytes:
    """The JSON line (UTF-8) of a record with ``fields`` (every non-payload field, in
    declaration order, ``kind`` included) and ``payloads`` (its payload fields, raw values in
    order), each payload rendered by ``payload_json``."""
    head = to_json(fields)
    if not payloads:
        return head
    parts = [head[:-1]]  # without its closing brace
    for name, value in payloads.items():
        parts.append(b',"%s":%s' % (name.encode(), payload_json(value)))
    parts.append(b"}")
    return b"".join(parts)
