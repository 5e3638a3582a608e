"""Action-state store: durable call results and per-action state (see docs/state-store.md).

:class:`StoreConfig` (which store, and its settings) loads on first use: it builds the Kafka
store, whose client library need not load with the in-memory store.
"""

from typing import TYPE_CHECKING, Any

from flink_agents.durable.store.base import (
    ActionStateStore,
    PartitionMark,
    RecoveryMarker,
    RestoreReport,
    partition_for,
)
from flink_agents.durable.store.canonical import (
    ArgumentDigestError,
    arguments_text,
    canonical_arguments,
    canonical_json,
    digest_arguments,
)
from flink_agents.durable.store.codec import DEFAULT_SECRET_ENV, RecordCodec, secret_from_env
from flink_agents.durable.store.errors import (
    CorruptRecordError,
    OutcomeTooLargeError,
    PayloadError,
    PickleNotAllowedError,
    RecordTooLargeError,
    StoreError,
    StoreWriteError,
    UntrustedPickleError,
)
from flink_agents.durable.store.limits import DEFAULT_MAX_RECORD_BYTES, check_outcome_fits
from flink_agents.durable.store.memory import InMemoryActionStateStore, InMemoryLog
from flink_agents.durable.store.payload import PICKLE_TAG, decode_payload, encode_payload
from flink_agents.durable.store.records import (
    MAX_TRACE_BYTES,
    ActionState,
    ActionStateKey,
    CallError,
    CallResult,
    CallStatus,
    RunInput,
    RunKey,
)

if TYPE_CHECKING:
    from flink_agents.durable.store.config import StoreConfig

__all__ = [
    "DEFAULT_MAX_RECORD_BYTES",
    "DEFAULT_SECRET_ENV",
    "MAX_TRACE_BYTES",
    "PICKLE_TAG",
    "ActionState",
    "ActionStateKey",
    "ActionStateStore",
    "ArgumentDigestError",
    "CallError",
    "CallResult",
    "CallStatus",
    "CorruptRecordError",
    "InMemoryActionStateStore",
    "InMemoryLog",
    "OutcomeTooLargeError",
    "PartitionMark",
    "PayloadError",
    "PickleNotAllowedError",
    "RecordCodec",
    "RecordTooLargeError",
    "RecoveryMarker",
    "RestoreReport",
    "RunInput",
    "RunKey",
    "StoreConfig",
    "StoreError",
    "StoreWriteError",
    "UntrustedPickleError",
    "arguments_text",
    "canonical_arguments",
    "canonical_json",
    "check_outcome_fits",
    "decode_payload",
    "digest_arguments",
    "encode_payload",
    "partition_for",
    "secret_from_env",
]


def __getattr__(name: str) -> Any:
    if name == "StoreConfig":
        from flink_agents.durable.store.config import StoreConfig

        return StoreConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
