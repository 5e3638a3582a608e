"""The ledger of cross-key budgets: one spend counter per budget, scope and window, shared by
every subtask of a job (and every job of its namespace), in a Redis server.

Keyed state cannot see other keys, so a budget of ``scope: tenant`` or ``scope: job`` counts in
an external store. Every operation is one Lua script, atomic on the server, and names the model
call by its idempotency key (``CallIdentity.digest()``, stable across replays):

* ``reserve`` holds the call's worst case if what is settled, plus what other calls in flight
  hold, plus it stays within the limit; a call already held or already settled is admitted
  again without a second hold (a call re-sent after a crash), so nothing is reserved twice;
* ``settle`` replaces the hold by the reported usage, once: a second settle of one call is a
  no-op (its marker is kept ``SETTLED_TTL_S``), so nothing is counted twice;
* ``release`` drops the hold of a call that failed or was cancelled.

A hold whose process died before settling is dropped after ``reservation_ttl_s`` (its lease), by
the next ``reserve`` of the account. See docs/budgets.md for the bound this gives.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from flink_agents.api.budgets import BudgetLedgerConfig, BudgetLedgerUnavailable

SETTLED_TTL_S = 30 * 24 * 3600
"""How long a call's settlement marker outlives it: a re-sent call settled again within this
is not counted again (a replay of a recorded call never reaches the ledger at all)."""
DAY_TTL_S = 3 * 24 * 3600
"""A day window's keys expire this long after their last write: the day is over by then."""

# KEYS: settled amount, holds (hash: call -> amount), leases (zset: call -> expiry ms), the
# call's settlement marker. ARGV: call, amount, limit, lease ms, window ttl s (0: none).
# Returns {admitted 0/1, what the account held before (settled + holds), as text}.
_RESERVE = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now_ms)
for _, call in ipairs(lapsed) do redis.call('HDEL', KEYS[2], call) end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now_ms)
local held = tonumber(redis.call('GET', KEYS[1]) or '0')
for _, amount in ipairs(redis.call('HVALS', KEYS[2])) do held = held + tonumber(amount) end
if redis.call('EXISTS', KEYS[4]) == 1 or redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then
  return {1, tostring(held)}
end
if held + tonumber(ARGV[2]) > tonumber(ARGV[3]) then
  return {0, tostring(held)}
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[3], now_ms + tonumber(ARGV[4]), ARGV[1])
if tonumber(ARGV[5]) > 0 then
  redis.call('EXPIRE', KEYS[2], ARGV[5])
  redis.call('EXPIRE', KEYS[3], ARGV[5])
end
return {1, tostring(held)}
"""

# KEYS: as _RESERVE. ARGV: call, amount, settled ttl s, window ttl s (0: none).
# Returns {settled before, settled after, as text}; equal when the call was settled already.
_SETTLE = """
local before = redis.call('GET', KEYS[1]) or '0'
if redis.call('EXISTS', KEYS[4]) == 1 then
  return {before, before}
