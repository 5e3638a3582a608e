"""Budgets in the plan: declared in YAML or Python, compiled to the same plan, refused with the
field named (docs/budgets.md)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from flink_agents.api.budgets import Budget, Budgets, ModelPrice, PriceTable
from flink_agents.plan import AgentPlan, PlanValidationError, YamlAgentError, compile_yaml
from flink_agents.plan.yaml.loader import load_yaml_agents
from tests.budget_samples import budgeted_plan

AGENT = """\
agents:
  - name: budgeted
    error_policy: emit
    actions:
      - function: tests.budget_samples:ask
    connections:
      llm: {class: openai, arguments: {base_url: "http://127.0.0.1:1/v1"}}
      cheap: {class: openai, arguments: {base_url: "http://127.0.0.1:1/v1", model: small}}
    chat_models:
      model: {connection: llm, model: big, arguments: {max_tokens: 16}}
    budgets:
{budgets}
"""


def _yaml(tmp_path: Path, budgets: str) -> Path:
    path = tmp_path / "agents.yaml"
    indented = textwrap.indent(textwrap.dedent(budgets), " " * 6)
    path.write_text(AGENT.replace("{budgets}", indented))
    return path


def test_yaml_budgets_compile_into_the_plan(tmp_path: Path) -> None:
    plan = compile_yaml(
        _yaml(
            tmp_path,
            """\
            prices:
              version: "2026-12"
              models: {big: {input: 2.5, output: 10}, small: {input: 0.1, output: 0.4}}
            limits:
              - {name: daily, window: day, cost: 5.0, soft: 0.8}
              - {name: big-model, tokens: 100000, on_exhausted: fallback, fallback: cheap}
            """,
        )
    )
    assert plan.budgets is not None
    daily, big = plan.budgets.limits
    assert (daily.window, daily.unit, daily.limit, daily.soft) == ("day", "cost", 5.0, 0.8)
    assert (big.on_exhausted, big.fallback) == ("fallback", "cheap")
    assert AgentPlan.from_dict(plan.to_dict()) == plan  # the plan's JSON keeps them


def test_yaml_cross_key_budgets_compile_with_their_ledger(tmp_path: Path) -> None:
    plan = compile_yaml(
        _yaml(
            tmp_path,
            """\
            ledger: {url: "redis://127.0.0.1:6379/0", password_env: LEDGER_PASSWORD}
            limits:
              - {name: per-tenant, scope: tenant, tenant_field: org, window: day, tokens: 50000}
              - {name: whole-job, scope: job, tokens: 1000000}
            """,
        )
    )
    assert plan.budgets is not None and plan.budgets.ledger is not None
    tenant, job = plan.budgets.limits
    assert (tenant.scope, tenant.tenant_field, job.scope) == ("tenant", "org", "job")
    assert plan.budgets.ledger.on_unreachable == "fail"  # fail closed unless told otherwise
    assert AgentPlan.from_dict(plan.to_dict()) == plan


def test_python_budgets_compile_into_the_plan() -> None:
    prices = PriceTable(version="v1", models={"big": ModelPrice(input=1, output=2)})
    plan = budgeted_plan("http://127.0.0.1:1/v1", Budget(name="b", cost=1.0), prices=prices)
    assert plan.budgets == Budgets(limits=[Budget(name="b", cost=1.0)], prices=prices)


def test_a_plan_without_budgets_keeps_its_json() -> None:
    plan = budgeted_plan("http://127.0.0.1:1/v1")
    without = plan.model_copy(update={"budgets": None})
    assert "budgets" not in without.to_dict()


@pytest.mark.parametrize(
    ("budgets", "field", "message"),
    [
        (
            "limits: [{name: b, tokens: 10, cost: 1.0}]",
            "agents[0].budgets.limits[0]",
            "budget 'b': give exactly one of tokens and cost",
        ),
        (
            "limits: [{name: b, tokens: 10, on_exhausted: fallback}]",
            "agents[0].budgets.limits[0]",
            "needs fallback",
        ),
        (
            "limits: [{name: b, cost: 1.0}]",
            "agents[0].budgets",
            "budgets ['b'] limit cost: they need prices",
        ),
        (
            "limits: [{name: b, tokens: 10}, {name: b, tokens: 20}]",
            "agents[0].budgets",
            "budget names must be unique",
        ),
        (
            "limits: [{name: b, tokens: 0}]",
            "agents[0].budgets.limits[0].tokens",
            "greater than or equal to 1",
        ),
        (
            "limits: [{name: b, window: week, tokens: 10}]",
            "agents[0].budgets.limits[0].window",
            "'run', 'day', 'sliding' or 'total'",
        ),
        (
            "limits: [{name: b, scope: tenant, tokens: 10}]",
            "agents[0].budgets.limits[0]",
            "tenant_field names the tenant of scope 'tenant', and only of it",
        ),
        (
            "limits: [{name: b, scope: job, tenant_field: org, tokens: 10}]",
            "agents[0].budgets.limits[0]",
            "tenant_field names the tenant of scope 'tenant', and only of it",
        ),
        (
            "limits: [{name: b, scope: job, window: run, tokens: 10}]",
            "agents[0].budgets.limits[0]",
            "a run belongs to one key; scope 'job' counts over window 'day' or 'total'",
        ),
        (
            "limits: [{name: b, scope: job, tokens: 10}]",
            "agents[0].budgets",
            "budgets ['b'] count across keys: they need a ledger",
        ),
        (
            "{prices: {version: v1, models: {e: {input: 1.0}}}}",
            "agents[0].budgets.prices.models.e",
            "a chat model's price gives both input and output",
        ),
        (
            "{prices: {version: v1, models: {e: {}}}}",
            "agents[0].budgets.prices.models.e",
            "a price gives input and output (a chat model) or embedding",
        ),
        (
            "limits: [{name: b, tokens: 10, approval_timeout_s: 60}]",
            "agents[0].budgets.limits[0]",
            "approval_timeout_s and on_approval_timeout go with on_exhausted: approve",
        ),
        (
            "limits: [{name: b, tokens: 10, on_exhausted: approve, fallback: cheap}]",
            "agents[0].budgets.limits[0]",
            "fallback is set but on_exhausted is 'approve'",
        ),
        (
            "limits: [{name: b, scope: job, tokens: 10, on_exhausted: approve}]",
            "agents[0].budgets.limits[0]",
            "scope 'job' supports on_exhausted 'fail' or 'fallback'",
        ),
        (
            "{ledger: {url: 'redis://:hunter2@127.0.0.1:6379/0'}}",
            "agents[0].budgets.ledger",
            "a password does not belong in a plan",
        ),
    ],
)
def test_a_bad_budget_is_refused_naming_its_field(
    tmp_path: Path, budgets: str, field: str, message: str
) -> None:
    with pytest.raises(YamlAgentError) as info:
        load_yaml_agents(_yaml(tmp_path, budgets))
    [issue] = info.value.issues
    assert issue.field == field
    assert message in issue.message


def test_a_fallback_must_be_a_chat_model_connection(tmp_path: Path) -> None:
    path = _yaml(
        tmp_path, "limits: [{name: b, tokens: 10, on_exhausted: fallback, fallback: model}]"
    )
    with pytest.raises(YamlAgentError) as info:
        compile_yaml(path)
    [issue] = info.value.issues
    assert issue.field == "agents[0].budgets"
    assert issue.message.startswith("limits[0].fallback: 'model' is not a chat model connection")


def test_the_fallback_resource_type_is_checked_on_python_plans_too() -> None:
    plan = budgeted_plan("http://127.0.0.1:1/v1").to_dict()
    plan["budgets"] = {"limits": [{"name": "b", "tokens": 5, "on_exhausted": "fallback"}]}
    plan["budgets"]["limits"][0]["fallback"] = "nowhere"
    with pytest.raises(PlanValidationError) as info:
        AgentPlan.from_dict(plan)
    [issue] = info.value.issues
    assert issue.path == "/budgets"
    assert "'nowhere' is not a chat model connection" in issue.message
