"""What the failover tests count as "completed before the failure".

A call answered at least :data:`RECORDED_WITHIN_S` before an injected failure has had its
outcome recorded in the store by then (an action waits for the store's acknowledgement, a few
ms on a local broker), so a replay must hand it back: a request for it after the failure is a
completed call re-invoked. A call answered closer to the failure may have been in flight, and
may be sent again.
"""

from __future__ import annotations

RECORDED_WITHIN_S = 1.0


def recorded_before(failed_at: float, answered_at: float | None) -> bool:
    """Whether a call answered at ``answered_at`` (None: never answered) had its outcome
    recorded before the failure at ``failed_at`` (both ``time.time()``)."""
    return answered_at is not None and answered_at < failed_at - RECORDED_WITHIN_S
