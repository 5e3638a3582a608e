"""The event log's fast path: a record's JSON line rendered straight from its fields, for sinks
that write lines (the JSON-lines file), without building the record.

A line is what :func:`~flink_agents.observability.log_records.record_json` writes for the record
with the same fields (tests/observability/test_lines.py pins it for every kind): the fields in
the record's declaration order, serialized by the same serializer, with the payload fields
(always a record's last ones) rendered on their own by
:meth:`~flink_agents.observability.payloads.PayloadWriter.json` and appended (a call's two,
arguments and result, rendered together by
:meth:`~flink_agents.observability.payloads.PayloadWriter.members`). Building the
record, turning payloads into JSON values and serializing those again cost about half of the
event log's CPU (bench/results/analysis.md, "The event log's CPU").

The fields are serialized by orjson where it writes pydantic's bytes, at less than half of
pydantic's CPU (bench/results/analysis.md, "The event log's lines rendered with orjson"):
floats (shortest round trip, the same exponent form), strings (UTF-8, the same escapes),
``None``, booleans, 64-bit integers, lists and string-keyed dicts. Where the two could differ,
pydantic writes the line, as before: a value orjson would write in its own way (a datetime,
a dataclass, a model, a subclass of a builtin) is handed to pydantic by orjson's ``default``;
a value orjson refuses (an integer beyond 64 bits, a lone surrogate) sends the whole line to
pydantic (`json_bytes`: a lone surrogate, which pydantic refuses too, is written as its escape);
and a run key other than a string or an integer (a list or dict could hold a non-finite float,
which orjson writes as ``null`` and pydantic as ``Infinity``/``NaN``) is never handed to orjson.
The other floats of a record are clock readings and latencies: finite.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import orjson

from flink_agents.api.json_values import json_bytes

# Types orjson writes its own way (datetimes, dataclasses, subclasses of str/int/dict/list) go
# to _pydantic_json instead.
_PASSTHROUGH = (
    orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


@runtime_checkable
class LineListener(Protocol):
    """A listener that takes each record as its JSON line (UTF-8, no newline).

    The event log hands it lines rendered from the fields when no other listener needs the
    record objects, and the record's :func:`~flink_agents.observability.log_records.record_json`
    line otherwise: the same bytes either way. Like any listener it runs on the engine's thread
    and must not block.
    """

    def on_line(self, line: bytes) -> None: ...


def fields_json(fields: Mapping[str, Any]) -> bytes:
    """``json_bytes(fields)``'s bytes for a record's ``fields`` (a dict with a ``key``), written by
    orjson unless a value could come out otherwise (see the module's docstring)."""
    key = fields["key"]
    if type(key) is str or type(key) is int:
        try:
            return orjson.dumps(fields, default=_pydantic_json, option=_PASSTHROUGH)
        except orjson.JSONEncodeError:  # a value orjson refuses: pydantic decides, as before
            pass
    return json_bytes(fields)


def _pydantic_json(value: Any) -> orjson.Fragment:
    """A value orjson does not write itself (a model, a datetime...), written by pydantic."""
    return orjson.Fragment(json_bytes(value))


def payload_key(name: str) -> bytes:
    """What precedes a payload field's JSON in a line: ``,"name":`` (``name`` a plain ASCII
    field name: the hooks make these once)."""
    return b',"%s":' % name.encode()


def payload_pairs(payloads: Mapping[str, Any]) -> list[tuple[bytes, Any]]:
    """``payloads`` by name as :func:`render_line` takes them (a record's payload fields)."""
    return [(payload_key(name), value) for name, value in payloads.items()]


def render_line(
    fields: Mapping[str, Any],
    payload_json: Callable[[Any], bytes],
    *payloads: tuple[bytes, Any],
) -> bytes:
    """The JSON line (UTF-8) of a record with ``fields`` (every non-payload field, in
    declaration order, ``kind`` included) and ``payloads`` (its payload fields in order, each
    its :func:`payload_key` and raw value), each payload rendered by ``payload_json``: one
    join of the parts (a list, a loop and a `%` per payload cost ~3,500 instructions a
    line more)."""
    parts = [fields_json(fields)[:-1]]  # without its closing brace
    for key, value in payloads:
        parts += (key, payload_json(value))
    parts.append(b"}")
    return b"".join(parts)


def members_line(fields: Mapping[str, Any], members: bytes) -> bytes:
    """The JSON line (UTF-8) of a record with ``fields`` (as :func:`render_line` takes them)
    and payload fields ``members``, their JSON members rendered together
    (:meth:`~flink_agents.observability.payloads.PayloadWriter.members`)."""
    return b"%s,%s}" % (fields_json(fields)[:-1], members)
