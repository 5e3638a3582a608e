"""The event log's fast path: a record's JSON line rendered straight from its fields, for sinks
that write lines (the JSON-lines file), without building the record.

A line is what :func:`~flink_agents.observability.records.record_json` writes for the record
with the same fields (tests/observability/test_lines.py pins it for every kind): the fields in
the record's declaration order, written as the records' serializer writes them, with the
payload fields (always a record's last ones) rendered on their own by
:meth:`~flink_agents.observability.payloads.PayloadWriter.json` and appended. Each kind's line
is one ``%`` template (:class:`LineShape`, made from the record's own fields) filled with its
fields' JSON: serializing a dict of the fields per record cost ~8,000 instructions, a fifth of
the log's (bench/results/analysis.md, "The event log's instructions per run").
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic_core import to_json

from flink_agents.observability.records import _Record

_HEAD = ("time", "agent", "key", "seq", "kind")


@runtime_checkable
class LineListener(Protocol):
    """A listener that takes each record as its JSON line (UTF-8, no newline).

    The event log hands it lines rendered from the fields when no other listener needs the
    record objects, and the record's :func:`~flink_agents.observability.records.record_json`
    line otherwise: the same bytes either way. Like any listener it runs on the engine's thread
    and must not block.
    """

    def on_line(self, line: bytes) -> None: ...


class LineShape:
    """One record kind's JSON line as a template: :meth:`render` fills it with the record's
    time (a float), its run's JSON (:func:`run_json`), the JSON of each field after ``kind``
    (a ``float`` field as the float itself, an ``int`` field as the int), and appends the
    payloads' JSON (``payloads``: the names of the record's last fields, in order)."""

    def __init__(self, record_type: type[_Record], payloads: tuple[str, ...] = ()) -> None:
        fields = record_type.model_fields
        names = list(fields)
        body = names[len(_HEAD) : len(names) - len(payloads)]
        if tuple(names[: len(_HEAD)]) != _HEAD or tuple(names[len(_HEAD) + len(body) :]) != (
            payloads
        ):
            raise ValueError(f"{record_type.__name__}'s fields do not fit a line shape")
        slots = "".join(f',"{name}":{_slot(fields[name].annotation)}' for name in body)
        kind = to_json(fields["kind"].default).decode()
        # Floats as %r: Python's repr is the serializer's text for every float the log writes
        # (clock readings, latencies rounded to 1 us; test_lines.py samples them).
        self.head = '{"time":%r%s,"kind":' + kind + slots + ("" if payloads else "}")
        self.payload_names = tuple(b',"%s":' % name.encode() for name in payloads)

    def render(self, values: tuple[Any, ...], payloads: tuple[bytes, ...] = ()) -> bytes:
        """The line of a record of this kind (``values``: time, run JSON, then the fields)."""
        line = (self.head % values).encode()
        if not payloads:
            return line
        parts = [line]
        for name, payload in zip(self.payload_names, payloads, strict=True):
            parts += (name, payload)
        parts.append(b"}")
        return b"".join(parts)


def _slot(annotation: Any) -> str:
    return {float: "%r", int: "%d"}.get(annotation, "%s")


def json_text(text: str | None) -> str:
    """``text``'s JSON as the records' serializer writes it (``null`` for None): quoted as it
    is when it holds nothing to escape (ids, names), else serialized."""
    if text is None:
        return "null"
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return '"' + text + '"'
    return to_json(text).decode()


def run_json(agent: str, key: Any, seq: int) -> str:
    """A run's fields in a line (after ``time``): ``,"agent":...,"key":...,"seq":...``."""
    return f',"agent":{json_text(agent)},"key":{to_json(key).decode()},"seq":{seq:d}'
