"""Budgets: what an agent's model calls may spend, in tokens or money (docs/budgets.md).

Declared on an agent (``agent.budgets = Budgets(...)`` in Python, ``budgets:`` in YAML) and
compiled into its plan:

* :class:`PriceTable` -- a versioned table of model prices (per million tokens). A call's cost
  is computed when the call is recorded and stored with it (:class:`CallSpend`), so a replay
  never re-prices history;
* :class:`Budget` -- one limit of one key's spend over a window (``run``, ``day``,
  ``sliding`` or ``total``), in tokens or money, with what happens when it is exhausted
  (``fail``: the call fails with :class:`BudgetExceeded`; ``fallback``: it goes to a cheaper
  connection) and a soft threshold that warns. A budget with ``scope: tenant`` or
  ``scope: job`` counts across keys, in an external ledger (:class:`BudgetLedgerConfig`, a
  Redis server).

This module declares; the runtime (``flink_agents.runtime.budget_meter``) counts, reserves and
refuses.
"""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

BudgetWindow = Literal["run", "day", "sliding", "total"]
"""Over what a budget counts a key's spend: each run on its own, each UTC day (by the day a
call was recorded), the last ``period_s`` seconds (by the second a call was recorded), or
everything the key ever spent."""

OnExhausted = Literal["fail", "fallback", "approve"]
"""What a new call that does not fit a budget does: ``fail`` (the call fails with
:class:`BudgetExceeded`, and the run's error policy applies), ``fallback`` (the call goes
to the budget's ``fallback`` chat model connection) or ``approve`` (the run pauses at a
durable wait for approval: approved, the call goes over the budget; rejected or timed out, it
fails with :class:`BudgetExceeded`)."""

OnApprovalTimeout = Literal["reject", "raise"]
"""What an ``approve`` budget's wait that timed out does: ``reject`` (the call fails with
:class:`BudgetExceeded`) or ``raise`` (the action gets the wait's ``WaitTimedOutError``)."""

BudgetScope = Literal["key", "tenant", "job"]
"""Whose spend a budget counts: each key's (in the key's Flink state), a tenant's (the keys
whose runs name one tenant, by :attr:`Budget.tenant_field`) or the whole job's; the last two
in the ledger (:class:`BudgetLedgerConfig`)."""

OnLedgerUnreachable = Literal["fail", "allow"]
"""What a new call under a cross-key budget does when the ledger does not answer: ``fail``
(fail closed: the call fails with :class:`BudgetLedgerUnavailable`) or ``allow`` (the call goes
uncounted by that budget, with a warning)."""

DEFAULT_MAX_TOKENS = 1024
"""The output tokens a call without ``max_tokens`` is reserved for (see
:attr:`Budgets.assumed_max_tokens`)."""


class BudgetExceeded(RuntimeError):
    """A new model call did not fit a budget whose ``on_exhausted`` is ``fail``.

    Recorded as the call's failed outcome, so a replay ends the run the same way; ``budget``
    names the budget, ``spent`` what its window held (with the reservations of calls in
    flight), ``needed`` the call's worst case and ``limit`` the budget's limit, in its unit.
    """

    def __init__(self, budget: str, unit: str, spent: float, needed: float, limit: float) -> None:
        self.budget = budget
        self.unit = unit
        self.spent = spent
        self.needed = needed
        self.limit = limit
        super().__init__(
            f"budget {budget!r} exhausted: {_amount(spent, unit)} spent or reserved, this call "
            f"may need {_amount(needed, unit)}, the limit is {_amount(limit, unit)}"
        )


class BudgetApprovalNeeded(Exception):
    """A new call does not fit a budget whose ``on_exhausted`` is ``approve``, and nobody has
    decided on it yet: the call is not sent and nothing is recorded for it; the action's
    context waits for approval (``request`` is what the decider is shown) and makes the call
    again with the decision. Not an error a user sees."""

    def __init__(self, budget: Budget, exceeded: BudgetExceeded, call_id: str) -> None:
        super().__init__(str(exceeded))
        self.budget = budget
        self.request: dict[str, Any] = {
            "budget": exceeded.budget,
            "unit": exceeded.unit,
            "spent": exceeded.spent,
            "needed": exceeded.needed,
            "limit": exceeded.limit,
            "call": call_id,
        }


class BudgetLedgerUnavailable(RuntimeError):
    """The ledger of a cross-key budget did not answer, and ``on_unreachable`` is ``fail``: the
    new call is refused (fail closed), recorded as its failed outcome like a refusal."""


def _amount(value: float, unit: str) -> str:
    return f"{int(value)} tokens" if unit == "tokens" else f"{value:.6g} {unit}"


