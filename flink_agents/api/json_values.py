"""JSON-generic values: what a sub-agent's result must be before it is recorded or shown.

A value is JSON-generic when it is ``None``, a bool, an int, a finite float, a str, a list of
such values or a dict with string keys and such values. :func:`json_generic` turns a value into
that form (pydantic models and dataclasses are dumped in JSON mode, as their type's adapter
writes them; tuples become lists) or refuses it with the path where the offending part was
found, so a result is never silently dropped or stringified. :func:`json_form` does the same for
a value of a declared type (a datetime, an Enum, a UUID, a Decimal, ... dumped as pydantic
writes them, so :class:`~pydantic.TypeAdapter` validates the form back into the same value).

What a model is shown of a value (a tool's result, a sub-agent's) is :func:`json_text`: JSON of
:func:`json_rendering`, which also renders values JSON has no type for (datetimes, sets, ...)
in one documented way. Lone surrogates (what ``surrogateescape`` decoding leaves for bytes that
are not UTF-8) are escaped in JSON text that is recorded (:func:`escape_lone_surrogates`, read
back as the same string) and replaced in text for a model (:func:`replace_lone_surrogates`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, Literal

import pydantic_core
from pydantic import BaseModel, TypeAdapter
from pydantic_core import PydanticSerializationError

InfNanMode = Literal["null", "constants", "strings"]
"""How pydantic writes a non-finite float (see :func:`json_bytes`)."""

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


def json_rendering(value: Any, path: str = "$") -> Any:
    """``value`` as JSON data, values JSON has no type for rendered as documented (how a
    tool's result or a sub-agent's is shown to a model, docs/agents.md), or
    :class:`NotJsonError` naming the first path that has no rendering:

    - a pydantic model or a dataclass: dumped in JSON mode, as its type writes it;
    - a tuple: a list; a set or frozenset: a list sorted by its elements' JSON text;
    - a dict key that is an int, a float, a bool or None: its JSON text (as ``json`` writes it);
    - what pydantic writes in JSON mode: a datetime, date or time in ISO 8601, a timedelta as
      an ISO 8601 duration, a Decimal, UUID or Path as its text, an Enum as its value;
    - bytes: UTF-8 text, a byte that is not UTF-8 as U+FFFD;
    - a non-finite float stays (``json`` writes ``NaN``, ``Infinity``).
    """
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, BaseModel) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    ):
        try:
            dumped = TypeAdapter(type(value)).dump_python(value, mode="json")
        except PydanticSerializationError as exc:
            raise NotJsonError(path, str(exc)) from None
        return json_rendering(dumped, path)
    if isinstance(value, Mapping):
        result: dict[str, Any] = {}
        for key, item in value.items():
            if isinstance(key, str):
                name = key
            elif key is None or isinstance(key, bool | int | float):
                name = json.dumps(key)
            else:
                raise NotJsonError(path, f"key {key!r} is a {type(key).__name__}, not a string")
            result[name] = json_rendering(item, member_path(path, name))
        return result
    if isinstance(value, list | tuple):
        return [json_rendering(item, f"{path}[{index}]") for index, item in enumerate(value)]
    if isinstance(value, set | frozenset):
        items = [json_rendering(item, f"{path}[{index}]") for index, item in enumerate(value)]
        return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    try:
        dumped = pydantic_core.to_jsonable_python(value)
    except (PydanticSerializationError, ValueError):
        raise NotJsonError(path, f"a {type(value).__name__} has no JSON form") from None
    return json_rendering(dumped, path)


def json_text(value: Any) -> str:
    """How a value is shown to a model (a tool's result, a sub-agent's): a string as it is,
    anything else as JSON (sorted keys, non-ASCII as it is) of :func:`json_rendering`; lone
    surrogates replaced (:func:`replace_lone_surrogates`). A durable call records this text,
    so a model is shown the same bytes live and after a failover."""
    if not isinstance(value, str):
        value = json.dumps(json_rendering(value), sort_keys=True, ensure_ascii=False)
    return replace_lone_surrogates(value)


# A surrogate code point (U+D800..U+DFFF) in a str: what `surrogateescape` decoding leaves for
# bytes that are not UTF-8 (subprocess output, file names). UTF-8 cannot encode one.
_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_lone_surrogates(json_text: str) -> str:
    """``json_text`` (JSON written without ASCII escaping) with every surrogate code point
    written as its JSON escape ``\\udcff``: encodable as UTF-8, and parsed back (by Python's
    ``json``) into the very same string. Outside strings JSON text has no such code point."""
    if json_text.isascii():
        return json_text
    return _SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", json_text)


def replace_lone_surrogates(text: str) -> str:
    """``text`` for a model: each surrogate code point replaced by U+FFFD, the replacement
    character that decoding the undecodable byte with ``errors="replace"`` gives. A model's
    request is UTF-8 JSON, which has no room for one."""
    if text.isascii():
        return text
    return _SURROGATE.sub("\ufffd", text)


def json_bytes(
    value: Any,
    *,
    fallback: Callable[[Any], Any] | None = None,
    inf_nan_mode: InfNanMode = "constants",
) -> bytes:
    """``pydantic_core.to_json(value, fallback=..., inf_nan_mode=...)``, and where pydantic
    refuses a lone surrogate, the same JSON written by ``json`` with each as its escape
    (:func:`escape_lone_surrogates`): for whatever writes records, keyed state or event log
    lines. Raises ``ValueError`` or ``TypeError`` for a value that has no JSON form."""
    try:
        return pydantic_core.to_json(value, fallback=fallback, inf_nan_mode=inf_nan_mode)
    except PydanticSerializationError:
        data = pydantic_core.to_jsonable_python(value, fallback=fallback, inf_nan_mode=inf_nan_mode)
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        return escape_lone_surrogates(text).encode("utf-8")


MAX_JSON_DEPTH = 128
"""How deeply nested JSON read from outside (an input record, a plan, a model's tool arguments)
may be: arrays and objects within each other. Code that walks a value recursively (validation,
canonical JSON, the event log) runs out of Python's stack some hundreds of levels down; a bound
well below that turns such text into an error at the boundary that names it."""


class JsonLimitError(ValueError):
    """JSON text that is well formed but that this runtime does not take: nested deeper than
    :data:`MAX_JSON_DEPTH`, or holding a number with no JSON value (``NaN``, ``Infinity``,
    ``1e400``) or one Python will not read (an integer of thousands of digits)."""


def _refuse_constant(name: str) -> Any:
    raise JsonLimitError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise JsonLimitError(f"{text[:20]} is out of a float's range")
    return number


def json_depth_within(value: Any, max_depth: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``value`` nests lists and dicts (or tuples) no more than ``max_depth`` deep.
    Walks without recursion, so any depth can be measured."""
    deepest: dict[int, int] = {}  # a container shared by YAML aliases is walked again only
    stack: list[tuple[Any, int]] = [(value, 0)]  # when reached deeper: no exponential walk
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth == max_depth:
            return False
        if deepest.get(id(item), -1) >= depth:
            continue
        deepest[id(item)] = depth
        stack.extend((child, depth + 1) for child in children)
    return True


def read_json(text: str | bytes, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse JSON text from outside. Raises ``json.JSONDecodeError`` for text that is not JSON
    (bytes that are not UTF-8 included) and :class:`JsonLimitError` for JSON beyond what the
    runtime takes (see there): one ``ValueError`` either way, never a ``RecursionError``."""
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite)
    except UnicodeDecodeError as exc:
        raise json.JSONDecodeError(f"not UTF-8 ({exc.reason})", "", 0) from None
    except RecursionError:
        raise JsonLimitError(f"nested deeper than {max_depth} levels") from None
    except JsonLimitError:
        raise
    except ValueError as exc:
        if isinstance(exc, json.JSONDecodeError):
            raise
        raise JsonLimitError(str(exc).split(";")[0]) from None  # Python's int digits limit
    if not json_depth_within(value, max_depth):
        raise JsonLimitError(f"nested deeper than {max_depth} levels")
    return value
