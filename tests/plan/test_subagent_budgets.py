"""Budgets on internal sub-agents in the plan: declared in YAML or Python, compiled into the
sub-agent's scope, and refused when they hold what only the top agent's budgets may
(docs/budgets.md, "Budgets of a sub-agent")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from flink_agents.api import Agent
from flink_agents.api.budgets import Budget, BudgetLedgerConfig, Budgets, ModelPrice, PriceTable
from flink_agents.api.resources import ResourceType
from flink_agents.plan import PlanValidationError, YamlAgentError, compile_agent, compile_yaml
from flink_agents.plan.subagent_budgets import plan_prices, subagent_budgets
from tests.budget_samples import ask

PRICES = PriceTable(version="v1", models={"big": ModelPrice(input=1.0, output=2.0)})

DESK = """\
agents:
  - name: desk
    actions: [{function: "tests.budget_samples:ask"}]
    budgets:
      prices: {version: v1, models: {big: {input: 1.0, output: 2.0}}}
      limits: [{name: cap, cost: 1.0}]
    subagents:
      research:
        description: Researches a question.
        agent:
          name: researcher
          actions: [{function: "tests.budget_samples:ask"}]
          connections:
            llm:
              class: "flink_agents.providers.openai_compatible:OpenAICompatibleChatModelConnection"
          budgets:
            prices: {version: v1, models: {big: {input: 1.0, output: 2.0}}}
            limits: [{name: per-run, window: run, tokens: 500}, {name: spend, cost: 0.5}]
"""


def _desk(researcher: Budgets, top: Budgets | None = None) -> Agent:
    child = Agent(name="researcher")
    child.add_action(ask)
    child.add_resource(
        "llm",
        ResourceType.CHAT_MODEL_CONNECTION,
        "flink_agents.providers.openai_compatible:OpenAICompatibleChatModelConnection",
    )
    child.budgets = researcher
    desk = Agent(name="desk")
    desk.add_action(ask)
    desk.add_subagent("research", child, description="Researches a question.")
    desk.budgets = top
    return desk


def test_yaml_and_python_compile_a_subagents_budgets_into_its_scope(tmp_path: Path) -> None:
    path = tmp_path / "agents.yaml"
    path.write_text(DESK)
    plan = compile_yaml(path, "desk")
    limits = [
        Budget(name="per-run", window="run", tokens=500),
        Budget(name="spend", cost=0.5),
    ]
    python = compile_agent(
        _desk(
            Budgets(prices=PRICES, limits=limits),
            Budgets(prices=PRICES, limits=[Budget(name="cap", cost=1.0)]),
        )
    )
    assert plan.to_json() == python.to_json()
    assert subagent_budgets(plan.scopes) == {"researcher": Budgets(prices=PRICES, limits=limits)}
    assert plan_prices(plan.budgets, plan.scopes) == PRICES


def test_a_subagent_may_carry_budgets_when_the_top_agent_has_none() -> None:
    cap = Budget(name="cap", tokens=100, on_exhausted="approve", approval_timeout_s=60)
    plan = compile_agent(_desk(Budgets(limits=[cap])))
    assert plan.budgets is None
    assert list(subagent_budgets(plan.scopes)) == ["researcher"]


@pytest.mark.parametrize(
    ("researcher", "message"),
    [
        (
            Budgets(
                limits=[Budget(name="org", scope="tenant", tenant_field="org", tokens=9)],
                ledger=BudgetLedgerConfig(),
            ),
            "sub-agent 'researcher': budgets: a ledger and budgets across keys",
        ),
        (
            Budgets(limits=[Budget(name="b", tokens=9, on_exhausted="fallback", fallback="llm")]),
            "limits[0]: on_exhausted 'fallback' belongs to the top agent's budgets",
        ),
        (
            Budgets(
                prices=PriceTable(version="v2", models={"big": ModelPrice(input=1, output=9)}),
                limits=[Budget(name="b", cost=1.0)],
            ),
            "prices differ from those of the top agent: a plan has one price table",
        ),
    ],
)
def test_what_only_the_top_agents_budgets_may_hold_is_refused(
    researcher: Budgets, message: str
) -> None:
    top = Budgets(prices=PRICES, limits=[Budget(name="cap", cost=1.0)])
    with pytest.raises(PlanValidationError, match=re.escape(message)):
        compile_agent(_desk(researcher, top))


def test_yaml_names_the_subagent_whose_budgets_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "agents.yaml"
    path.write_text(
        DESK.replace(
            "limits: [{name: per-run, window: run, tokens: 500}, {name: spend, cost: 0.5}]",
            "limits: [{name: spend, cost: 0.5, on_exhausted: fallback, fallback: llm}]",
        )
    )
    with pytest.raises(YamlAgentError, match="sub-agent 'researcher': budgets: limits\\[0\\]"):
        compile_yaml(path, "desk")
