"""An external sub-agent behind HTTP (a provider of work, like a model: it needs httpx).

Protocol: one ``POST`` to ``url`` per attempt with the JSON body
``{"input": ..., "session_id": ..., "call_id": ...}`` and the header ``Idempotency-Key``, the
digest of the call's durable identity (the same on every attempt and every replay of the call,
different for every other call). The service answers ``2xx`` with ``{"result": ...}``, or with
``{"error": "..."}`` for a failure it reports itself.

Faults. Each attempt has ``timeout_seconds``. A connection error, a timeout and the statuses
408, 429 and 5xx are transient: the call is attempted again (with backoff, honouring
``Retry-After``) within the durable attempt budget ``retry.max_attempts``, counted across
restarts. Any other status, an ``{"error": ...}`` answer, a body outside the protocol and a spent
budget fail the call for good: a FAILED delegation. A cancelled caller leaves the call PENDING;
it is sent again on replay with the same idempotency key.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from pydantic import Field

from flink_agents.api.attempts import RetryPolicy
from flink_agents.api.context import RunnerContext
from flink_agents.api.subagents import SubagentError, SubagentRequest, SubagentSetup
from flink_agents.providers._response_cap import DEFAULT_MAX_RESPONSE_BYTES, response_cap
from flink_agents.providers.retry_loop import (
    AttemptFailure,
    AttemptsFailed,
    is_retryable_status,
    parse_retry_after,
    retry_within_budget,
)

IDEMPOTENCY_HEADER = "Idempotency-Key"
_MAX_BODY_CHARS = 500


class HttpSubagent(SubagentSetup):
    """A sub-agent served by an HTTP endpoint (see the module docstring for the protocol).

    A call is sent again (after a transient failure, or after a failover when its outcome was
    not recorded) with the same idempotency key: the service must use it to answer a repeated
    call without repeating its work.
    """

    url: str = Field(min_length=1)
    timeout_seconds: float = Field(
        default=60.0, gt=0, description="Limit of one attempt, from connecting to the last byte."
    )
    retry: RetryPolicy = Field(
        default_factory=RetryPolicy, description="Attempts and backoff for transient failures."
    )
    headers: dict[str, str] = Field(
        default_factory=dict, description='Extra headers; secrets as {"env": "NAME"} references.'
    )
    max_response_bytes: int = Field(
        default=DEFAULT_MAX_RESPONSE_BYTES,
        gt=0,
        description="The most bytes of an answer's body read; a larger one fails the call "
        "(final, not retried).",
    )

    async def invoke(self, request: SubagentRequest, ctx: RunnerContext) -> Any:
        body = {
            "input": request.input,
            "session_id": request.session_id,
            "call_id": request.call_id,
        }
        headers = {**self.headers, IDEMPOTENCY_HEADER: request.delegation_key}
        hooks = {"response": [response_cap(self.max_response_bytes, httpx.AsyncByteStream)]}
        async with httpx.AsyncClient(timeout=self.timeout_seconds, event_hooks=hooks) as client:
            try:
                response = await retry_within_budget(
                    lambda: self._attempt(client, body, headers), self.retry
                )
            except AttemptsFailed as failed:
                # No attempt count in the text a model is shown: after a crash it would count
                # the attempt the crash cut off too, and differ from the no-fault run's.
                raise SubagentError(f"{self.url} failed: {failed.reason}") from None
        return self._result(response)

    async def _attempt(
        self, client: httpx.AsyncClient, body: dict[str, Any], headers: dict[str, str]
    ) -> httpx.Response:
        """One POST within ``timeout_seconds``; a failed one raises :class:`AttemptFailure`."""
        try:
            # httpx limits each read, not the whole exchange: a trickling answer would not end.
            response = await asyncio.wait_for(
                client.post(self.url, json=body, headers=headers), self.timeout_seconds
            )
        except asyncio.TimeoutError:
            raise AttemptFailure(
                f"no answer within {self.timeout_seconds} s", retryable=True
            ) from None
        except httpx.TransportError as exc:
            raise AttemptFailure.transport("request failed", exc) from None
        if not response.is_success:
            status = response.status_code
            raise AttemptFailure(
                f"answered {status}: {response.text[:_MAX_BODY_CHARS]}",
                retryable=is_retryable_status(status),
                status=status,
                retry_after=parse_retry_after(response.headers.get("retry-after")),
            )
        return response

    def _result(self, response: httpx.Response) -> Any:
        """The ``result`` of a 2xx answer; a reported error or a body outside the protocol
        raises :class:`SubagentError` (final: the service answered)."""
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
