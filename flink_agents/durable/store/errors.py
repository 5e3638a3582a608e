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
