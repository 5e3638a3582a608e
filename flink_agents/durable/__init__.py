"""Durable calls: every model, tool and sub-agent call recorded under a deterministic identity.

* :mod:`.identity` -- run ids, event ids and call identities (the heart of replay);
* :mod:`.call` -- :class:`DurableCall` and the :class:`CallRunner` hook the engine calls;
* :mod:`.runner` -- :class:`StoreCallRunner`: look a call up in the store, hand back a recorded
  outcome, or call and record;
* :mod:`.journal` / :mod:`.journal_codec` -- completed actions, so a replay need not run them;
* :mod:`.replay` -- matching what the code asks for against what was recorded;
* :mod:`.group_flush` -- one store commit for many calls finishing together;
* :mod:`.store` -- the action-state store (records, codec, in-memory and Kafka stores).

See docs/durable-execution.md and docs/state-store.md.
"""

from flink_agents.durable.call import CallRunner, DirectCallRunner, DurableCall
from flink_agents.durable.identity import CallIdentity, RunId, event_id
from flink_agents.durable.runner import StoreCallRunner

__all__ = [
    "CallIdentity",
    "CallRunner",
    "DirectCallRunner",
    "DurableCall",
    "RunId",
    "StoreCallRunner",
    "event_id",
]
