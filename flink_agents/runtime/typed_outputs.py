"""Typed outputs and dead letters: a run's output envelope split into the answer, of the agent's
declared output type, or a dead letter saying why there is none.

An agent's outputs leave the operator as :class:`~flink_agents.runtime.json_records.OutputRecord`
envelopes (agent, key, seq, and ``output`` or ``error``). A pipeline wants the answers alone,
typed, and the failures apart: :func:`split_envelope` gives either the output validated into the
declared type (:class:`PythonOutputType` for a pydantic model or dataclass in Python,
:class:`JsonSchemaOutputType` for a job spec's JSON Schema) or a :class:`DeadLetter` (a failed
run, an input that could not be run, or an output that does not fit the type). No Flink here.
"""

from __future__ import annotations

from typing import Any, Protocol

import jsonschema  # type: ignore[import-untyped]
from pydantic import BaseModel, TypeAdapter, ValidationError

from flink_agents.api.json_values import read_json
from flink_agents.durable.identity import canonical_json

OUTPUT_TYPE_ERROR = "OutputTypeError"
"""The ``error_type`` of a dead letter whose run succeeded with an output that does not fit the
declared output type."""


class DeadLetter(BaseModel):
    """Why an input has no answer: the agent, the key, the run's ``seq`` (-1 for an input that
    could not be run), the input (of a failed run or an unreadable record), the output (one that
    does not fit the output type), the error's type and its reason."""

    agent: str
    key: Any = None
    seq: int
    input: Any = None
    output: Any = None
    error_type: str
    reason: str

    def to_json(self) -> str:
        return canonical_json(self.model_dump())


class OutputType(Protocol):
    """What an agent's outputs must be: :meth:`validate` turns an output's JSON value into the
    typed answer or raises ``ValueError`` saying why it does not fit."""

    def validate(self, output: Any) -> Any: ...


class JsonOutputs:
    """No declared type: the answer is the output's JSON value as it is."""

    def validate(self, output: Any) -> Any:
        return output


class PythonOutputType:
    """A Python type (pydantic model, dataclass, ``list[int]``...): answers are objects of it."""

    def __init__(self, output_type: Any) -> None:
        self.output_type = output_type
        self._adapter: TypeAdapter[Any] = TypeAdapter(output_type)

    def validate(self, output: Any) -> Any:
        try:
            return self._adapter.validate_python(output)
        except ValidationError as exc:
            name = getattr(self.output_type, "__name__", str(self.output_type))
            raise ValueError(f"output is not a {name}: {exc}") from None


class JsonSchemaOutputType:
    """A JSON Schema (a job spec's ``output_schema``): answers are the JSON values that fit it."""

    def __init__(self, schema: dict[str, Any]) -> None:
        jsonschema.validators.validator_for(schema).check_schema(schema)
        self.schema = schema
        self._validator: Any = None  # made where it runs: only the schema travels to workers

    def __getstate__(self) -> dict[str, Any]:
        return {"schema": self.schema, "_validator": None}

    def validate(self, output: Any) -> Any:
        if self._validator is None:
            self._validator = jsonschema.validators.validator_for(self.schema)(self.schema)
        error = jsonschema.exceptions.best_match(self._validator.iter_errors(output))
        if error is not None:
            where = "/".join(str(part) for part in error.absolute_path) or "(the output)"
            raise ValueError(f"output does not fit the output schema at {where}: {error.message}")
        return output


def split_envelope(text: str, output_type: OutputType) -> tuple[Any, DeadLetter | None]:
    """The answer of one output envelope (JSON text), or ``(None, dead_letter)``."""
    envelope = read_json(text)
    agent, key, seq = envelope["agent"], envelope.get("key"), envelope["seq"]
    error = envelope.get("error")
    if error is not None:
        return None, DeadLetter(
            agent=agent,
            key=key,
            seq=seq,
            input=envelope.get("input"),
            error_type=str(error.get("error_type", "Error")),
            reason=_reason(error),
        )
    try:
        return output_type.validate(envelope.get("output")), None
    except ValueError as exc:
        return None, DeadLetter(
            agent=agent,
            key=key,
            seq=seq,
            output=envelope.get("output"),
            error_type=OUTPUT_TYPE_ERROR,
            reason=str(exc),
        )


def _reason(error: dict[str, Any]) -> str:
    message = str(error.get("message", ""))
    action = error.get("action")
    return f"action {action!r} failed: {message}" if action else message
