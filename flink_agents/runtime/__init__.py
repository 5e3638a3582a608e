"""The run engine: per-key runs, event dispatch, memory and the durable-call hook. No Flink."""

from flink_agents.runtime.context import ActionContext, DuplicateCallIdError, RunState
from flink_agents.runtime.durable import CallRunner, DirectCallRunner, DurableCall
from flink_agents.runtime.engine import ActionError, RunEngine, RunResult
from flink_agents.runtime.identity import CallIdentity, RunId, event_id
from flink_agents.runtime.local import run_local, run_local_async
from flink_agents.runtime.resources import ResourceRegistry
from flink_agents.runtime.state import KeyState, PendingInput

__all__ = [
    "ActionContext",
    "ActionError",
    "CallIdentity",
    "CallRunner",
    "DirectCallRunner",
    "DuplicateCallIdError",
    "DurableCall",
    "KeyState",
    "PendingInput",
    "ResourceRegistry",
    "RunEngine",
    "RunId",
    "RunResult",
    "RunState",
    "event_id",
    "run_local",
    "run_local_async",
]
