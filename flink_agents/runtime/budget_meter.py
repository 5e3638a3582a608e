"""The budget meter: what each key's model and embedding calls spent, and whether a new call
may go.

:class:`BudgetMeter` is the :class:`~flink_agents.durable.meter.CallMeter` of an agent with
``budgets`` (runtime/assembly.py builds it). Its counters are derived, never kept on the side:

* a key's **finished** runs: :class:`KeySpend`, saved with the key's state
  (:class:`~flink_agents.runtime.state.KeyState`, committed when a run ends -- with outputs or
  an error output -- exactly like ``seq`` and short-term memory);
* the **running** run: the sum of its calls' recorded spend, counted as each call is settled
  live or handed back on replay. A run replayed after a restore starts from nothing and counts
  its recorded calls again, so the key's counter after a restore is the sum of recorded spend:
  nothing counted twice (the saved state holds no spend of an unfinished run), nothing lost
  (every recorded call of the replayed run is handed back and counted);
* **reservations**: the worst case of each call in flight (prompt estimate + ``max_tokens``),
  held from before the call is sent until it is settled with its usage or released, so
  concurrent calls of one key cannot together overshoot a budget.

Budgets of ``scope: tenant`` or ``scope: job`` count across keys, in the budgets' ledger
(runtime/budget_ledger.py): a new call is reserved there too, by its idempotency key, and
settled or released there with the key's own reservation.

Only new calls are checked (a recorded call was paid: it replays whatever today's budget
says). See docs/budgets.md.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field

from flink_agents.api.budgets import (
    Budget,
    BudgetApprovalNeeded,
    BudgetExceeded,
    BudgetLedgerUnavailable,
    Budgets,
    CallSpend,
    PriceTable,
)
from flink_agents.api.chat import PROMPT_CHARS_PER_TOKEN, ChatMessage, ChatRequest
from flink_agents.api.chat import estimated_prompt_tokens as _estimated_tokens
from flink_agents.api.chat_models import ChatModelConnection, ChatModelSetup
from flink_agents.api.embeddings import EmbeddingModelSetup, Embeddings
from flink_agents.api.long_term_memory import MemoryHits, search_memory_set
from flink_agents.api.resources import ResourceType
from flink_agents.api.subagents.delegation import BaseSubagentCallable, InternalSubagent
from flink_agents.api.waits import Decision
from flink_agents.durable.call import DurableCall
from flink_agents.durable.identity import RunId, canonical_json
from flink_agents.durable.store import CallResult
from flink_agents.observability import BudgetDecision
from flink_agents.runtime.budget_ledger import BudgetLedger, LedgerAccount, RedisBudgetLedger

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Amount:
    """Tokens (in + out) and money spent (a dataclass: added up several times a call)."""

    tokens: int = 0
    cost: float = 0.0

    def plus(self, other: Amount) -> Amount:
        return Amount(tokens=self.tokens + other.tokens, cost=self.cost + other.cost)

    def minus(self, other: Amount) -> Amount:
        return Amount(tokens=self.tokens - other.tokens, cost=self.cost - other.cost)

    def of(self, budget: Budget) -> float:
        """This amount in ``budget``'s unit."""
        return float(self.tokens) if budget.unit == "tokens" else self.cost

    @classmethod
    def spent(cls, spend: CallSpend) -> Amount:
        return cls(tokens=spend.tokens, cost=spend.cost or 0.0)


_NOTHING = Amount()


