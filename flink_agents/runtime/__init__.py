"""The run engine: per-key runs, event dispatch, memory, and hosting them for a caller.

No Flink here: :class:`RunEngine` runs a plan's actions on one asyncio loop,
:class:`~flink_agents.runtime.host.EngineHost` drives it from a synchronous caller, and
:func:`run_local` runs a plan over a list of inputs in this process.
"""

from typing import TYPE_CHECKING, NoReturn

from flink_agents.api.moved import missing_name_error
from flink_agents.runtime.context import ActionContext, DuplicateCallIdError, RunState
from flink_agents.runtime.engine import ActionError, RunEngine, RunResult
from flink_agents.runtime.local import run_local, run_local_async
from flink_agents.runtime.resources import ResourceRegistry
from flink_agents.runtime.state import KeyState, PendingInput

__all__ = [
    "ActionContext",
    "ActionError",
    "DuplicateCallIdError",
    "KeyState",
    "PendingInput",
    "ResourceRegistry",
    "RunEngine",
    "RunResult",
    "RunState",
    "run_local",
    "run_local_async",
]

if not TYPE_CHECKING:  # hidden from mypy, which would otherwise accept any name of this module

    def __getattr__(name: str) -> NoReturn:
        """A name this package exported in an earlier version says where it is now."""
        raise missing_name_error(__name__, name)
