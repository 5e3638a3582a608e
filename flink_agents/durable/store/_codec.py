"""Record codec: JSON envelopes, optionally authenticated with HMAC-SHA256.

Wire format of a record value (the Kafka record key is the canonical JSON of the identity):

    unsigned:  <envelope>
    signed:    b"FAS1" <32-byte HMAC-SHA256> <envelope>
    envelope:  JSON {"body": {...}, "kind": "action_state" | "call_result", "v": 1}

The body is pydantic's JSON of the record (fields in declaration order); readers parse it as
JSON and must not depend on key order. Non-finite floats become null (pydantic's JSON mode).
orjson writes those bytes from the record's fields where it writes what pydantic would, and
pydantic the rest (see `_body`).

The HMAC covers `len(key) (4 bytes, big endian) || key || envelope`, so a valid record cannot be
replayed under another key. A codec with a ``scope`` (a store's: its topic, one per job) signs
`b"FAS2" <HMAC>` over `len(scope) || scope || len(key) || key || envelope` instead, so a record
of another job sharing the secret, copied into this topic, does not verify; records of the
earlier format (`FAS1`, no scope) are still read.

With a secret configured every record is signed and every record read must carry a valid
HMAC; without one, records are plain JSON and pickled payloads are refused at write time.
Nothing is parsed before the HMAC is verified, and nothing is ever unpickled from an
unauthenticated record.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Callable

import orjson
import pydantic_core

from flink_agents.api.json_values import json_bytes
from flink_agents.api.secret_values import scrub_json_bytes
from flink_agents.durable.store._action_state import (
    ActionState,
    ActionStateKey,
    CallError,
    CallResult,
    RunInput,
    TrustedPickle,
    TrustedTag,
)
from flink_agents.durable.store._payload import PICKLE_TAG
from flink_agents.durable.store._store_errors import (
    CorruptRecordError,
    PayloadError,
    PickleNotAllowedError,
)

#: Environment variable holding the job secret used to sign records.
DEFAULT_SECRET_ENV = "FLINK_AGENTS_STORE_SECRET"
FORMAT_VERSION = 1

_SIGNED_MAGIC = b"FAS1"
_SCOPED_MAGIC = b"FAS2"  # same length: the signature covers the codec's scope too
_MAC_SIZE = hashlib.sha256().digest_size
_KINDS: dict[str, type[ActionState] | type[CallResult]] = {
    "action_state": ActionState,
    "call_result": CallResult,
}
Record = ActionState | CallResult


def secret_from_env(name: str = DEFAULT_SECRET_ENV) -> bytes | None:
    """The store secret from environment variable `name`, or None if unset or empty."""
    value = os.environ.get(name, "")
    return value.encode("utf-8") if value else None


def _calls_of(record: Record) -> list[CallResult]:
    return record.calls if isinstance(record, ActionState) else [record]


def _trusting_pickles(record: Record) -> Record:
    """Mark pickled payloads loadable: only call on records known to be authentic."""
    for call in _calls_of(record):
        if call.payload_type == PICKLE_TAG and isinstance(call.payload, str):
            call.payload = TrustedPickle(call.payload)
    return record


def _trusting_tags(record: Record) -> Record:
    """Mark type tags resolvable by import: only call on records whose HMAC was verified."""
    for call in _calls_of(record):
        if call.payload_type is not None and call.payload_type != PICKLE_TAG:
            call.payload_type = TrustedTag(call.payload_type)
    return record


_EPOCH_FIELD = b',"epoch":'
# What follows an envelope's body, by kind.
_STATE_KIND = b',"kind":"action_state","v":%d' % FORMAT_VERSION
_CALL_KIND = b',"kind":"call_result","v":%d' % FORMAT_VERSION


def record_epoch(value: bytes) -> int:
    """The writer epoch a record value ends with (``,"epoch":N}``, written last by `envelope`),
    without parsing the record; 0 if it has none. A restore fences by it before decoding."""
    _, found, tail = value.rpartition(_EPOCH_FIELD)
    digits = tail[:-1]
    if not found or not tail.endswith(b"}") or not digits.isdigit():
        return 0  # an envelope of an earlier version ends with its "v" field
    return int(digits)


# Types orjson writes its own way (datetimes, dataclasses, subclasses of str, int, dict, list)
# go to `_fields`, as do those it does not know (models).
_PASSTHROUGH = (
    orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)
_FLOAT_OR_NONE = (float, type(None))


class _Declined(Exception):
    """A field holds a value of another type than declared: pydantic writes it as the declared
    type (an int where a float is declared as ``8.0``), orjson as what it is."""


def _body(record: Record) -> bytes:
    """``pydantic_core.to_json(record, inf_nan_mode="null")``: the record's JSON.

    Written by orjson from the fields, at less CPU for the records the runtime makes
    (bench/results/analysis.md, "The store's records, cheaper to build and write"): a model
    of the record (its key, a call, the input) as its fields, in declaration order; anything
    else orjson does not write as pydantic would (an event, a datetime, a dataclass, a str
    subclass...) by pydantic (`_fields`). Where orjson refuses a value (an int beyond 64 bits,
    a dict key that is not a str, a lone surrogate) or a field holds another type than
    declared, pydantic writes the whole body; where pydantic refuses too (a lone surrogate),
    `json` writes it, each lone surrogate as its escape. orjson and pydantic write a
    non-finite float as null and the same text for every other float, str and int
    (tests/observability/test_line_json.py; tests/durable/store/test_record_bytes_pinned.py
    pins the records).
    """
    fields = record.__dict__
    if type(record) is ActionState and type(fields["completed"]) is bool:
        try:
            return orjson.dumps(fields, default=_fields, option=_PASSTHROUGH)
        except orjson.JSONEncodeError:  # a value orjson refuses, or `_Declined`
            pass
    # A lone surrogate in a string (orjson and pydantic refuse one; UTF-8 has none) is written
    # as its JSON escape, which `json.loads` reads back as the very same string. Anything else
    # with no JSON form is a `PayloadError`: the runtime's failure, never a call's outcome.
    try:
        return json_bytes(record, inf_nan_mode="null")
    except (TypeError, ValueError) as exc:  # PydanticSerializationError is a ValueError
        raise PayloadError(f"a {type(record).__name__} has no JSON form: {exc}") from exc


# CallResult fields pydantic leaves out at these values (action_state.py).
_LEFT_OUT_AT: dict[str, object] = {"kind": None, "spend": None, "failed_attempts": 0}


def _fields(value: object) -> object:
    """What orjson writes for a value it does not write itself (its ``default``)."""
    kind = type(value)
    if kind is CallResult:
        fields = value.__dict__  # exactly its fields, in order
        error = fields["error"]
        if (
            type(fields["attempts"]) is not int
            or type(fields["failed_attempts"]) is not int
            or type(fields["started_at"]) not in _FLOAT_OR_NONE
            or type(fields["finished_at"]) not in _FLOAT_OR_NONE
            or (error is not None and type(error) is not CallError)
        ):
            raise _Declined
        spend = fields["spend"]
        # As pydantic writes them: fields at their left-out default are left out.
        fields = {
            name: field
            for name, field in fields.items()
            if name not in _LEFT_OUT_AT or field != _LEFT_OUT_AT[name]
        }
        if spend is not None:
            fields = {**fields, "spend": spend.model_dump()}
        return fields
    if kind is ActionStateKey:
        fields = value.__dict__  # validated when made, frozen; holds its rendered key too
        return {
            "agent": fields["agent"],
            "key": fields["key"],
            "seq": fields["seq"],
            "action": fields["action"],
            "event_id": fields["event_id"],
        }
    if kind is RunInput:
        fields = value.__dict__
        if type(fields["admitted_at"]) is not float:
            raise _Declined
        return fields
    return orjson.Fragment(pydantic_core.to_json(value, inf_nan_mode="null"))


class RecordCodec:
    """Encodes records to bytes and back; see the module docstring for the format."""

    def __init__(self, secret: bytes | None = None, *, scope: str | None = None) -> None:
        self._secret = secret
        self._scope = None if scope is None else scope.encode("utf-8")

    @property
    def signed(self) -> bool:
        """Whether records are signed (a secret is configured)."""
        return self._secret is not None

    @property
    def seal_bytes(self) -> int:
        """How many bytes `seal` adds to an envelope: the signature, if records are signed."""
        return len(_SIGNED_MAGIC) + _MAC_SIZE if self._secret is not None else 0

    def encode(self, key: bytes, record: Record) -> bytes:
        """Serialize `record` stored under `key`.

        Raises `PickleNotAllowedError` if a payload is pickled and no secret is configured.
        """
        return self.seal(key, self.envelope(record))

    def envelope(self, record: Record, *, epoch: int = 0) -> bytes:
        """The unsigned envelope of `record` (see `seal`); refuses pickles without a secret.
        A writer's ``epoch`` (see `record_epoch`) is its last field when given."""
        if isinstance(record, ActionState):
            calls, kind = record.calls, _STATE_KIND
        else:
            calls, kind = [record], _CALL_KIND
        if self._secret is None:
            for call in calls:  # a loop, not `any` over a generator: one frame less a record
                if call.payload_type == PICKLE_TAG:
                    raise PickleNotAllowedError(
                        "a call payload has no JSON form and would be pickled, but the store "
                        f"has no secret to authenticate it: set {DEFAULT_SECRET_ENV} (or the "
                        "configured variable), or return JSON-able values, pydantic models or "
                        "dataclasses"
                    )
        # The last net for secrets (api/secret_values.py): a value that came from a secret
        # reference is never written to a store, wherever in the record it sits.
        body = scrub_json_bytes(_body(record))
        tail = b',"epoch":%d}' % epoch if epoch else b"}"
        return b"".join((b'{"body":', body, kind, tail))

    def seal(self, key: bytes, envelope: bytes) -> bytes:
        """The record value for `envelope` stored under `key`: signed if there is a secret."""
        if self._secret is None:
            return envelope
        if self._scope is not None:
            return _SCOPED_MAGIC + self._mac(key, envelope, self._scope) + envelope
        return _SIGNED_MAGIC + self._mac(key, envelope) + envelope

    def decode(
        self, key: bytes, value: bytes, *, topic: str, partition: int, offset: int
    ) -> Record:
        """Authenticate and parse a record; any failure raises `CorruptRecordError`."""
        return self.open(key, value, topic=topic, partition=partition, offset=offset)[0]

    def open(
        self, key: bytes, value: bytes, *, topic: str, partition: int, offset: int
    ) -> tuple[Record, bytes]:
        """`decode`, also returning the authenticated envelope (for `load`)."""

        def corrupt(reason: str) -> CorruptRecordError:
            return CorruptRecordError(topic, partition, offset, reason)

        scoped = value.startswith(_SCOPED_MAGIC)
        signed = scoped or value.startswith(_SIGNED_MAGIC)
        if self._secret is not None:
            if not signed:
                raise corrupt("record is not signed but the store requires HMAC authentication")
            mac, data = value[4 : 4 + _MAC_SIZE], value[4 + _MAC_SIZE :]
            expected = self._mac(key, data, self._scope if scoped else None)
            if (scoped and self._scope is None) or not hmac.compare_digest(mac, expected):
                raise corrupt(
                    "HMAC does not match (forged, tampered, wrong secret, or written for "
                    "another topic or job)"
                )
        elif signed:
            raise corrupt(
                f"record is signed but no store secret is configured ({DEFAULT_SECRET_ENV})"
            )
        else:
            data = value
        record = self._parse(data, corrupt)
        if isinstance(record, ActionState) and record.key.canonical().encode("utf-8") != key:
            raise corrupt("record key does not match the key in its body")
        if self._secret is None and any(c.payload_type == PICKLE_TAG for c in _calls_of(record)):
            raise corrupt("unsigned record carries a pickled payload")
        if self._secret is not None:
            _trusting_tags(record)
        return _trusting_pickles(record), data

    def load(self, envelope: bytes) -> Record:
        """Parse an envelope this process made (`envelope`) or authenticated (`open`)."""

        def broken(reason: str) -> CorruptRecordError:
            return CorruptRecordError("(in memory)", -1, -1, reason)

        record = _trusting_pickles(self._parse(envelope, broken))
        # A signed store keeps only envelopes it made or authenticated; an unsigned one may
        # hold a restored record nobody vouched for.
        return _trusting_tags(record) if self._secret is not None else record

    @staticmethod
    def _parse(data: bytes, corrupt: Callable[[str], CorruptRecordError]) -> Record:
        try:
            envelope = json.loads(data)
        except (UnicodeDecodeError, ValueError) as exc:
            raise corrupt(f"not JSON: {exc}") from None
        except RecursionError:  # a forged record of deeply nested JSON: skipped, never fatal
            raise corrupt("nested deeper than a record may be") from None
        if not isinstance(envelope, dict) or envelope.get("v") != FORMAT_VERSION:
            raise corrupt(f"not a version-{FORMAT_VERSION} record envelope")
        kind = envelope.get("kind")
        cls = _KINDS.get(kind) if isinstance(kind, str) else None
        if cls is None:
            raise corrupt(f"unknown record kind {kind!r}")
        try:
            return cls.model_validate(envelope.get("body"))
        except ValueError as exc:  # pydantic.ValidationError is a ValueError
            raise corrupt(f"invalid {kind} body: {exc}") from None
        except RecursionError:
            raise corrupt("nested deeper than a record may be") from None

    def _mac(self, key: bytes, data: bytes, scope: bytes | None = None) -> bytes:
        assert self._secret is not None
        message = len(key).to_bytes(4, "big") + key + data
        if scope is not None:
            message = len(scope).to_bytes(4, "big") + scope + message
        return hmac.new(self._secret, message, hashlib.sha256).digest()
