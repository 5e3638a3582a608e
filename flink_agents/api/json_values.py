"""JSON-generic values: what a sub-agent's result must be before it is recorded or shown.

A value is JSON-generic when it is ``None``, a bool, an int, a finite float, a str, a list of
such values or a dict with string keys and such values. :func:`json_generic` turns a value into
that form (pydantic models and dataclasses are dumped in JSON mode, as their type's adapter
writes them; tuples become lists) or refuses it with the path where the offending part was
found, so a result is never silently dropped or stringified. :func:`json_form` does the same for
a value of a declared type (a datetime, an Enum, a UUID, a Decimal, ... dumped as pydantic
writes them, so :class:`~pydantic.TypeAdapter` validates the form back into the same value).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, TypeAdapter
from pydantic_core import PydanticSerializationError

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class NotJsonError(ValueError):
    """A value JSON cannot express; ``path`` (``$.a[2].b``) says where it was found."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"not a JSON value at {path}: {reason}")
        self.path = path
        self.reason = reason


def member_path(path: str, key: str) -> str:
    """The path of member ``key`` of the object at ``path`` (``$.a``, ``$["a b"]``)."""
    return f"{path}.{key}" if _IDENTIFIER.match(key) else f"{path}[{json.dumps(key)}]"


def json_generic(value: Any, path: str = "$") -> Any:
    """``value`` as JSON-generic data, or :class:`NotJsonError` naming the first bad path."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NotJsonError(path, f"{value!r} is not a finite number")
        return value
    if isinstance(value, BaseModel) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    ):
        return json_form(value, type(value), path)
    if isinstance(value, Mapping):
        result: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise NotJsonError(path, f"key {key!r} is a {type(key).__name__}, not a string")
            result[key] = json_generic(item, member_path(path, key))
        return result
    if isinstance(value, list | tuple):
        return [json_generic(item, f"{path}[{index}]") for index, item in enumerate(value)]
    raise NotJsonError(path, f"a {type(value).__name__} is not a JSON value")


def json_form(value: Any, declared: Any, path: str = "$") -> Any:
    """``value`` of the type ``declared`` as JSON-generic data: dumped in JSON mode by the
    type's :class:`~pydantic.TypeAdapter`, then checked (no non-finite number survives)."""
    try:
        dumped = TypeAdapter(declared).dump_python(value, mode="json", warnings="error")
    except PydanticSerializationError as exc:
        raise NotJsonError(path, str(exc)) from None
    return json_generic(dumped, path)


def json_text(value: Any) -> str:
    """How a JSON-generic value is shown to a model: strings as they are, the rest as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(json_generic(value), sort_keys=True, ensure_ascii=False)
