"""Action-state store: durable call results and per-action state (see docs/state-store.md).

Import from here: the modules that implement it are private (``_action_state``: the records;
``_canonical``: canonical JSON and argument digests; ``_payload``: typed payloads; ``_codec``:
record bytes; ``_base``: the store protocol; ``_log_store``: the logic shared by log-backed
stores; ``_in_memory``: the in-memory store; ``_limits``: the record limit; ``_store_errors``).
Three modules stay public, each imported on its own: :mod:`.kafka` (the Kafka store, which loads
the Kafka client), :mod:`.store_config` (`StoreConfig`, which builds either store) and
:mod:`.inspect` (reading a store for the ``flink-agents store`` commands). :class:`StoreConfig`
is exported here too, loaded on first use: it builds the Kafka store, whose client library need
not load with the in-memory store.
"""

from typing import TYPE_CHECKING, Any

from flink_agents.durable.store._action_state import (
    MAX_TRACE_BYTES,
    ActionState,
    ActionStateKey,
    CallError,
    CallResult,
    CallStatus,
    RunInput,
    RunKey,
    now_ms,
)
from flink_agents.durable.store._base import (
    ActionStateStore,
    PartitionMark,
    RecoveryMarker,
    RestoreReport,
    partition_for,
)
from flink_agents.durable.store._canonical import (
    ArgumentDigestError,
    arguments_text,
    canonical_arguments,
    canonical_arguments_and_digest,
    canonical_json,
    digest_arguments,
    type_tag,
)
from flink_agents.durable.store._codec import DEFAULT_SECRET_ENV, RecordCodec, secret_from_env
from flink_agents.durable.store._in_memory import InMemoryActionStateStore, InMemoryLog
from flink_agents.durable.store._limits import DEFAULT_MAX_RECORD_BYTES, check_outcome_fits
from flink_agents.durable.store._log_store import LogRecord, LogStore
from flink_agents.durable.store._payload import PICKLE_TAG, decode_payload, encode_payload
from flink_agents.durable.store._placement import (
    ANY_PLACEMENT,
    CRC32_PLACEMENT,
    KeyGroupRange,
    Placement,
    key_group,
)
from flink_agents.durable.store._store_errors import (
    CorruptRecordError,
    OutcomeTooLargeError,
    PayloadError,
    PickleNotAllowedError,
    RecordTooLargeError,
    StoreError,
    StoreSecretMissingError,
    StoreWriteError,
    UntrustedPickleError,
)

if TYPE_CHECKING:
    from flink_agents.durable.store.store_config import StoreConfig

__all__ = [
    "ANY_PLACEMENT",
    "CRC32_PLACEMENT",
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
    "KeyGroupRange",
    "LogRecord",
    "LogStore",
    "OutcomeTooLargeError",
    "PartitionMark",
    "PayloadError",
    "PickleNotAllowedError",
    "Placement",
    "RecordCodec",
    "RecordTooLargeError",
    "RecoveryMarker",
    "RestoreReport",
    "RunInput",
    "RunKey",
    "StoreConfig",
    "StoreError",
    "StoreSecretMissingError",
    "StoreWriteError",
    "UntrustedPickleError",
    "arguments_text",
    "canonical_arguments",
    "canonical_arguments_and_digest",
    "canonical_json",
    "check_outcome_fits",
    "decode_payload",
    "digest_arguments",
    "encode_payload",
    "key_group",
    "now_ms",
    "partition_for",
    "secret_from_env",
    "type_tag",
]


def __getattr__(name: str) -> Any:
    if name == "StoreConfig":
        from flink_agents.durable.store.store_config import StoreConfig

        return StoreConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
