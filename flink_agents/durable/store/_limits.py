"""The largest record a store writes, and a call outcome that would not fit.

Every store refuses, in `put`, a record (key and value, signed if it is) larger than its
``max_record_bytes`` with a `RecordTooLargeError`, before anything is written: the memory store
as the Kafka store, whose producer and broker would refuse it only later, failing the job on
every restart. A call's own outcome is checked before it is handed to the action
(`check_outcome_fits`): one that does not fit is recorded as the call's failure instead, so a
replay hands that failure back rather than calling again (docs/state-store.md).
"""

from __future__ import annotations

from flink_agents.durable.store._action_state import ActionState, CallResult
from flink_agents.durable.store._base import ActionStateStore
from flink_agents.durable.store._store_errors import OutcomeTooLargeError

#: The default ``max_record_bytes``: 960 KiB, within librdkafka's default ``message.max.bytes``
#: (1,000,000) and the broker's (1,048,588) with `RECORD_HEADROOM` to spare.
DEFAULT_MAX_RECORD_BYTES = 960 * 1024

#: What a Kafka producer request adds to a record beyond its key and value (the record batch
#: and record headers take under 100 bytes): ``max_record_bytes`` plus this must fit the
#: producer's ``message.max.bytes``.
RECORD_HEADROOM = 16 * 1024


def check_outcome_fits(store: ActionStateStore, state: ActionState, outcome: CallResult) -> None:
    """Record ``outcome`` into ``state`` and raise `OutcomeTooLargeError` if the state's
    record then exceeds the store's limit (the caller records the call's failure instead)."""
    state.record_call(outcome)
    size = store.record_size(state)
    if size > store.max_record_bytes:
        raise OutcomeTooLargeError(outcome.call_id, outcome.function, size, store.max_record_bytes)
