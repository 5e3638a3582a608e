"""Action-state store: durable call results and per-action state (see docs/state-store.md)."""

from flink_agents.durable.store.action_state import (
    MAX_TRACE_BYTES,
    ActionState,
    ActionStateKey,
    CallError,
    CallResult,
    CallStatus,
    RunInput,
    RunKey,
)
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
from flink_agents.durable.store.in_memory import InMemoryActionStateStore, InMemoryLog
from flink_agents.durable.store.limits import DEFAULT_MAX_RECORD_BYTES, check_outcome_fits
from flink_agents.durable.store.payload import PICKLE_TAG, decode_payload, encode_payload
from flink_agents.durable.store.store_errors import (
    CorruptRecordError,
    OutcomeTooLargeError,
    PayloadError,
    PickleNotAllowedError,
    RecordTooLargeError,
    StoreError,
    StoreWriteError,
    UntrustedPickleError,
)

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
