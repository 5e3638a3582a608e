"""Canonical JSON and argument digests that are stable across processes.

`canonical_json` is the single serializer for everything whose bytes matter (identities, digests,
Kafka record keys): sorted keys, no whitespace, UTF-8, no NaN. `digest_arguments` normalizes call
arguments to plain JSON first, so the digest does not depend on hash randomisation, object
addresses or pickle protocol details.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import hashlib
import json
import math
from collections.abc import Callable, Mapping
from json.encoder import encode_basestring
from typing import Any

import pydantic
import pydantic_core

from flink_agents.api.json_values import escape_lone_surrogates


class ArgumentDigestError(TypeError):
    """An argument has no stable JSON form (its repr would contain an object address)."""


_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)
# The C encoder `JSONEncoder` builds for every call (None where the C module is missing).
_C_ENCODER: Callable[..., Any] | None = getattr(json.encoder, "c_make_encoder", None)


def canonical_json(value: Any) -> str:
    """Serialize an already-plain JSON value deterministically. A lone surrogate in a string
    is written as its escape (``\\udcff``), so the text encodes as UTF-8 and two strings that
    differ only there stay different keys (`escape_lone_surrogates`)."""
    if _C_ENCODER is None:
        return escape_lone_surrogates(_ENCODER.encode(value))
    # What `_ENCODER.encode` runs, without its Python layers (`encode`, `iterencode` and the
    # closures it defines per call): a quarter of the cost of the digests and keys every run
    # renders. The same C encoder with `_ENCODER`'s settings, so the same text; a fresh dict
    # of the containers being encoded per call, as `check_circular` makes.
    encode = _C_ENCODER({}, _ENCODER.default, encode_basestring, None, ":", ",", True, False, False)
    return escape_lone_surrogates("".join(encode(value, 0)))


def json_string(text: str) -> str:
    """``text`` as a JSON string, as `canonical_json` writes it (for keys rendered by hand)."""
    return escape_lone_surrogates(encode_basestring(text))


def to_canonical(value: Any, dumps_as_they_are: bool = False) -> Any:
    """Normalize `value` to plain JSON (dict/list/str/int/float/bool/None), deterministically.

    ``dumps_as_they_are`` leaves a pydantic model's JSON dump unwalked: it is plain JSON already
    (string keys, JSON leaves) except for non-finite floats, which the walk maps and
    `canonical_json` refuses -- see `canonical_arguments_and_digest`, the one caller that sets it.

    Rules, in order:
    - pydantic models: `model_dump(mode="json")`; dataclass instances: their fields, by name.
    - enums: their `.value`; bytes: `{"__bytes__": <base64>}`.
    - non-finite floats: `{"__float__": "nan" | "inf" | "-inf"}`.
    - mappings: keys that are not strings become their canonical JSON text.
    - lists and tuples: lists; sets and frozensets: lists sorted by canonical JSON of elements.
    - anything pydantic can render as JSON (datetime, date, UUID, Decimal, Path, ...): that form.
    - otherwise, documented fallback: `{"__repr__": "<module:qualname>", "repr": repr(value)}`,
      but only when the repr is free of an object address (`" at 0x"`); objects whose repr is
      the default `<Foo object at 0x...>` raise `ArgumentDigestError`, because their digest
      would differ in every process.
    """
    # Fast paths for the exact plain types (the bulk of a dumped model); same results as below.
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is dict:
        return {
            k if type(k) is str else _canonical_key(k): to_canonical(v, dumps_as_they_are)
            for k, v in value.items()
        }
    if kind is list:
        return [to_canonical(v, dumps_as_they_are) for v in value]
    if isinstance(value, (bool, str)):
        return value
    if isinstance(value, enum.Enum):
        return to_canonical(value.value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return {"__float__": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if isinstance(value, pydantic.BaseModel):
        dumped = value.model_dump(mode="json")
        return dumped if dumps_as_they_are else to_canonical(dumped)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: to_canonical(getattr(value, f.name), dumps_as_they_are)
            for f in dataclasses.fields(value)
        }
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"__bytes__": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, Mapping):
        return {_canonical_key(k): to_canonical(v, dumps_as_they_are) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_canonical(v, dumps_as_they_are) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [to_canonical(v) for v in value]
        return sorted(items, key=canonical_json)
    try:
        return to_canonical(pydantic_core.to_jsonable_python(value))
    except pydantic_core.PydanticSerializationError:
        return _repr_fallback(value)


def _canonical_key(key: Any) -> str:
    return key if isinstance(key, str) else canonical_json(to_canonical(key))


def _repr_fallback(value: Any) -> dict[str, str]:
    text = repr(value)
    if " at 0x" in text:
        raise ArgumentDigestError(
            f"argument of type {type_tag(type(value))} has no stable JSON form and its repr "
            f"contains an object address ({text[:80]!r}); pass JSON-able values, a pydantic "
            "model or a dataclass"
        )
    return {"__repr__": type_tag(type(value)), "repr": text}


def type_tag(cls: type) -> str:
    """`module:qualname` of a class, the form recorded alongside typed payloads."""
    return f"{cls.__module__}:{cls.__qualname__}"


def canonical_arguments(
    args: tuple[Any, ...] | list[Any], kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """A call's arguments as plain JSON: `{"args": [...], "kwargs": {...}}` (see `to_canonical`)."""
    return {"args": to_canonical(list(args)), "kwargs": to_canonical(kwargs)}