class ModelPrice(BaseModel):
    """What one model costs, per million tokens: a chat model's ``input`` and ``output``, an
    embedding model's ``embedding`` (the tokens of the texts it embeds)."""

    model_config = ConfigDict(extra="forbid")

    input: float | None = Field(
        default=None, ge=0, description="Price of a million input (prompt) tokens."
    )
    output: float | None = Field(
        default=None, ge=0, description="Price of a million output tokens."
    )
    embedding: float | None = Field(
        default=None, ge=0, description="Price of a million tokens embedded."
    )

    @model_validator(mode="after")
    def _priced(self) -> ModelPrice:
        if (self.input is None) != (self.output is None):
            raise ValueError("a chat model's price gives both input and output")
        if self.input is None and self.embedding is None:
            raise ValueError("a price gives input and output (a chat model) or embedding")
        return self


class PriceTable(BaseModel):
    """Model prices under a version: a call records the version it was priced by."""

    model_config = ConfigDict(extra="forbid")

    version: str = Field(min_length=1, description="Recorded with every priced call.")
    currency: str = Field(default="USD", min_length=1)
    models: dict[str, ModelPrice] = Field(
        default_factory=dict, description="Prices by model name (as sent in requests)."
    )

    def cost(self, model: str | None, input_tokens: int, output_tokens: int) -> float | None:
        """What ``input_tokens`` and ``output_tokens`` of chat model ``model`` cost; None: no
        chat price."""
        price = self.models.get(model or "")
        if price is None or price.input is None or price.output is None:
            return None
        return (input_tokens * price.input + output_tokens * price.output) / 1_000_000

    def embedding_cost(self, model: str | None, tokens: int) -> float | None:
        """What embedding ``tokens`` with ``model`` cost; None: no embedding price."""
        price = self.models.get(model or "")
        if price is None or price.embedding is None:
            return None
        return tokens * price.embedding / 1_000_000


class CallSpend(BaseModel):
    """What one model or embedding call spent, recorded with its outcome (``CallResult.spend``;
    an embedding call's tokens are all input).

    ``cost`` is computed from the price table of ``price_version`` when the call was recorded
    (None: no price table, or no price for ``model``); a replay reads it, never re-prices.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    model: str | None = Field(default=None, description="The model that answered.")
    cost: float | None = Field(default=None, ge=0)
    price_version: str | None = None
    day: str | None = Field(
        default=None, description="The UTC day (ISO date) it counts on for daily budgets."
    )
    at: int | None = Field(
        default=None,
        ge=0,
        description="The second (since the epoch) it counts at for sliding windows.",
    )
    agents: list[str] = Field(
        default_factory=list,
        exclude_if=lambda agents: not agents,  # a top agent's call records what it did before
        description="The internal sub-agents the call was made in, outermost first (empty: "
        "the top agent's own call); their budgets count it.",
    )
    approved_by: str | None = Field(
        default=None,
        exclude_if=lambda by: by is None,
        description="Who approved the call over a budget of on_exhausted approve ('' when the "
        "decision named nobody).",
    )
    nested: list[CallSpend] = Field(
        default_factory=list,
        exclude_if=lambda nested: not nested,
        description="A delegation to an internal sub-agent: what the metered calls made while "
        "it ran spent (its own tokens are none), counted when it is handed back from its record "
        "instead of running the sub-agent again.",
    )

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class Budget(BaseModel):
    """One limit on what each key's model calls may spend over a ``window``.

    Give exactly one of ``tokens`` and ``cost`` (money, in the price table's currency: it
    needs ``prices`` on the :class:`Budgets`). ``soft`` (a fraction of the limit) logs a
    warning and an event-log record once a window's spend reaches it.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    window: BudgetWindow = "total"
    period_s: int | None = Field(
        default=None,
        ge=1,
        description="window sliding: how far back it counts, in seconds (3600: the last hour).",
    )
    tokens: int | None = Field(default=None, ge=1, description="Limit in tokens (in + out).")
    cost: float | None = Field(default=None, gt=0, description="Limit in money.")
    soft: float | None = Field(
        default=None, gt=0, lt=1, description="Warn once spend reaches this fraction."
    )
    on_exhausted: OnExhausted = "fail"
    fallback: str | None = Field(
        default=None,
        description="The chat model connection a call goes to when this budget is exhausted "
        "(on_exhausted: fallback); it answers with its own model.",
    )
    approval_timeout_s: float | None = Field(
        default=None,
        gt=0,
        description="on_exhausted approve: how long the run waits for a decision (None: for ever).",
    )
    on_approval_timeout: OnApprovalTimeout = Field(
        default="reject",
        description="on_exhausted approve: what a wait that timed out does (reject: the call "
        "fails with BudgetExceeded; raise: the action gets WaitTimedOutError).",
    )
    scope: BudgetScope = Field(
        default="key",
        description="Whose spend it counts: each key's, a tenant's or the job's (the last two "
        "in the budgets' ledger).",
    )
    tenant_field: str | None = Field(
        default=None,
        min_length=1,
        description="scope tenant: the field of the run's input (else of its key, when the key "
        "is an object) whose value names the tenant.",
    )

    @model_validator(mode="after")
    def _one_limit(self) -> Budget:
        if (self.tokens is None) == (self.cost is None):
            raise ValueError(f"budget {self.name!r}: give exactly one of tokens and cost")
        if (self.scope == "tenant") != (self.tenant_field is not None):
            raise ValueError(
                f"budget {self.name!r}: tenant_field names the tenant of scope 'tenant', and "
                f"only of it (scope is {self.scope!r})"
            )
        if (self.window == "sliding") != (self.period_s is not None):
            raise ValueError(
                f"budget {self.name!r}: period_s is the length of window 'sliding', and only of "
                f"it (window is {self.window!r})"
            )
        if self.scope != "key" and self.window == "run":
            raise ValueError(
                f"budget {self.name!r}: a run belongs to one key; scope {self.scope!r} counts "
                "over window 'day' or 'total'"
            )
        if self.scope != "key" and self.window == "sliding":
            raise ValueError(
                f"budget {self.name!r}: window 'sliding' counts a key's spend only; scope "
                f"{self.scope!r} counts over window 'day' or 'total'"
            )
        if self.scope != "key" and self.on_exhausted == "approve":
            raise ValueError(
                f"budget {self.name!r}: scope {self.scope!r} supports on_exhausted 'fail' or "
                "'fallback' (approval counts a key's budgets only)"
            )
        if self.on_exhausted == "fallback" and not self.fallback:
            raise ValueError(
                f"budget {self.name!r}: on_exhausted 'fallback' needs fallback (a chat model "
                "connection)"
            )
        if self.on_exhausted != "approve" and (
            self.approval_timeout_s is not None or self.on_approval_timeout != "reject"
        ):
            raise ValueError(
                f"budget {self.name!r}: approval_timeout_s and on_approval_timeout go with "
                "on_exhausted: approve"
            )
        if self.on_exhausted != "fallback" and self.fallback:
            raise ValueError(
                f"budget {self.name!r}: fallback is set but on_exhausted is "
                f"{self.on_exhausted!r}; set on_exhausted: fallback"
            )
        return self

    @property
    def unit(self) -> Literal["tokens", "cost"]:
        return "tokens" if self.tokens is not None else "cost"

    @property
    def limit(self) -> float:
        return float(self.tokens if self.tokens is not None else self.cost or 0)


