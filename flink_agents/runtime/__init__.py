"""The run engine: per-key runs, event dispatch, memory, and hosting them for a caller.

No Flink here: :class:`RunEngine` runs a plan's actions on one asyncio loop,
:class:`~flink_agents.runtime.host.EngineHost` drives it from a synchronous caller, and
:func:`run_local` runs a plan over a list of inputs in this process. Every host builds its engine
and durable calls with :meth:`Runtime.build`, from one :class:`RuntimeSettings`.
"""

from typing import TYPE_CHECKING

from flink_agents.api.moved import moved_names_getattr
from flink_agents.runtime.action_context import ActionContext, DuplicateCallIdError, RunState
from flink_agents.runtime.assembly import Runtime
from flink_agents.runtime.engine import ActionError, RunEngine, RunResult
from flink_agents.runtime.json_records import OutputRecord, outputs_of
from flink_agents.runtime.local import run_local, run_local_async
from flink_agents.runtime.options import OperatorOptions
from flink_agents.runtime.resource_registry import ResourceRegistry
from flink_agents.runtime.settings import RuntimeSettings
from flink_agents.runtime.state import KeyState, PendingInput
from flink_agents.runtime.typed_outputs import DeadLetter

__all__ = [
    "ActionContext",
    "ActionError",
    "DeadLetter",
    "DuplicateCallIdError",
    "KeyState",
    "OperatorOptions",
    "OutputRecord",
    "PendingInput",
    "ResourceRegistry",
    "RunEngine",
    "RunResult",
    "RunState",
    "Runtime",
    "RuntimeSettings",
    "outputs_of",
    "run_local",
    "run_local_async",
]

if not TYPE_CHECKING:  # hidden from mypy, which would otherwise accept any name of this module
    __getattr__ = moved_names_getattr(__name__)  # an old name says where it went
