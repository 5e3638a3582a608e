"""Budgets declared on internal sub-agents (docs/budgets.md, "Budgets of a sub-agent").

A sub-agent's ``budgets`` meter the model and embedding calls made while it runs (its actions'
and its own sub-agents'), counted per key and per agent; the top agent's budgets still count
every call of the run. What a sub-agent's budgets may declare is narrower than the top
agent's, and :func:`subagent_budget_problem` says why a plan breaks it:

* ``limits`` of ``scope: key`` only, with ``on_exhausted`` ``fail`` or ``approve``: a budget
  across keys (and its ledger) and a fallback connection belong to the top agent;
* one price table per plan: a call is priced once, recorded with its cost, and every budget
  that meters it counts that cost, so a sub-agent's ``prices`` (needed by its cost limits)
  must be the plan's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol

from flink_agents.api.budgets import Budgets, PriceTable


class ScopedPlan(Protocol):
    """What is read of a sub-agent's plan (``flink_agents.plan.models.AgentPlan``, which
    imports this module)."""

    @property
    def name(self) -> str: ...

    @property
    def budgets(self) -> Budgets | None: ...

    @property
    def scopes(self) -> Mapping[str, ScopedPlan]: ...


def subagent_budgets(scopes: Mapping[str, ScopedPlan]) -> dict[str, Budgets]:
    """The budgets of the sub-agents under ``scopes`` (at any depth), by agent name."""
    return {name: budgets for name, _, budgets in _declared(scopes, ()) if budgets is not None}


def subagent_budget_problem(
    budgets: Budgets | None, scopes: Mapping[str, ScopedPlan]
) -> str | None:
    """Why the sub-agents' budgets under ``scopes`` do not fit a plan whose own budgets are
    ``budgets`` (None: they fit)."""
    prices: tuple[str, PriceTable] | None = None
    if budgets is not None and budgets.prices is not None:
        prices = ("the top agent", budgets.prices)
    for _, path, declared in _declared(scopes, ()):
        if declared is None:
            continue
        where = f"sub-agent {'/'.join(path)!r}: budgets"
        if declared.ledger is not None:  # which budgets across keys need (Budgets checks)
            return (
                f"{where}: a ledger and budgets across keys (scope tenant or job) belong to the "
                "top agent; a sub-agent's budgets count per key"
            )
        for index, budget in enumerate(declared.limits):
            if budget.on_exhausted == "fallback":
                return (
                    f"{where}: limits[{index}]: on_exhausted 'fallback' belongs to the top "
                    "agent's budgets; a sub-agent's fail or approve"
                )
        if declared.prices is None:
            continue
        if prices is None:
            prices = (f"sub-agent {'/'.join(path)!r}", declared.prices)
        elif declared.prices != prices[1]:
            return (
                f"{where}: prices differ from those of {prices[0]}: a plan has one price table "
                "(each call is priced once and every budget counts that cost)"
            )
    return None


def plan_prices(budgets: Budgets | None, scopes: Mapping[str, ScopedPlan]) -> PriceTable | None:
    """The plan's one price table: its top agent's, else any sub-agent's (they are equal)."""
    if budgets is not None and budgets.prices is not None:
        return budgets.prices
    for _, _, declared in _declared(scopes, ()):
        if declared is not None and declared.prices is not None:
            return declared.prices
    return None


def _declared(
    scopes: Mapping[str, ScopedPlan], path: tuple[str, ...]
) -> Iterator[tuple[str, tuple[str, ...], Budgets | None]]:
    """Every sub-agent plan under ``scopes``: its name, its path of scope names, its budgets."""
    for name, plan in scopes.items():
        yield plan.name, (*path, name), plan.budgets
        yield from _declared(plan.scopes, (*path, name))
