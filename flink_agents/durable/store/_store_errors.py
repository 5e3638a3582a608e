"""Exceptions raised by the action-state store and its codec."""

from __future__ import annotations

from flink_agents.api.context import InfrastructureError


class StoreError(InfrastructureError):
    """Base class for action-state store and codec failures (never a call's outcome)."""


class PayloadError(StoreError):
    """A call payload cannot be encoded or decoded."""


class UntrustedPickleError(PayloadError):
    """A pickled payload was about to be loaded from bytes that were not authenticated."""


class PickleNotAllowedError(StoreError):
    """A record with a pickled payload was written without a store secret to sign it."""


class StoreSecretMissingError(StoreError, ValueError):
    """A Kafka store requires signed records (``signing: required``, the default) and its
    secret variable is not set in this process: refused before any record is written or read.
    Also a `ValueError`, as other configuration errors of a job spec."""

    def __init__(self, topic: str, secret_env: str) -> None:
        self.topic = topic
        self.secret_env = secret_env
        super().__init__(
            f"store topic {topic!r}: records must be signed but {secret_env} is not set. Set it "
            "to a secret (e.g. 32 random bytes as hex) in the environment of every process of "
            "the job (the client, the JobManager and the TaskManagers), or set the store's "
            "`signing: off` to write unsigned records anyone who can write the topic can forge "
            "(docs/security.md)"
        )


class StoreWriteError(StoreError):
    """One or more buffered writes were not acknowledged by the broker."""


class CorruptRecordError(StoreError):
    """A stored record failed authentication or decoding; it was not executed or unpickled.

    `topic`, `partition` and `offset` locate the record (the in-memory store uses topic
    "memory"); `reason` says what was wrong with it.
    """

    def __init__(self, topic: str, partition: int, offset: int, reason: str) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.reason = reason
        super().__init__(
            f"corrupt action-state record at topic={topic!r} partition={partition} "
            f"offset={offset}: {reason}"
        )


class RecordTooLargeError(StoreError):
    """A record would exceed the store's ``max_record_bytes``: refused before it is written
    (a broker would refuse it, and the job restart over and over). ``key`` is the record key,
    ``size`` and ``limit`` are in bytes (record key and value)."""

    def __init__(self, key: str, size: int, limit: int) -> None:
        self.key = key
        self.size = size
        self.limit = limit
        super().__init__(
            f"the record of {key} takes {size:,} bytes, over the store's limit of {limit:,} "
            "(max_record_bytes, docs/state-store.md)"
        )


class OutcomeTooLargeError(ValueError):
    """A call's result would make its action's record exceed the store's ``max_record_bytes``.

    Recorded as the call's FAILED outcome and raised in the action, live as on every replay
    (so the call is never made again, as a restart would): the work's failure, not the
    runtime's, so it is no :class:`StoreError` -- a tool's caller shows it to the model.
    """

    def __init__(self, call_id: str, function: str, size: int, limit: int) -> None:
        self.call_id = call_id
        self.size = size
        self.limit = limit
        super().__init__(
            f"the result of call {call_id!r} ({function}) is too large to record: its action's "
            f"record would take {size:,} bytes, over the store's limit of {limit:,} "
            "(max_record_bytes); return less (a summary, a page, a reference)"
        )
