"""Durable calls: every model, tool and sub-agent call recorded under a deterministic identity.

* :mod:`.identity` -- run ids, event ids and call identities (the heart of replay);
* :mod:`.call` -- :class:`DurableCall` and the :class:`CallRunner` protocol the engine calls;
* :mod:`.calls` -- :class:`DurableCalls`, the one implementation: identity, lookup, record,
  settle, with or without a store, and the outcome of every call told to a listener;
* :mod:`.faults` -- the kill points and the :class:`CallProbe` reached along a call's way;
* :mod:`.journal` / :mod:`.journal_codec` -- completed actions, so a replay need not run them;
* :mod:`.mismatch` -- matching what the code asks for against what was recorded;
* :mod:`.group_flush` -- one store commit for many calls finishing together;
* :mod:`.store` -- the action-state store (records, codec, in-memory and Kafka stores).

See docs/durable-execution.md and docs/state-store.md.
"""

from typing import TYPE_CHECKING

from flink_agents.api.moved import moved_names_getattr
from flink_agents.durable.call import CallRunner, DurableCall
from flink_agents.durable.calls import DurableCalls
from flink_agents.durable.faults import CallProbe
from flink_agents.durable.identity import CallIdentity, RunId, event_id
from flink_agents.durable.mismatch import CallMismatchError

__all__ = [
    "CallIdentity",
    "CallMismatchError",
    "CallProbe",
    "CallRunner",
    "DurableCall",
    "DurableCalls",
    "RunId",
    "event_id",
]

if not TYPE_CHECKING:  # hidden from mypy, which would otherwise accept any name of this module
    __getattr__ = moved_names_getattr(__name__)  # an old name says where it went
