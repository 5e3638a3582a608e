"""Sub-agents: AGENT resources that an action, or a chat model, delegates work to.

Everything about sub-agents on the authoring side lives here:

* :mod:`.delegation` -- the contract: :class:`SubagentSetup` (the resource),
  :class:`Subagent` (submit / await from an action), :class:`SubagentResult`,
  :class:`InternalSubagent` (an agent of this plan run as a child scope);
* :mod:`.offers` -- how sub-agents are offered to a chat model as ``subagent_<name>`` tools;
* :mod:`.http` -- :class:`HttpSubagent`, a sub-agent that is an external HTTP service.

The runtime side (child scopes, dispatch) is :mod:`flink_agents.runtime.scopes` and the engine;
see docs/subagents.md.
"""

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
from flink_agents.api.subagents.http import IDEMPOTENCY_HEADER, HttpSubagent

__all__ = [
    "IDEMPOTENCY_HEADER",
    "SUBAGENT_TOOL_PREFIX",
    "TEXT_INPUT_SCHEMA",
    "BaseSubagentCallable",
    "HttpSubagent",
    "InternalSubagent",
    "Subagent",
    "SubagentError",
    "SubagentRequest",
    "SubagentResult",
    "SubagentSetup",
]