class KeySpend(BaseModel):
    """What a key's finished runs spent: in total, on the latest UTC day any call of them
    was recorded (``day``, ISO date), and, for sliding windows, by the second their calls were
    recorded (``recent``: only the seconds the longest sliding window may still reach, so at
    most its ``period_s`` entries). Saved with the key's state."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    total: Amount = Field(default_factory=Amount)
    day: str | None = None
    on_day: Amount = Field(default_factory=Amount)
    recent: dict[int, Amount] = Field(default_factory=dict, exclude_if=lambda recent: not recent)
    agents: dict[str, KeySpend] = Field(default_factory=dict, exclude_if=lambda agents: not agents)
    """The same for each sub-agent with budgets: what the calls made while it ran spent."""

    def with_run(self, run: _Tally, since: int | None) -> KeySpend:
        """This spend with a finished ``run``'s; ``recent`` keeps the seconds after ``since``
        (None: no sliding window, nothing kept)."""
        agents = {
            name: self.agents.get(name, _NO_SPEND).with_run(run.agents.get(name, _Tally()), since)
            for name in self.agents.keys() | run.agents.keys()
        }
        total, day, on_day = self.total, self.day, self.on_day
        for when in sorted(run.by_day):
            amount = run.by_day[when]
            total = total.plus(amount)
            if day is None or when > day:
                day, on_day = when, amount
            elif when == day:
                on_day = on_day.plus(amount)
        recent: dict[int, Amount] = {}
        if since is not None:
            recent = {at: amount for at, amount in self.recent.items() if at > since}
            for at, amount in run.by_second.items():
                if at > since:
                    recent[at] = recent.get(at, _NOTHING).plus(amount)
        return KeySpend(total=total, day=day, on_day=on_day, recent=recent, agents=agents)

    def on(self, day: str) -> Amount:
        return self.on_day if self.day == day else _NOTHING

    def after(self, since: int) -> Amount:
        """What the calls recorded after second ``since`` spent."""
        return _sum(amount for at, amount in self.recent.items() if at > since)


_NO_SPEND = KeySpend()


@dataclass
class _Tally:
    """Calls' spend by the UTC day and the second they were recorded, and by the sub-agents
    with budgets they were made in (``agents``: each its own tally)."""

    by_day: dict[str, Amount] = field(default_factory=dict)
    by_second: dict[int, Amount] = field(default_factory=dict)
    agents: dict[str, _Tally] = field(default_factory=dict)

    def add(self, day: str, at: int, amount: Amount, agents: Iterable[str] = ()) -> None:
        """Count ``amount``, and in the tallies of ``agents``."""
        self.by_day[day] = self.by_day.get(day, _NOTHING).plus(amount)
        self.by_second[at] = self.by_second.get(at, _NOTHING).plus(amount)
        for name in agents:
            self.agents.setdefault(name, _Tally()).add(day, at, amount)

    @property
    def total(self) -> Amount:
        return _sum(self.by_day.values())

    def after(self, since: int) -> Amount:
        """What the calls recorded after second ``since`` spent."""
        return _sum(amount for at, amount in self.by_second.items() if at > since)


@dataclass
class _RunSpend(_Tally):
    """A running run's spend (its calls', settled or replayed); ``token`` is its key's
    canonical JSON (the meter's per-key dicts are keyed by it), ``key`` and ``input`` what a
    tenant is read from."""

    token: str = ""
    key: Any = None
    input: Any = None


_NO_CALLS = _Tally()


def _sum(amounts: Iterable[Amount]) -> Amount:
    total = _NOTHING
    for amount in amounts:
        total = total.plus(amount)
    return total


MeteredKind = Literal["chat", "embedding"]
"""The calls a meter counts: a chat model's and an embedding model's."""


@dataclass(frozen=True)
class _Delegated:
    """An internal sub-agent running for the delegation ``key`` (its call's digest)."""

    agent: str
    key: str


_SUBAGENTS: ContextVar[tuple[_Delegated, ...]] = ContextVar("metered_subagents", default=())
"""The internal sub-agents running where a call is made, outermost first (the engine sets it
for a delegation's duration: :func:`metered_subagent`)."""


@contextmanager
def metered_subagent(agent: str, delegation_key: str) -> Iterator[None]:
    """The calls made inside this block are made in sub-agent ``agent``, delegated by the call
    ``delegation_key`` (within whichever sub-agents run around it): its budgets meter them, and
    the delegation's record keeps what they spent."""
    token = _SUBAGENTS.set((*_SUBAGENTS.get(), _Delegated(agent, delegation_key)))
    try:
        yield
    finally:
        _SUBAGENTS.reset(token)


_DECISIONS: ContextVar[Mapping[str, Decision] | None] = ContextVar("budget_decisions", default=None)
"""Decisions on calls that asked for approval over a budget, by the call's identity digest
(set by the action's context around the call made again: :func:`deciding`)."""


@contextmanager
def deciding(call: DurableCall, decision: Decision) -> Iterator[None]:
    """``call``, made inside this block, goes with ``decision`` on the approval it asked for."""
    token = _DECISIONS.set({**(_DECISIONS.get() or {}), call.identity.digest(): decision})
    try:
        yield
    finally:
        _DECISIONS.reset(token)


@dataclass(frozen=True)
class _Limit:
    """A budget of the key, of the top agent (``agent`` None) or of a sub-agent; a sub-agent's
    is named ``agent/name`` (in errors and records)."""

    budget: Budget
    agent: str | None = None


@dataclass(frozen=True)
class _Chain:
    """What meters a call made in the sub-agents ``agents``: the key's budgets of the top
    agent and of those sub-agents with budgets (``metered``), and the output tokens reserved
    for a call without ``max_tokens`` (the largest any of them assumes)."""

    agents: tuple[str, ...]
    metered: tuple[str, ...]
    limits: tuple[_Limit, ...]
    assumed_max_tokens: int


@dataclass(frozen=True)
class _Priced:
    """A metered call about to be sent: what is sent, of which kind, to which model, and its
    worst case."""

    call: DurableCall
    kind: MeteredKind
    model: str | None
    worst: Amount


class BudgetMeter:
    """Counts model calls' spend per run and key and checks new calls against ``budgets``
    (see the module docstring). ``clock`` (seconds since the epoch) dates new calls for the
    ``day`` window; ``on_record`` (the event log's ``budget_noted``) is told refusals,
    fallbacks and soft thresholds reached. ``ledger`` counts the budgets of scope tenant and
    job (default: a :class:`RedisBudgetLedger` of ``budgets.ledger``)."""

    def __init__(
        self,
        budgets: Budgets,
        *,
        clock: Callable[[], float] = time.time,
        on_record: Callable[[RunId, BudgetDecision, Budget, float], None] | None = None,
        ledger: BudgetLedger | None = None,
        subagents: Mapping[str, Budgets] | None = None,
        prices: PriceTable | None = None,
    ) -> None:
        self.budgets = budgets
        self._subagents = dict(subagents or {})
        self._prices = prices or budgets.prices
        self._clock = clock
        self._on_record = on_record
        self._local = [_Limit(budget) for budget in budgets.limits if budget.scope == "key"]
        self._chains: dict[tuple[str, ...], _Chain] = {}
        every = [*budgets.limits, *(b for sub in self._subagents.values() for b in sub.limits)]
        # How far back a key's finished runs' spend is kept by second (None: no sliding window).
        self._longest = max((b.period_s or 0 for b in every), default=0) or None
        self._costs = any(budget.unit == "cost" for budget in every)
        self._shared = [budget for budget in budgets.limits if budget.scope != "key"]
        if ledger is None and self._shared and budgets.ledger is not None:
            ledger = RedisBudgetLedger(budgets.ledger)
        self._ledger = ledger
        self._keys: dict[str, KeySpend] = {}  # by the key's canonical JSON
        self._runs: dict[RunId, _RunSpend] = {}
        # A key's calls in flight, by the key's token and the agent (None: all the key's).
        self._reserved: dict[tuple[str, str | None], Amount] = {}
        self._fallbacks: dict[tuple[int, str], Callable[..., Any]] = {}
        # What the metered calls made inside each running delegation spent, by its key.
        self._delegated: dict[str, list[CallSpend]] = {}

    # --- the key's saved spend -------------------------------------------------------------

    def committed(self, key: Any) -> KeySpend | None:
        """What ``key``'s finished runs spent (None: nothing yet)."""
        return self._keys.get(canonical_json(key))

    def restore(self, key: Any, spend: KeySpend | None) -> None:
        """Install ``key``'s saved spend (a restore)."""
        token = canonical_json(key)
        if spend is None:
            self._keys.pop(token, None)
        else:
            self._keys[token] = spend

    # --- CallMeter -------------------------------------------------------------------------

    def run_admitted(self, run: RunId, input: Any) -> None:
        self._runs[run] = _RunSpend(token=canonical_json(run.key), key=run.key, input=input)

    def run_finished(self, run: RunId) -> None:
        spend = self._runs.pop(run, None)
        if spend is None or not spend.by_day:
            return
        since = int(self._clock()) - self._longest if self._longest is not None else None
        committed = self._keys.get(spend.token, _NO_SPEND)
        self._keys[spend.token] = committed.with_run(spend, since)

    def replayed(self, run: RunId, recorded: CallResult) -> None:
        # Only what was recorded with the call: a call recorded before the agent had budgets
        # carries no spend and counts nothing (docs/budgets.md).
        spend = recorded.spend
        if spend is None:
            return
        if not spend.nested:
            day, at = _recorded_when(spend, recorded)
            spend = spend.model_copy(update={"day": day, "at": at})
        # A delegation handed back: the calls made while its sub-agent ran, in place of it.
        for one in spend.nested or [spend]:
            self._count(run, one)

    def _count(self, run: RunId, spend: CallSpend) -> None:
        """Count a call's recorded ``spend`` for ``run`` and in the delegations running."""
        assert spend.day is not None and spend.at is not None
        metered = [name for name in spend.agents if name in self._subagents]
        self._run(run).add(spend.day, spend.at, Amount.spent(spend), metered)
        for delegation in _SUBAGENTS.get():
            self._delegated.setdefault(delegation.key, []).append(spend)

    def reserve(self, call: DurableCall) -> _Reservation | _Delegation | None:
        if _delegates_internally(call):
            return _Delegation(self, call)
        kind = _kind_of(call)
        if kind is None:
            return None
        run = call.identity.run
        token = self._run(run).token
        chain = self._chain(tuple(delegation.agent for delegation in _SUBAGENTS.get()))
        now = self._clock()
        today = datetime.fromtimestamp(now, timezone.utc).date().isoformat()
        priced = self._priced(call, kind, chain)
        fallback: _Limit | None = None
        # A fallback is a chat connection: an embedding call over a budget is refused.
        falls_back = [
            limit
            for limit in chain.limits
            if limit.budget.on_exhausted == "fallback" and kind == "chat"
        ]
        for limit in falls_back:
            if not self._fits(limit, run, today, priced):
                fallback = limit
                priced = self._priced(self._fallback_call(call, limit.budget), kind, chain)
                break
        # A cross-key fallback budget is asked first (its holds taken), as a key's is checked.
        shared_fallback: tuple[Budget, float] | None = None
        holds: list[_Hold] = []
        if fallback is None and kind == "chat":
            holds, shared_fallback = self._hold_shared_fallbacks(call, today, priced)
            if shared_fallback is not None:
                priced = self._priced(self._fallback_call(call, shared_fallback[0]), kind, chain)
        try:
            asking: list[_Limit] = []
            for limit in chain.limits:
                if limit in falls_back or self._fits(limit, run, today, priced):
                    continue
                if limit.budget.on_exhausted == "approve":
                    asking.append(limit)
                else:
                    self._refuse(run, limit.budget, self._spent(limit, run, today), priced)
            approved_by = self._approved(call, asking, today, priced) if asking else None
            fell_back = fallback is not None or shared_fallback is not None
            holds += self._hold_shared(call, today, priced, fell_back, holds)
        except BaseException:
            self._drop(holds)
            raise
        if fallback is not None:
            shared_fallback = (
                fallback.budget,
                self._window(fallback, run, today).of(fallback.budget),
            )
        if shared_fallback is not None:
            budget, spent = shared_fallback
            logger.info("run %s: budget %r exhausted: %s", run, budget.name, budget.fallback)
            self._record("fallback", run, budget, spent)
        for agent in (None, *chain.metered):
            held = self._reserved.get((token, agent), _NOTHING)
            self._reserved[token, agent] = held.plus(priced.worst)
        reservation = _Reservation(self, run, token, (today, int(now)), priced, holds, chain)
        reservation.approved_by = approved_by
        return reservation

    def _spent(self, limit: _Limit, run: RunId, today: str) -> float:
        """What ``limit``'s window holds with the reservations of the calls it meters."""
        held = self._window(limit, run, today).plus(self._held(self._run(run).token, limit))
        return held.of(limit.budget)

    def _approved(self, call: DurableCall, over: list[_Limit], today: str, priced: _Priced) -> str:
        """Who approved ``call`` over the ``approve`` budgets it does not fit; raises
        :class:`BudgetApprovalNeeded` while nobody has decided, :class:`BudgetExceeded` when
        the decision is not an approval (rejected, or timed out)."""
        run, first = call.identity.run, over[0]
        spent = self._spent(first, run, today)
        decision = (_DECISIONS.get() or {}).get(call.identity.digest())
        if decision is None:
            exceeded = BudgetExceeded(
                first.budget.name,
                self._unit_name(first.budget),
                spent,
                priced.worst.of(first.budget),
                first.budget.limit,
            )
            logger.info("run %s: %s: asking for approval", run, exceeded)
            self._record("approval_asked", run, first.budget, spent)
            raise BudgetApprovalNeeded(first.budget, exceeded, call.identity.call_id)
        if not decision.approved:
            self._refuse(run, first.budget, spent, priced)
        for limit in over:
            self._record("approved", run, limit.budget, self._spent(limit, run, today))
        return decision.by or ""

    def _chain(self, agents: tuple[str, ...]) -> _Chain:
        """What meters a call made in sub-agents ``agents`` (worked out once per chain)."""
        chain = self._chains.get(agents)
        if chain is None:
            metered = tuple(name for name in agents if name in self._subagents)
            limits = [
                _Limit(budget.model_copy(update={"name": f"{name}/{budget.name}"}), name)
                for name in metered
                for budget in self._subagents[name].limits
            ]
            assumed = [self._subagents[name].assumed_max_tokens for name in metered]
            chain = self._chains[agents] = _Chain(
                agents,
                metered,
                (*self._local, *limits),
                max([self.budgets.assumed_max_tokens, *assumed]),
            )
        return chain

    # --- budgets across keys (the ledger) --------------------------------------------------

    def _hold_shared_fallbacks(
        self, call: DurableCall, today: str, priced: _Priced
    ) -> tuple[list[_Hold], tuple[Budget, float] | None]:
        """Reserve ``priced``'s worst case under the cross-key budgets of ``on_exhausted:
        fallback``: their holds, or (their holds released) the first that did not fit, with
        what its account held -- the call then goes to that budget's fallback."""
        holds: list[_Hold] = []
        try:
            for budget in self._shared:
                if budget.on_exhausted != "fallback":
                    continue
                hold, held = self._hold(call, today, budget, priced, budget.limit)
                if hold is not None:
                    holds.append(hold)
                elif held is not None:
                    self._drop(holds)
                    return [], (budget, held)
        except BaseException:
            self._drop(holds)
            raise
        return holds, None

    def _hold_shared(
        self,
        call: DurableCall,
        today: str,
        priced: _Priced,
        fell_back: bool,
        taken: list[_Hold],
    ) -> list[_Hold]:
        """Reserve ``priced``'s worst case in the ledger under every cross-key budget not
        ``taken`` already; raises (the holds taken here released) when one does not fit or
        its ledger is down. A call sent to a fallback is held, not refused, by the fallback
        budgets (as a key's fallback budgets count it without checking it)."""
        done = {id(hold.budget) for hold in taken}
        holds: list[_Hold] = []
        try:
            for budget in self._shared:
                if id(budget) in done:
                    continue
                unbounded = fell_back and budget.on_exhausted == "fallback"
                limit = _UNBOUNDED if unbounded else budget.limit
                hold, held = self._hold(call, today, budget, priced, limit)
                if hold is not None:
                    holds.append(hold)
                elif held is not None:
                    self._refuse(call.identity.run, budget, held, priced)
        except BaseException:
            self._drop(holds)
            raise
        return holds

    def _hold(
        self, call: DurableCall, today: str, budget: Budget, priced: _Priced, limit: float
    ) -> tuple[_Hold | None, float | None]:
        """Reserve ``priced``'s worst case under ``budget`` within ``limit``: the hold, or
        (None, what the account held) when it does not fit, or (None, None) when its ledger
        is down and ``on_unreachable: allow`` lets the call go uncounted by it."""
        run = call.identity.run
        hold = _Hold(budget, self._account(budget, run, today), call.identity.digest())
        try:
            admission = self._ledger_of().reserve(
                hold.account, hold.call, priced.worst.of(budget), limit
            )
        except BudgetLedgerUnavailable as down:
            self._unreachable(run, budget, down)
            return None, None
        return (hold, None) if admission.admitted else (None, admission.held)

    def _account(self, budget: Budget, run: RunId, today: str) -> LedgerAccount:
        assert self.budgets.ledger is not None  # a cross-key budget needs one (Budgets checks)
        namespace = self.budgets.ledger.namespace or run.agent
        window = today if budget.window == "day" else "total"
        if budget.tenant_field is None:
            return LedgerAccount(namespace, budget.name, "job", window)
        tenant = _tenant_of(budget, self._run(run))
        return LedgerAccount(namespace, budget.name, f"tenant:{canonical_json(tenant)}", window)

    def _ledger_of(self) -> BudgetLedger:
        assert self._ledger is not None  # built with the meter when a budget is cross-key
        return self._ledger

    def _unreachable(self, run: RunId, budget: Budget, down: BudgetLedgerUnavailable) -> None:
        """The ledger did not answer a reservation: fail closed (raise), or let the call go
        uncounted by ``budget`` when its ledger says ``on_unreachable: allow``."""
        assert self.budgets.ledger is not None
        if self.budgets.ledger.on_unreachable == "fail":
            raise BudgetLedgerUnavailable(
                f"budget {budget.name!r}: {down}; the call is refused (ledger.on_unreachable: fail)"
            ) from down
        logger.warning(
            "run %s: budget %r: %s; the call goes uncounted by it (ledger.on_unreachable: allow)",
            run,
            budget.name,
            down,
        )

    def _settle_shared(self, reservation: _Reservation, spend: CallSpend | None) -> None:
        """The ledger's holds of ``reservation`` replaced by what the call spent (released
        when it reported nothing); a ledger down now leaves the hold to its lease."""
        if spend is None:
            self._drop(reservation.holds)
            return
        for hold in reservation.holds:
            budget = hold.budget
            try:
                before, after = self._ledger_of().settle(
                    hold.account, hold.call, Amount.spent(spend).of(budget)
                )
            except BudgetLedgerUnavailable as down:
                logger.error(
                    "run %s: budget %r: %s; the call's spend is not counted there (its "
                    "reservation holds until its lease ends)",
                    reservation.run,
                    budget.name,
                    down,
                )
                continue
            threshold = (budget.soft or 1.0) * budget.limit
            if budget.soft is not None and before < threshold <= after:
                logger.warning(
                    "run %s: budget %r at %s of %s",
                    reservation.run,
                    budget.name,
                    after,
                    budget.limit,
                )
                self._record("soft_limit", reservation.run, budget, after)

    def _drop(self, holds: list[_Hold]) -> None:
        """Release ``holds`` in the ledger (a ledger down leaves them to their lease)."""
        for hold in holds:
            try:
                self._ledger_of().release(hold.account, hold.call)
            except BudgetLedgerUnavailable as down:
                logger.warning(
                    "budget %r: %s; its hold ends with its lease", hold.budget.name, down
                )

    def _refuse(self, run: RunId, budget: Budget, spent: float, priced: _Priced) -> None:
        refused = BudgetExceeded(
            budget.name, self._unit_name(budget), spent, priced.worst.of(budget), budget.limit
        )
        logger.warning("run %s: %s", run, refused)
        self._record("refused", run, budget, spent)
        raise refused

    # --- helpers ---------------------------------------------------------------------------

    def _settle(self, reservation: _Reservation, value: Any) -> CallSpend | None:
        spend = self._settle_key(reservation, value)
        self._settle_shared(reservation, spend)
        return spend

    def _settle_key(self, reservation: _Reservation, value: Any) -> CallSpend | None:
        self._release(reservation)
        usage = value.usage if isinstance(value, ChatMessage | Embeddings | MemoryHits) else None
        if usage is None:
            return None
        prices = self._prices
        if reservation.priced.kind == "embedding":
            model = reservation.priced.model
            cost = _embedding_cost(prices, model, usage.input_tokens)
        else:
            # The model that answered, where a routing connection names it; else the one asked.
            model = value.model or reservation.priced.model
            cost = _cost(prices, model, usage.input_tokens, usage.output_tokens)
        spend = CallSpend(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            model=model,
            cost=cost,
            price_version=prices.version if cost is not None and prices else None,
            day=reservation.day,
            at=reservation.at,
            agents=list(reservation.chain.agents),
            approved_by=reservation.approved_by,
        )
        run, day, chain = reservation.run, reservation.day, reservation.chain
        soft = [(b, self._window(b, run, day)) for b in chain.limits if b.budget.soft is not None]
        self._count(run, spend)
        for limit, before in soft:
            self._warn_at_soft(limit, run, before, day)
        return spend

    def _release(self, reservation: _Reservation) -> None:
        for agent in (None, *reservation.chain.metered):
            held = (reservation.token, agent)
            left = self._reserved.get(held, _NOTHING).minus(reservation.priced.worst)
            if left.tokens <= 0 and left.cost <= 1e-12:
                self._reserved.pop(held, None)
            else:
                self._reserved[held] = left

    def _held(self, token: str, limit: _Limit) -> Amount:
        """What the key's calls in flight that ``limit`` meters have reserved."""
        return self._reserved.get((token, limit.agent), _NOTHING)

    def _warn_at_soft(self, limit: _Limit, run: RunId, before: Amount, day: str) -> None:
        budget = limit.budget
        assert budget.soft is not None
        threshold = budget.soft * budget.limit
        after = self._window(limit, run, day).of(budget)
        if before.of(budget) < threshold <= after:
            logger.warning(
                "run %s: budget %r at %.0f%% (%s of %s)",
                run,
                budget.name,
                100 * after / budget.limit,
                after,
                budget.limit,
            )
            self._record("soft_limit", run, budget, after)

    def _unit_name(self, budget: Budget) -> str:
        """``tokens``, or the price table's currency."""
        prices = self._prices
        return "tokens" if budget.unit == "tokens" or prices is None else prices.currency

    def _record(self, decision: BudgetDecision, run: RunId, budget: Budget, spent: float) -> None:
        if self._on_record is not None:
            self._on_record(run, decision, budget, spent)

    def _fits(self, limit: _Limit, run: RunId, today: str, priced: _Priced) -> bool:
        reserved = self._held(self._run(run).token, limit)
        held = self._window(limit, run, today).plus(reserved).plus(priced.worst)
        return held.of(limit.budget) <= limit.budget.limit

    def _window(self, limit: _Limit, run: RunId, today: str) -> Amount:
        """What ``limit``'s current window holds for ``run``'s key (and its agent), without
        reservations."""
        budget, agent, this_run = limit.budget, limit.agent, self._run(run)
        running: _Tally = this_run if agent is None else this_run.agents.get(agent, _NO_CALLS)
        if budget.window == "run":
            return running.total
        committed = self._keys.get(this_run.token, _NO_SPEND)
        if agent is not None:
            committed = committed.agents.get(agent, _NO_SPEND)
        if budget.window == "day":
            return committed.on(today).plus(running.by_day.get(today, _NOTHING))
        if budget.window == "sliding":
            assert budget.period_s is not None  # a sliding window has one (Budget checks)
            since = int(self._clock()) - budget.period_s
            return committed.after(since).plus(running.after(since))
        return committed.total.plus(running.total)

    def _run(self, run: RunId) -> _RunSpend:
        spend = self._runs.get(run)
        if spend is None:  # a host that does not admit runs (calls made directly)
            spend = self._runs[run] = _RunSpend(token=canonical_json(run.key), key=run.key)
        return spend

    def _priced(self, call: DurableCall, kind: MeteredKind, chain: _Chain) -> _Priced:
        """The call's model and worst case, priced: a chat call's prompt's estimated tokens
        and its output tokens (``max_tokens``, else the budgets' ``assumed_max_tokens``); an
        embedding call's texts' estimated tokens."""
        prices = self._prices
        if kind == "embedding":
            setup, texts = _embedding_of(call)
            connection = setup.get_resource(
                setup.connection, ResourceType.EMBEDDING_MODEL_CONNECTION
            )
            model = setup.model or cast(str | None, getattr(connection, "model", None))
            tokens = -(-sum(len(text) for text in texts) // PROMPT_CHARS_PER_TOKEN)
            cost = _embedding_cost(prices, model, tokens)
        else:
            request, chat_connection = _request_of(call)
            model = request.model or cast(str | None, getattr(chat_connection, "model", None))
            prompt = _estimated_tokens(request)
            tokens = prompt + (request.max_tokens or chain.assumed_max_tokens)
            cost = _cost(prices, model, prompt, tokens - prompt)
        if cost is None and self._costs:
            assert prices is not None  # a cost budget needs prices (Budgets checks)
            price = "embedding price" if kind == "embedding" else "price"
            raise ValueError(
                f"model {model!r} has no {price} in price table {prices.version!r}, and a "
                f"budget limits cost: add it to budgets.prices.models (priced: "
                f"{sorted(prices.models)})"
            )
        return _Priced(call, kind, model, Amount(tokens=tokens, cost=cost or 0.0))

    def _fallback_call(self, call: DurableCall, budget: Budget) -> DurableCall:
        """``call`` sent to ``budget``'s fallback connection, which answers with its own model.
        The identity and signature stay the asked call's: a replay hands its answer back."""
        assert budget.fallback is not None
        owner = getattr(call.function, "__self__", None)
        cached = self._fallbacks.get((id(owner), budget.fallback))
        if isinstance(owner, ChatModelSetup):
            if cached is None:
                setup = owner.model_copy(update={"connection": budget.fallback, "model": None})
                cached = self._fallbacks[id(owner), budget.fallback] = setup.chat
            return dataclasses.replace(call, function=cached)
        connection = cast(ChatModelConnection, owner)
        target = connection.get_resource(budget.fallback, ResourceType.CHAT_MODEL_CONNECTION)
        request = cast(ChatRequest, call.args[0]).model_copy(update={"model": None})
        return dataclasses.replace(
            call, function=cast(ChatModelConnection, target).chat, args=(request,)
        )


_UNBOUNDED = sys.float_info.max
"""The ledger limit of a hold that counts a call without checking it."""


@dataclass(frozen=True)
class _Hold:
    """A call's reservation in the ledger: under ``budget``, in ``account``, by ``call`` (its
    idempotency key)."""

    budget: Budget
    account: LedgerAccount
    call: str


class _Reservation:
    """A new call's reserved worst case (durable/meter.py's ``Reservation``): the key's, and
    its ``holds`` in the ledger."""

    __slots__ = (
        "_meter",
        "approved_by",
        "at",
        "chain",
        "day",
        "done",
        "holds",
        "priced",
        "run",
        "token",
    )

    def __init__(
        self,
        meter: BudgetMeter,
        run: RunId,
        token: str,
        when: tuple[str, int],
        priced: _Priced,
        holds: list[_Hold],
        chain: _Chain,
    ) -> None:
        self._meter = meter
        self.run = run
        self.token = token
        self.day, self.at = when  # the UTC day and the second the call counts on
        self.priced = priced
        self.holds = holds
        self.chain = chain
        self.approved_by: str | None = None  # who approved it over an approve budget
        self.done = False

    @property
    def call(self) -> DurableCall:
        return self.priced.call

    def settle(self, value: Any) -> CallSpend | None:
        if self.done:
            return None
        self.done = True
        return self._meter._settle(self, value)

    def release(self) -> CallSpend | None:
        if not self.done:
            self.done = True
            self._meter._release(self)
            self._meter._drop(self.holds)
        return None  # a model call that failed reported no usage


class _Delegation:
    """A delegation to an internal sub-agent (durable/meter.py's ``Reservation``): nothing
    reserved (its sub-agent's calls reserve their own), and what those calls spend kept with
    its outcome, so that a replay handing the delegation back counts them."""

    __slots__ = ("_meter", "call")

    def __init__(self, meter: BudgetMeter, call: DurableCall) -> None:
        self._meter = meter
        self.call = call

    def settle(self, value: Any) -> CallSpend | None:
        return self.release()

    def release(self) -> CallSpend | None:
        nested = self._meter._delegated.pop(self.call.identity.digest(), None)
        return CallSpend(nested=nested) if nested else None


def _tenant_of(budget: Budget, run: _RunSpend) -> Any:
    """The tenant a run counts under for ``budget``: the value of its ``tenant_field`` in the
    run's input, else in its key (an object)."""
    field_name = budget.tenant_field
    for source in (run.input, run.key):
        if isinstance(source, dict) and field_name in source:
            return source[field_name]
    raise ValueError(
        f"budget {budget.name!r} counts per tenant by field {field_name!r}, but neither the "
        f"run's input nor its key {canonical_json(run.key)} has it"
    )


def _delegates_internally(call: DurableCall) -> bool:
    """Whether ``call`` delegates to an internal sub-agent (runs it in this run)."""
    function = call.function
    return isinstance(function, BaseSubagentCallable) and isinstance(
        function.setup, InternalSubagent
    )


def _kind_of(call: DurableCall) -> MeteredKind | None:
    """``chat`` for a call of a chat model's ``chat``, ``embedding`` for one of an embedding
    model's ``embed_batch`` (bound, or its class's with the setup as first argument); None
    for the calls a meter does not count."""
    name = getattr(call.function, "__name__", None)
    owner = getattr(call.function, "__self__", None)
    if name == "chat" and isinstance(owner, ChatModelSetup | ChatModelConnection):
        return "chat"
    if name == "embed_batch" and isinstance(owner or _first(call.args), EmbeddingModelSetup):
        return "embedding"
    if _searches_memory(call):
        return "embedding"
    return None


def _searches_memory(call: DurableCall) -> bool:
    """A long-term memory search, which embeds its query inside its call
    (:func:`search_memory_set`)."""
    function = call.function
    return isinstance(function, functools.partial) and function.func is search_memory_set


def _first(args: tuple[Any, ...]) -> Any:
    return args[0] if args else None


def _embedding_of(call: DurableCall) -> tuple[EmbeddingModelSetup, list[str]]:
    """The setup an embedding call goes through and the texts it embeds (a memory search's:
    its query)."""
    if _searches_memory(call):
        _, embedding, _, query, *_ = call.args
        return cast(EmbeddingModelSetup, embedding), [str(query)]
    owner = getattr(call.function, "__self__", None)
    args = call.args if owner is not None else call.args[1:]
    setup = cast(EmbeddingModelSetup, owner if owner is not None else call.args[0])
    texts = args[0] if args else call.kwargs["texts"]
    return setup, [str(text) for text in texts]


def _request_of(call: DurableCall) -> tuple[ChatRequest, ChatModelConnection]:
    """The request a model call sends and the connection it goes through."""
    owner = getattr(call.function, "__self__", None)
    if isinstance(owner, ChatModelSetup):
        connection = owner.get_resource(owner.connection, ResourceType.CHAT_MODEL_CONNECTION)
        return owner.request(*call.args, **call.kwargs), cast(ChatModelConnection, connection)
    return cast(ChatRequest, call.args[0]), cast(ChatModelConnection, owner)


def _cost(
    prices: PriceTable | None, model: str | None, input_tokens: int, output_tokens: int
) -> float | None:
    """What the tokens cost by ``prices``; a model known only once it answers (None: a
    routing connection's) is priced as the table's dearest, at worst."""
    if prices is None:
        return None
    if model is not None:
        return prices.cost(model, input_tokens, output_tokens)
    return max(
        (prices.cost(name, input_tokens, output_tokens) or 0.0 for name in prices.models),
        default=None,
    )


def _embedding_cost(prices: PriceTable | None, model: str | None, tokens: int) -> float | None:
    """What embedding ``tokens`` cost by ``prices`` (None: no table, or no embedding price)."""
    return prices.embedding_cost(model, tokens) if prices is not None else None


def _recorded_when(spend: CallSpend, recorded: CallResult) -> tuple[str, int]:
    """The UTC day and the second a recorded call counts on: those recorded with it, else its
    finish (a call recorded before they were)."""
    finished = (recorded.finished_at or recorded.started_at or 0.0) / 1000
    day = spend.day or datetime.fromtimestamp(finished, timezone.utc).date().isoformat()
    return day, spend.at if spend.at is not None else int(finished)