class BudgetLedgerConfig(BaseModel):
    """Where cross-key budgets (``scope`` ``tenant`` or ``job``) count: a Redis server
    (``scripts/redis.sh``; docs/budgets.md). Reservations and settlements are atomic there (one
    Lua script each) and keyed by the call's idempotency key, so a replayed or re-sent call is
    never reserved or counted twice."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(
        default="redis://127.0.0.1:6379/0",
        description="The Redis server (redis:// or rediss://), without a password.",
    )
    password_env: str | None = Field(
        default=None, description="The environment variable holding the server's password."
    )
    namespace: str | None = Field(
        default=None,
        min_length=1,
        description="Prefix of the ledger's keys; jobs of one namespace share their budgets "
        "(default: the agent's name).",
    )
    on_unreachable: OnLedgerUnreachable = "fail"
    timeout_s: float = Field(default=2.0, gt=0, description="Connect and answer timeout.")
    reservation_ttl_s: int = Field(
        default=600,
        ge=1,
        description="A reservation neither settled nor released (its process died and the call "
        "never came back) is freed after this long.",
    )

    @model_validator(mode="after")
    def _no_secret(self) -> BudgetLedgerConfig:
        if urlsplit(self.url).scheme not in ("redis", "rediss"):
            raise ValueError(f"ledger url {self.url!r}: give a redis:// or rediss:// URL")
        if urlsplit(self.url).password is not None:
            raise ValueError(
                "ledger url: a password does not belong in a plan; put it in an environment "
                "variable and name it in password_env"
            )
        return self


class Budgets(BaseModel):
    """An agent's budgets and the prices its calls are costed by."""

    model_config = ConfigDict(extra="forbid")

    prices: PriceTable | None = None
    limits: list[Budget] = Field(default_factory=list)
    ledger: BudgetLedgerConfig | None = Field(
        default=None, description="Where budgets of scope tenant or job count."
    )
    assumed_max_tokens: int = Field(
        default=DEFAULT_MAX_TOKENS,
        ge=1,
        description="Output tokens reserved for a call whose chat model sets no max_tokens.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Budgets:
        names = [budget.name for budget in self.limits]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"budget names must be unique: {twice} appear more than once")
        priced = [budget.name for budget in self.limits if budget.cost is not None]
        if priced and self.prices is None:
            raise ValueError(f"budgets {priced} limit cost: they need prices (a price table)")
        shared = [budget.name for budget in self.limits if budget.scope != "key"]
        if shared and self.ledger is None:
            raise ValueError(
                f"budgets {shared} count across keys: they need a ledger (ledger: {{url: "
                "redis://...}})"
            )
        return self
