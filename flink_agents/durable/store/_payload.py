"""Call payloads: JSON with a recorded type, so values keep their type across replay.

`encode_payload(value, result_type)` returns `(json_payload, type_tag)`:

- with a declared `result_type` (anything pydantic validates: a model, a dataclass, a datetime,
  an Enum, a UUID, a Decimal, `list[Model]`, ...): the value is validated as that type and
  dumped in JSON mode by its `TypeAdapter`; decoding validates it back, so the value has the
  same type live and replayed (a value that does not fit is a `PayloadError`). Tagged like
  below when it is a model or dataclass instance; never pickled.
- JSON primitives, lists and dicts: the value itself, tag `None`.
- a pydantic model or dataclass instance: its JSON form, tag `"module:qualname"`.
- other values pydantic can render as JSON (datetime, tuples, lists of models, ...): that form,
  tag `None` -- declare `result_type` at decode time to get the richer type back.
- anything else: cloudpickle bytes in base64 with tag `PICKLE_TAG`. Such a record can only be
  written by a store configured with a secret (see `codec`), and is only unpickled after the
  record's HMAC has been verified.

`decode_payload` gives priority to a declared `result_type`; otherwise it resolves the recorded
tag, and only accepts classes that are pydantic models or dataclasses (a record never makes us
call an arbitrary callable).
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import importlib
import sys
from typing import Any

import cloudpickle
import pydantic
import pydantic_core

from flink_agents.durable.store._canonical import type_tag
from flink_agents.durable.store._store_errors import PayloadError, UntrustedPickleError

PICKLE_TAG = "!cloudpickle"

_PRIMITIVES = (type(None), bool, int, float, str)


def encode_payload(value: Any, result_type: Any = None) -> tuple[Any, str | None]:
    """Encode a call result value (of the declared `result_type`, if given) as
    `(json_payload, type_tag)`."""
    if result_type is not None:
        return _encode_declared(value, result_type)
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json"), type_tag(type(value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        payload = _adapter(type(value)).dump_python(value, mode="json")
        return payload, type_tag(type(value))
    if isinstance(value, _PRIMITIVES):
        return value, None
    try:
        return pydantic_core.to_jsonable_python(value), None
    except pydantic_core.PydanticSerializationError:
        return base64.b64encode(cloudpickle.dumps(value)).decode("ascii"), PICKLE_TAG


def _adapter(result_type: Any) -> pydantic.TypeAdapter[Any]:
    """The `TypeAdapter` of `result_type`, built once per type: building one costs more than
    validating and dumping a reply with it (a call encodes and decodes its result)."""
    try:
        return _cached_adapter(result_type)
    except TypeError:  # an unhashable type form (say, Annotated with a list): not cached
        return pydantic.TypeAdapter(result_type)


@functools.lru_cache(maxsize=256)
def _cached_adapter(result_type: Any) -> pydantic.TypeAdapter[Any]:
    return pydantic.TypeAdapter(result_type)


def _encode_declared(value: Any, result_type: Any) -> tuple[Any, str | None]:
    adapter = _adapter(result_type)
    try:
        # The adapter's own validator and serializer: its `validate_python` / `dump_python`
        # only forward to them, through a Python frame each (a call uses three).
        typed = adapter.validator.validate_python(value)
        payload = adapter.serializer.to_python(typed, mode="json", warnings="error")
    except (pydantic.ValidationError, pydantic_core.PydanticSerializationError) as exc:
        raise PayloadError(f"result does not encode as {result_type!r}: {exc}") from exc
    typed_class = isinstance(typed, pydantic.BaseModel) or dataclasses.is_dataclass(typed)
    return payload, type_tag(type(typed)) if typed_class else None


def decode_payload(
    json_payload: Any,
    type_tag: str | None,
    result_type: Any = None,
    *,
    trusted: bool = False,
) -> Any:
    """Decode a payload produced by `encode_payload`.

    `result_type` (any type pydantic can validate: a model, a dataclass, `list[Model]`, ...)
    wins over the recorded tag. Pickled payloads are only loaded when `trusted` is true, i.e.
    the record carrying them was authenticated or produced in this process.
    """
    if type_tag == PICKLE_TAG:
        if not trusted:
            raise UntrustedPickleError(
                "refusing to unpickle a payload from an unauthenticated record"
            )
        return cloudpickle.loads(base64.b64decode(json_payload))
    if result_type is not None:
        return _validate(result_type, json_payload)
    if type_tag is None:
        return json_payload
    return _validate(resolve_type_tag(type_tag, may_import=trusted), json_payload)


def resolve_type_tag(tag: str, *, may_import: bool = True) -> type:
    """Import `module:qualname` and return it if it is a pydantic model or dataclass class.

    Importing can run the named module's top-level code, but only modules installed for the
    job can be named; the class itself is only used for validation, never called directly.
    Without ``may_import`` (a tag from a record that was not authenticated) only a module this
    process has loaded already (the plan's code) is looked in: a forged record cannot make the
    reader import anything.
    """
    module_name, sep, qualname = tag.partition(":")
    if not sep or not module_name or not qualname:
        raise PayloadError(f"malformed payload type tag {tag!r}")
    if not may_import and module_name not in sys.modules:
        raise PayloadError(
            f"payload type {tag!r} names a module this process has not loaded, and the record "
            "is not authenticated (no store secret): declare the call's result_type, or set one"
        )
    try:
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise PayloadError(f"payload type {tag!r} cannot be resolved: {exc}") from exc
    is_model = isinstance(obj, type) and issubclass(obj, pydantic.BaseModel)
    if not (is_model or (isinstance(obj, type) and dataclasses.is_dataclass(obj))):
        raise PayloadError(f"payload type {tag!r} is not a pydantic model or dataclass")
    return obj


def _validate(result_type: Any, json_payload: Any) -> Any:
    try:
        return _adapter(result_type).validator.validate_python(json_payload)
    except pydantic.ValidationError as exc:
        raise PayloadError(f"payload does not validate as {result_type!r}: {exc}") from exc
