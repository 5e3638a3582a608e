"""Sub-agents: AGENT resources that an action, or a chat model, delegates work to.

Everything about sub-agents on the authoring side lives here:

* :mod:`.delegation` -- the contract: :class:`SubagentSetup` (the resource),
  :class:`Subagent` (submit / await from an action), :class:`SubagentResult`,
  :class:`InternalSubagent` (an agent of this plan run as a child scope);
* :mod:`.offers` -- how sub-agents are offered to a chat model as ``subagent_<name>`` tools.

``HttpSubagent``, a sub-agent that is an external HTTP service, is a provider:
:mod:`flink_agents.providers.http_subagent`.

The runtime side (a delegation's ids and durable run, child scopes, dispatch) is
:mod:`flink_agents.runtime.delegated_calls`, :mod:`flink_agents.runtime.scopes` and the engine;
see docs/subagents.md.
"""

from typing import TYPE_CHECKING

from flink_agents.api.moved import moved_names_getattr
from flink_agents.api.subagents.delegation import (
    SUBAGENT_TOOL_PREFIX,
    TEXT_INPUT_SCHEMA,
    BaseSubagentCallable,
    InternalSubagent,
    Subagent,
    SubagentError,
    SubagentRequest,
    SubagentResult,
    SubagentSetup,
)

__all__ = [
    "SUBAGENT_TOOL_PREFIX",
    "TEXT_INPUT_SCHEMA",
    "BaseSubagentCallable",
    "InternalSubagent",
    "Subagent",
    "SubagentError",
    "SubagentRequest",
    "SubagentResult",
    "SubagentSetup",
]

if not TYPE_CHECKING:  # hidden from mypy, which would otherwise accept any name of this module
    __getattr__ = moved_names_getattr(__name__)  # an old name says where it went
