"""Testing agents and their durable execution: public helpers (see docs/testing.md).

* scripted chat models (:class:`ScriptedChatModelConnection`): deterministic replies and tool
  calls, with call counters;
* :func:`run_local` (an agent over a list of inputs in this process), :func:`agent_plan`,
  :func:`run_live` and :func:`resume` (one run over a store, and finishing a checkpointed one);
* :class:`InMemoryActionStateStore` and :class:`Stores` (a live store and restorable
  successors over one log, in memory or on Kafka);
* :func:`crash_and_replay`: run inputs, crash at a chosen durable call, restore, replay, and
  count every call's invocations;
* :func:`assert_no_completed_call_reinvoked`, :func:`assert_replay_equals_live`.
"""

import warnings
from typing import TYPE_CHECKING, Any

from flink_agents.api.moved import missing_name_error
from flink_agents.durable.store import InMemoryActionStateStore, InMemoryLog
from flink_agents.providers.scripted import (
    ScriptedChatModelConnection,
    ScriptedModelError,
    ScriptedToolCall,
    ScriptedTurn,
)
from flink_agents.runtime.local import run_local, run_local_async
from flink_agents.testing.assertions import (
    assert_no_completed_call_reinvoked,
    assert_replay_equals_live,
)
from flink_agents.testing.harness import (
    CallLog,
    CountingProbe,
    CrashPoint,
    CrashReplayResult,
    crash_and_replay,
)
from flink_agents.testing.plans import agent_plan, resume, run_live
from flink_agents.testing.stores import Stores

__all__ = [
    "CallLog",
    "CountingProbe",
    "CrashPoint",
    "CrashReplayResult",
    "InMemoryActionStateStore",
    "InMemoryLog",
    "ScriptedChatModelConnection",
    "ScriptedModelError",
    "ScriptedToolCall",
    "ScriptedTurn",
    "Stores",
    "agent_plan",
    "assert_no_completed_call_reinvoked",
    "assert_replay_equals_live",
    "crash_and_replay",
    "resume",
    "run_live",
    "run_local",
    "run_local_async",
]

_DEPRECATED = {"replay": "resume"}
"""Old name -> new name, still importable with a DeprecationWarning ("replay" is the offline
replayer's word, :mod:`flink_agents.replay`; finishing a checkpointed run is resuming it)."""


def _deprecated_or_moved(name: str) -> Any:
    """An old name: its replacement with a warning, or an error saying where it went."""
    if name in _DEPRECATED:
        new = _DEPRECATED[name]
        warnings.warn(
            f"flink_agents.testing.{name} is deprecated: use flink_agents.testing.{new}",
            DeprecationWarning,
            stacklevel=2,
        )
        return globals()[new]
    raise missing_name_error(__name__, name)


if not TYPE_CHECKING:  # hidden from mypy, which would otherwise accept any name of this module
    __getattr__ = _deprecated_or_moved
