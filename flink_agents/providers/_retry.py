"""Model calls retried within the durable call's attempt budget.

The loop and the budget (attempts made before a restart count) are
:mod:`flink_agents.providers.retry_loop`, shared with external sub-agents; this module names a
model call's final failure as a :class:`ModelCallError`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any, TypeVar

from flink_agents.api.attempts import RetryPolicy
from flink_agents.providers._http_errors import CallLabel, ModelCallError
from flink_agents.providers.retry_loop import AttemptsFailed, retry_within_budget

T = TypeVar("T")

__all__ = ["RetryPolicy", "call_with_retries"]


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    label: CallLabel,
    gate: Callable[[], AbstractAsyncContextManager[Any]] = nullcontext,
) -> T:
    """Run ``attempt`` until it succeeds, fails for good, or the attempt budget is spent.

    ``attempt`` raises :class:`~flink_agents.providers.retry_loop.AttemptFailure` on failure;
    anything else propagates unchanged. Each attempt runs inside ``gate()``, entered before it is
    counted. Raises :class:`ModelCallError` when the call fails.
    """
    try:
        return await retry_within_budget(attempt, policy, gate)
    except AttemptsFailed as failed:
        last = failed.last
        raise ModelCallError(
            label,
            failed.reason,
            attempts=failed.attempts,
            status=last.status if last else None,
            request_id=last.request_id if last else None,
        ) from None