end
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
local after = redis.call('INCRBYFLOAT', KEYS[1], ARGV[2])
redis.call('SET', KEYS[4], ARGV[2], 'EX', ARGV[3])
if tonumber(ARGV[4]) > 0 then redis.call('EXPIRE', KEYS[1], ARGV[4]) end
return {before, after}
"""

# KEYS: holds, leases. ARGV: call.
_RELEASE = """
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
"""


@dataclass(frozen=True)
class LedgerAccount:
    """One counter of the ledger: ``budget``'s spend of ``scope`` (``job`` or ``tenant:<canonical
    JSON of the tenant>``) in ``window`` (``total`` or a UTC day), under ``namespace``."""

    namespace: str
    budget: str
    scope: str
    window: str

    @property
    def expires(self) -> bool:
        """A day's counter expires once the day is long over; a total's never does."""
        return self.window != "total"

    def key(self, part: str) -> str:
        # One hash tag per account: all its keys live in one slot of a Redis cluster, so its
        # scripts may touch them together.
        return f"{self.namespace}:budget:{{{self.budget}|{self.scope}|{self.window}}}:{part}"


@dataclass(frozen=True)
class Admission:
    """A reservation's answer: ``admitted`` or not, and what the account held before it
    (settled spend and others' holds)."""

    admitted: bool
    held: float


class BudgetLedger(Protocol):
    """The cross-key counters' store; every method raises :class:`BudgetLedgerUnavailable`
    when the store does not answer."""

    def reserve(self, account: LedgerAccount, call: str, amount: float, limit: float) -> Admission:
        """Hold ``amount`` for ``call`` if the account stays within ``limit`` with it."""

    def settle(self, account: LedgerAccount, call: str, amount: float) -> tuple[float, float]:
        """``call`` spent ``amount``: its hold replaced by it, once. Returns the account's
        settled spend before and after."""

    def release(self, account: LedgerAccount, call: str) -> None:
        """``call`` failed or was cancelled: its hold is dropped."""

    def spent(self, account: LedgerAccount) -> float:
        """The account's settled spend."""


class RedisBudgetLedger:
    """:class:`BudgetLedger` in a Redis server (the ``ledger`` extra's ``redis`` client)."""

    def __init__(self, config: BudgetLedgerConfig) -> None:
        try:
            import redis
        except ImportError as missing:
            raise ImportError(
                "budgets of scope tenant or job count in Redis: install the client with "
                "pip install 'flink-agents-py[ledger]'"
            ) from missing
        self.config = config
        password = os.environ.get(config.password_env) if config.password_env else None
        self._errors: tuple[type[Exception], ...] = (
            redis.exceptions.ConnectionError,
            redis.exceptions.TimeoutError,
        )
        self._client: Any = redis.Redis.from_url(
            config.url,
            password=password,
            socket_timeout=config.timeout_s,
            socket_connect_timeout=config.timeout_s,
            decode_responses=True,
        )
        self._reserve = self._client.register_script(_RESERVE)
        self._settle = self._client.register_script(_SETTLE)
        self._release = self._client.register_script(_RELEASE)

    def reserve(self, account: LedgerAccount, call: str, amount: float, limit: float) -> Admission:
        lease_ms = self.config.reservation_ttl_s * 1000
        window_ttl = DAY_TTL_S if account.expires else 0
        admitted, held = self._answer(
            lambda: self._reserve(
                keys=self._keys(account, call),
                args=[call, repr(amount), repr(limit), lease_ms, window_ttl],
            )
        )
        return Admission(admitted=int(admitted) == 1, held=float(held))

    def settle(self, account: LedgerAccount, call: str, amount: float) -> tuple[float, float]:
        window_ttl = DAY_TTL_S if account.expires else 0
        before, after = self._answer(
            lambda: self._settle(
                keys=self._keys(account, call), args=[call, repr(amount), SETTLED_TTL_S, window_ttl]
            )
        )
        return float(before), float(after)

    def release(self, account: LedgerAccount, call: str) -> None:
        keys = [account.key("held"), account.key("leases")]
        self._answer(lambda: self._release(keys=keys, args=[call]))

    def spent(self, account: LedgerAccount) -> float:
        return float(self._answer(lambda: self._client.get(account.key("spent"))) or 0.0)

    def _keys(self, account: LedgerAccount, call: str) -> list[str]:
        return [
            account.key("spent"),
            account.key("held"),
            account.key("leases"),
            account.key(f"settled:{call}"),
        ]

    def _answer(self, ask: Callable[[], Any]) -> Any:
        """What the server answers ``ask``; a server that does not answer is reported as
        :class:`BudgetLedgerUnavailable`."""
        try:
            return ask()
        except self._errors as error:
            raise BudgetLedgerUnavailable(
                f"the budget ledger at {self.config.url} did not answer ({error})"
            ) from error
