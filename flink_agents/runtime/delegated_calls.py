"""How the engine carries a delegation out: the call's ids, its durable run, its result.

The authoring side (:mod:`flink_agents.api.subagents`) declares sub-agents and gives actions the
``Subagent`` handle; the action context implements its ``Delegating`` seam with :func:`submit`.

Identities. Every call has ``(session_id, call_id)``. A session id is a digest of the run, the
event, the action and the ordinal of the session within the action invocation, or one the caller
gives to continue a session. The call id is ``<ordinal>@<invocation>``: the ordinal of the call
in its session within this action invocation, tagged with a digest of the run, event and action,
so a session continued by a later run never sends a ``(session_id, call_id)`` again. The durable
call id encodes the sub-agent name, the session and the call id, so two delegations never share a
recorded outcome, and the durable identity (which also holds the run, event and action) is unique
even when a caller reuses a session id.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from flink_agents.api.context import (
    InDoubtCallError,
    InfrastructureError,
    RecordedCallError,
    RunnerContext,
)
from flink_agents.api.subagents import (
    BaseSubagentCallable,
    SubagentRequest,
    SubagentResult,
    SubagentSetup,
)
from flink_agents.durable.identity import RunId, digest


def delegation_call_id(name: str, session_id: str, call_id: str) -> str:
    """The durable call id of one delegation (structured JSON: no separator to collide on)."""
    return json.dumps(["subagent", name, session_id, call_id], separators=(",", ":"))


class DelegationIds:
    """The session and call ids one action invocation hands out: never random, the same on
    every replay."""

    def __init__(self, run_id: RunId, event_id: str, action: str) -> None:
        self._invocation = [run_id.as_list(), event_id, action]
        self._sessions = 0
        self._session_calls: dict[str, int] = {}
        self._invocation_tag: str | None = None

    def next_session_id(self) -> str:
        """A new session id: the run, event, action and the session's ordinal, digested."""
        ordinal = self._sessions
        self._sessions += 1
        return f"session-{digest(['session', *self._invocation, ordinal])}"

    def next_call_id(self, session_id: str) -> str:
        """The id of the next call in ``session_id``: ``"<ordinal>@<invocation>"``."""
        # Ordinals restart in every invocation; the invocation's tag keeps a session continued
        # by a later run (or by another event, action or key) from sending an id again. No
        # counter in memory: a run that fails drops its memory writes, not its sent calls.
        ordinal = self._session_calls.get(session_id, 0) + 1
        self._session_calls[session_id] = ordinal
        if self._invocation_tag is None:
            self._invocation_tag = digest(["calls", *self._invocation])[:16]
        return f"{ordinal}@{self._invocation_tag}"


def submit(
    ctx: RunnerContext,
    ids: DelegationIds,
    name: str,
    setup: SubagentSetup,
    input: Any,
    session_id: str | None,
) -> asyncio.Future[SubagentResult[Any]]:
    """Start one call to the sub-agent ``name``; ids are assigned now, in submit order, so they
    do not depend on scheduling."""
    session = session_id if session_id is not None else ids.next_session_id()
    call_id = ids.next_call_id(session)
    durable_call_id = delegation_call_id(name, session, call_id)
    request = SubagentRequest(
        name=name,
        input=input,
        session_id=session,
        call_id=call_id,
        durable_call_id=durable_call_id,
        delegation_key=ctx.durable_call_key(durable_call_id),
    )
    return asyncio.ensure_future(run(ctx, setup.make_callable(request, ctx)))


async def run(ctx: RunnerContext, call: BaseSubagentCallable) -> SubagentResult[Any]:
    """Run ``call`` through durable execution; the work's failure becomes a failed result.

    An :class:`~flink_agents.api.context.InfrastructureError` propagates to the action.
    """
    request = call.request
    try:
        return await ctx.durable_execute_async(
            call,
            request,
            call_id=request.durable_call_id,
            reconciler=call.reconcile if call.reconciler is not None else None,
            result_type=call.setup.result_model(),
            in_doubt=call.in_doubt,
        )
    except InfrastructureError:
        raise
    except RecordedCallError as exc:
        # The recorded message is the live one (a SubagentError's text): hand it back as is.
        return SubagentResult[Any](success=False, error_message=exc.message)
    except InDoubtCallError as exc:
        # Recorded as its text: without a trace, so a later replay reads the same.
        return SubagentResult[Any](success=False, error_message=str(exc))
    except Exception as exc:
        return SubagentResult.failure(exc)