def digest_canonical(arguments: dict[str, Any]) -> str:
    """sha256 hex digest of the canonical JSON of `canonical_arguments`' result."""
    return hashlib.sha256(canonical_json(arguments).encode("utf-8")).hexdigest()


def canonical_arguments_and_digest(
    args: tuple[Any, ...] | list[Any], kwargs: Mapping[str, Any]
) -> tuple[dict[str, Any], str]:
    """`canonical_arguments` and their digest (`digest_canonical`), the same values at less
    cost: pydantic models' JSON dumps (most of a model call's arguments) are not walked by
    `to_canonical`, which would change nothing in them but a non-finite float. Such a float
    makes `canonical_json` refuse them, and only then are they walked too."""
    arguments = {
        "args": to_canonical(list(args), True),
        "kwargs": to_canonical(kwargs, True),
    }
    try:
        return arguments, digest_canonical(arguments)
    except ValueError:  # a non-finite float in a model's dump
        arguments = canonical_arguments(args, kwargs)
        return arguments, digest_canonical(arguments)


def digest_arguments(args: tuple[Any, ...] | list[Any], kwargs: Mapping[str, Any]) -> str:
    """sha256 hex digest of the canonical JSON of `{"args": [...], "kwargs": {...}}`."""
    return canonical_arguments_and_digest(args, kwargs)[1]


#: Upper bound (UTF-8 bytes) of a call's arguments as recorded for humans (`arguments_text`).
MAX_ARGUMENTS_BYTES = 8192
_ARGUMENTS_CUT = "\n[... cut: {n} bytes in total, the first part kept ...]"


def arguments_text(arguments: dict[str, Any]) -> str:
    """`canonical_arguments`' result as indented JSON, one field per line (so that two of them
    diff readably), capped at `MAX_ARGUMENTS_BYTES` UTF-8 bytes keeping the head (where a
    prompt starts).

    Keys keep the order the values have (a model's field order): pydantic's serializer is
    about 10x faster than `json.dumps` with an indent, and this runs for every call."""
    try:
        data = pydantic_core.to_json(arguments, indent=1)
    except pydantic_core.PydanticSerializationError:  # a lone surrogate: written escaped
        text = json.dumps(arguments, indent=1, ensure_ascii=False)
        data = escape_lone_surrogates(text).encode("utf-8")
    if len(data) <= MAX_ARGUMENTS_BYTES:
        return data.decode("utf-8")
    cut = data[:MAX_ARGUMENTS_BYTES].decode("utf-8", errors="ignore")
    return cut + _ARGUMENTS_CUT.format(n=len(data))
