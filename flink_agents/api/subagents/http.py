"""An external sub-agent behind HTTP.

Protocol: one ``POST`` to ``url`` per call with the JSON body
``{"input": ..., "session_id": ..., "call_id": ...}`` and the header ``Idempotency-Key``, the
digest of the call's durable identity (the same on every replay of the call, different for
every other call). The service answers ``2xx`` with ``{"result": ...}``, or with
``{"error": "..."}`` for a failure it reports itself; any other answer is a failed call.
"""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import Field

from flink_agents.api.context import RunnerContext
from flink_agents.api.subagents.delegation import SubagentError, SubagentRequest, SubagentSetup

IDEMPOTENCY_HEADER = "Idempotency-Key"
_MAX_BODY_CHARS = 500


class HttpSubagent(SubagentSetup):
    """A sub-agent served by an HTTP endpoint (see the module docstring for the protocol).

    A call is sent again after a failover only if its outcome was not recorded; the service
    should use the idempotency key to answer a repeated call without repeating its work.
    """

    url: str = Field(min_length=1)
    timeout_seconds: float = Field(default=60.0, gt=0)
    headers: dict[str, str] = Field(
        default_factory=dict, description='Extra headers; secrets as {"env": "NAME"} references.'
    )

    async def invoke(self, request: SubagentRequest, ctx: RunnerContext) -> Any:
        body = {
            "input": request.input,
            "session_id": request.session_id,
            "call_id": request.call_id,
        }
        headers = {**self.headers, IDEMPOTENCY_HEADER: request.delegation_key}
        async with httpx.AsyncClient(timeout=self.timeout_seconds) as client:
            response = await client.post(self.url, json=body, headers=headers)
        if not response.is_success:
            raise SubagentError(
                f"{self.url} answered {response.status_code}: {response.text[:_MAX_BODY_CHARS]}"
            )
        try:
            answer = response.json()
        except ValueError:
            raise SubagentError(
                f"{self.url} answered with no JSON: {response.text[:_MAX_BODY_CHARS]}"
            ) from None
        if isinstance(answer, dict) and "error" in answer:
            raise SubagentError(f"{self.url} reported: {answer['error']}")
        if not (isinstance(answer, dict) and "result" in answer):
            raise SubagentError(
                f"{self.url} answered without 'result': {response.text[:_MAX_BODY_CHARS]}"
            )
        return answer["result"]
