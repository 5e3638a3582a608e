"""The records a keyed host passes through: JSON text in, JSON text out.

Inputs are JSON objects (or any JSON value) carried as strings, so the same job reads a list, a
file or a Kafka topic alike. The key (Flink's, for the operator) is the canonical JSON of the key
value, so keys of any JSON type (and containing any character) stay distinct and decode back
exactly. No Flink here: the keyed logic decodes inputs and encodes outputs with these.

Python records (dicts, pydantic models, dataclasses) become JSON text at the boundary
(:func:`encode_input`), keyed by a field or by a function of the record as it is.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, TypeAdapter

from flink_agents.api.events import ActionFailure
from flink_agents.api.json_values import JsonLimitError, NotJsonError, json_generic, read_json
from flink_agents.durable.identity import canonical_json
from flink_agents.runtime.engine import RunResult

KeySpec = str | Callable[[Any], Any]
"""What keys input records: a field name, or a function of the record."""


class BadRecord(ValueError):
    """An input record that cannot be run (not JSON, or no key)."""


class OutputRecord(BaseModel):
    """One output of one run, as written to the sink."""

    agent: str
    key: Any
    seq: int
    output: Any = None
    error: dict[str, Any] | None = None
    input: Any = None
    """The run's input, on error records only (a dead letter carries it)."""
    timestamp: int | None = None
    """The run's input's event time (epoch ms), when the host kept it (docs/pipelines.md,
    "Event time")."""

    def to_json(self) -> str:
        return canonical_json(self.model_dump(exclude_none=True))


def decode_input(text: str | bytes) -> Any:
    """Parse an input record; raises :class:`BadRecord` naming the problem: not JSON, or JSON
    beyond what a run takes (nested too deep, ``NaN``; see
    :func:`~flink_agents.api.json_values.read_json`)."""
    preview = text[:120] if isinstance(text, str | bytes) else repr(text)
    try:
        return read_json(text)
    except JsonLimitError as exc:
        raise BadRecord(f"input record cannot be run ({exc}): {preview!r}") from None
    except (TypeError, ValueError) as exc:
        raise BadRecord(f"input record is not JSON ({exc}): {preview!r}") from exc


def unkeyed(text: str, why: str | None = None) -> BadRecord:
    """The problem of an input record (JSON text) with no usable key, and ``why`` if known."""
    because = "" if why is None else f" ({why})"
    return BadRecord(f"input record has no usable key{because}: {text[:120]!r}")


WHOLE_INPUT = "."
"""The key field that keys an input by its whole value: a plain string, a number (jq's
identity)."""


def keyed_input(text: str, field: str) -> tuple[Any, Any]:
    """The key (the value of ``field``; with :data:`WHOLE_INPUT`, the input itself) and the
    record of one input's JSON text.

    Raises :class:`BadRecord` where a job reports a bad record: not JSON, or no usable key (as
    for a job's key selector, a null key is none).
    """
    record = decode_input(text)
    if field == WHOLE_INPUT:
        if record is None or isinstance(record, dict | list):
            raise unkeyed(text, f"key {WHOLE_INPUT!r} takes a string or a number as the key")
        return record, record
    if not isinstance(record, dict):
        raise unkeyed(text, "not a JSON object")
    if record.get(field) is None:
        raise unkeyed(text, f"field {field!r} is null" if field in record else f"no {field!r}")
    return record[field], record


def encode_input(record: Any) -> str:
    """A Python input record (a dict, a pydantic model, a dataclass, ...) as JSON text.

    Raises :class:`BadRecord` when JSON cannot hold the record, naming where.
    """
    try:
        return canonical_json(json_generic(record))
    except NotJsonError as exc:
        raise BadRecord(f"input record ({type(record).__name__}): {exc}") from exc


def key_selector(field: KeySpec, record_type: type | None = None) -> Callable[[str], str]:
    """A Flink key selector over JSON input records: the canonical JSON of the key value.

    ``field`` names a field of the record or is a function of it; with ``record_type`` (a
    pydantic model or a dataclass the records were written from) the function is given the
    record validated back into that type, so ``lambda r: r.customer`` works on it.
    """
    adapter: TypeAdapter[Any] | None = None if record_type is None else TypeAdapter(record_type)

    def parse(text: str) -> Any:
        record = read_json(text)
        return (
            adapter.validate_python(record) if adapter is not None and callable(field) else record
        )

    return _selector(field, parse)


def object_key_selector(field: KeySpec) -> Callable[[Any], str]:
    """A Flink key selector over Python records: a function is given the record as it is
    (``lambda r: r.customer``); a field name is read from the record's JSON form."""
    return _selector(field, lambda record: record if callable(field) else json_generic(record))


def _selector(field: KeySpec, prepare: Callable[[Any], Any]) -> Callable[[Any], str]:
    # A record that cannot be keyed gets the key ``null`` and is reported by the operator (the
    # selector must not raise, or the whole job fails on one bad record).
    def select(value: Any) -> str:
        try:
            record = prepare(value)
            return canonical_json(json_generic(field(record) if callable(field) else record[field]))
        except Exception:
            return "null"

    return select


def outputs_of(
    result: RunResult, input: Any = None, timestamp: int | None = None
) -> list[OutputRecord]:
    """Sink records for a finished run: one per OutputEvent (errors included, with the run's
    ``input`` when given), each with the input's event ``timestamp`` when given."""
    run = result.run_id
    return [
        OutputRecord(
            agent=run.agent,
            key=run.key,
            seq=run.seq,
            output=event.output if event.error is None else None,
            error=_error(event.error),
            input=None if event.error is None else input,
            timestamp=timestamp,
        )
        for event in result.outputs
    ]


def bad_input_record(agent: str, key: Any, problem: str, input: Any = None) -> OutputRecord:
    """The output reporting an input that could not be run (the job keeps going); ``input`` is
    the record as it came, when it is known."""
    return OutputRecord(
        agent=agent,
        key=key,
        seq=-1,
        error={"error_type": "BadRecord", "message": problem},
        input=input,
    )


def is_error_record(text: str) -> bool:
    """Whether an output record (JSON text) reports an error: a failed run or a bad input."""
    return "error" in json.loads(text)


def _error(failure: ActionFailure | None) -> dict[str, Any] | None:
    return None if failure is None else failure.model_dump(mode="json")
