"""The AGENT resource and the caller-facing sub-agent API (seed ``004``), incl. its review.

| #  | Contract                                              | Test                      |
|----|-------------------------------------------------------|---------------------------|
| 1  | an AGENT resource, by ``add_resource`` or YAML        | test_r01_registration     |
| 2  | submit / await a ``SubagentResult``                   | test_r02_submit_await     |
| 3  | a durable call with explicit call id and result type  | test_r03_durable_call     |
| 4  | session ids deterministic, or the caller's (continued); | test_r04_session_ids      |
|    | call ids are the per-session ordinal @ the invocation |                           |
| 5  | a declared result type survives replay                | test_r05_typed_replay     |
| 6  | own durable identity per sub-agent, session and call; | test_r06_own_identity     |
|    | the call id encodes name, session and ordinal         |                           |
| 7  | the reconciler is a visible constructor argument and  | test_r07_reconciler       |
|    | reaches the durable call                              |                           |
| 8  | a captured failure is recorded FAILED, message capped | test_r08_failure_recorded |
|    | (in the real store, as the caller got it)             |                           |
| 9  | replay hands a completed or failed call back, as it   | test_r09_replay           |
|    | was live (the real runner, a restored store)          |                           |
| 10 | HTTP sub-agent: idempotency key = durable identity;   | test_r10_http_subagent    |
|    | its failures become failed results                    |                           |
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest

from flink_agents.api import Agent, ResourceDescriptor, ResourceType
from flink_agents.api.subagents.delegation import (
    MAX_ERROR_BYTES,
    BaseSubagentCallable,
    SubagentRequest,
    SubagentResult,
)
from flink_agents.durable.identity import canonical_json
from flink_agents.durable.store import CallStatus, RunKey
from flink_agents.plan import compile_agent
from flink_agents.providers.http_subagent import HttpSubagent
from flink_agents.runtime import run_local
from tests.subagent_samples import (
    DELEGATED,
    FakeSubagent,
    RecordedRuns,
    Review,
    SubagentServer,
    caller_agent,
    delegation_results,
)

FAST_RETRY: dict[str, Any] = {"max_attempts": 3, "initial_backoff_seconds": 0.01}
"""The default budget of attempts, without the default's waits."""

FAKE = "tests.subagent_samples:FakeSubagent"


def _fake(**arguments: Any) -> ResourceDescriptor:
    return ResourceDescriptor.of(FAKE, **arguments)


def _ordinal(call_id: str) -> str:
    """The ordinal part of a sub-agent call id (``<ordinal>@<invocation>``)."""
    ordinal, _, invocation = call_id.partition("@")
    assert len(invocation) == 16
    return ordinal


def _invocation(call_id: str) -> str:
    return call_id.partition("@")[2]


def _run(
    agent: Agent, calls: list[list[Any]], runs: RecordedRuns | None = None, key: str = "k"
) -> list[Any]:
    """The delegation results of one run (with its calls recorded in ``runs``, if given)."""
    if runs is None:
        [result] = run_local(agent, [{"calls": calls}], key=lambda _: key)
    else:
        result = runs.run(agent, {"calls": calls}, key)
    assert result.error is None, result.error
    return delegation_results(result.output_values)


@pytest.fixture(autouse=True)
def _reset():
    FakeSubagent.reset()


def test_r01_registration(tmp_path):
    plan = compile_agent(caller_agent(reviewer=_fake(description="d")))
    assert plan.resources["reviewer"].type is ResourceType.AGENT
    assert plan.resources["reviewer"].class_path == FAKE
    # YAML: see tests/plan/test_yaml_agent.py and tests/plan/test_subagent_plans.py


def test_r02_submit_await():
    [ok, failed] = _run(
        caller_agent(good=_fake(), bad=_fake(mode="raise")),
        [["good", "hello", None], ["bad", "x", None]],
    )
    assert (ok.success, ok.result, ok.error_message) == (True, {"echo": "hello"}, None)
    assert failed.success is False and failed.result is None
    assert failed.reason.startswith("RuntimeError: boom")


def test_r03_durable_call():
    runner = RecordedRuns()
    _run(
        caller_agent(rev=_fake(result_type="tests.subagent_samples:Review", mode="review")),
        [["rev", "x", None]],
        runner,
    )
    [call] = runner.identities
    assert json.loads(call.identity.call_id)[:2] == ["subagent", "rev"]
    assert call.result_type == SubagentResult[Review]
    assert FakeSubagent.calls["fake"] == 1


def test_r04_session_ids():
    calls = [["rev", "a", None], ["rev", "b", None], ["rev", "c", "mine"], ["rev", "d", "mine"]]
    _run(caller_agent(rev=_fake()), calls)
    first = [(r.session_id, r.call_id, r.delegation_key) for r in FakeSubagent.requests["fake"]]
    FakeSubagent.reset()
    _run(caller_agent(rev=_fake()), calls)  # a new engine: nothing carried over
    second = [(r.session_id, r.call_id, r.delegation_key) for r in FakeSubagent.requests["fake"]]
    assert first == second
    generated = {first[0][0], first[1][0]}
    assert len(generated) == 2 and all(s.startswith("session-") for s in generated)
    assert [(s, _ordinal(c)) for s, c, _ in first[2:]] == [("mine", "1"), ("mine", "2")]
    assert len({_invocation(c) for _, c, _ in first}) == 1  # one action invocation
    FakeSubagent.reset()
    _run(caller_agent(rev=_fake()), calls, key="other")
    other = [r.session_id for r in FakeSubagent.requests["fake"]][:2]
    assert set(other).isdisjoint(generated)  # derived from the run, so another key differs


def test_r05_typed_replay():
    live = RecordedRuns()
    agent = caller_agent(rev=_fake(mode="review", result_type="tests.subagent_samples:Review"))
    DELEGATED.clear()
    _run(agent, [["rev", "x", None]], live)
    _run(agent, [["rev", "x", None]], live.crashed())
    [live, replayed] = DELEGATED  # as the action was handed them
    assert FakeSubagent.calls["fake"] == 1
    assert isinstance(live.result, Review) and isinstance(replayed.result, Review)
    assert replayed.result == live.result == Review(verdict="approve", score=7)


def test_r06_own_identity():
    runner = RecordedRuns()
    calls = [["a", "x", None], ["b", "x", None], ["a", "x", "s"], ["a", "x", "s"], ["b", "x", "s"]]
    _run(caller_agent(a=_fake(), b=_fake()), calls, runner)
    digests = [call.identity.digest() for call in runner.identities]
    assert len(set(digests)) == len(calls)
    call_ids = [json.loads(call.identity.call_id) for call in runner.identities]
    assert [[*ids[:3], _ordinal(ids[3])] for ids in call_ids[2:]] == [
        ["subagent", "a", "s", "1"],
        ["subagent", "a", "s", "2"],
        ["subagent", "b", "s", "3"],
    ]
    # the idempotency key a service sees is that very identity
    keys = [r.delegation_key for r in FakeSubagent.requests["fake"]]
    assert sorted(keys) == sorted(digests)


def _marker(*args: Any) -> Any:
    return None


class ReconcilingSubagent(FakeSubagent):
    def make_callable(self, request: SubagentRequest, ctx: Any) -> BaseSubagentCallable:
        return BaseSubagentCallable(self, request, ctx, reconciler=_marker)


def test_r07_reconciler():
    parameter = inspect.signature(BaseSubagentCallable).parameters["reconciler"]
    assert parameter.kind is parameter.KEYWORD_ONLY and parameter.default is parameter.empty
    runner = RecordedRuns()
    reconciling = ResourceDescriptor.of("tests.api.subagents.test_delegation:ReconcilingSubagent")
    _run(
        caller_agent(plain=_fake(), rec=reconciling), [["plain", 1, None], ["rec", 2, None]], runner
    )
    plain, rec = runner.identities
    assert plain.reconciler is None
    # the callable's reconcile, which asks _marker and records its failure as the delegation's
    assert rec.reconciler.__func__ is BaseSubagentCallable.reconcile
    assert rec.reconciler.__self__.reconciler is _marker


def test_r08_failure_recorded():
    runs = RecordedRuns()
    [failed] = _run(caller_agent(bad=_fake(mode="raise")), [["bad", "x", None]], runs)
    [state] = runs.store.get_run(RunKey(agent="caller", key=canonical_json("k"), seq=0))
    [call] = state.calls
    assert call.status is CallStatus.FAILED
    assert call.error is not None
    assert call.error.type == "flink_agents.api.subagents.delegation.SubagentError"
    recorded = call.error.message
    assert recorded == failed.error_message  # what the store holds is what the caller got
    assert len(recorded.encode()) <= MAX_ERROR_BYTES
    assert recorded.startswith("RuntimeError: boom")
    assert "in invoke" in recorded  # the innermost frames follow the summary


def test_r09_replay():
    runs = RecordedRuns()
    agent = caller_agent(good=_fake(), bad=_fake(mode="raise"))
    calls = [["good", "x", None], ["bad", "y", None]]
    live = _run(agent, calls, runs)
    again = _run(agent, calls, runs.crashed())
    assert FakeSubagent.calls["fake"] == 2  # both from the live run only
    assert again == live  # the failure too: the recorded message, not a RecordedCallError


def test_r10_http_subagent():
    server = SubagentServer()
    with server.running():
        subs = {
            path: ResourceDescriptor.of(
                HttpSubagent, url=f"{server.base_url}/{path}", retry=FAST_RETRY
            )
            for path in ("echo", "refuse", "broken", "garbage")
        }
        runner = RecordedRuns()
        agent = caller_agent(**subs)
        calls = [[path, {"q": path}, None] for path in subs]
        echo, refuse, broken, garbage = _run(agent, calls, runner)
        assert echo.result == {"echo": {"q": "echo"}}
        assert refuse.reason.endswith("reported: customer unknown")
        assert "answered 500: internal trouble" in broken.reason
        assert "answered with no JSON" in garbage.reason
        assert sorted(server.requests) == sorted(c.identity.digest() for c in runner.identities)
        # A 500 is transient: attempted until the budget is spent, always under the same key;
        # the other answers are final after one attempt.
        broken_key = next(
            c.identity.digest() for c in runner.identities if "broken" in c.identity.call_id
        )
        assert server.requests.pop(broken_key) == FAST_RETRY["max_attempts"]
        assert "attempt budget of 3 spent" in broken.reason
        assert set(server.requests.values()) == {1}
        # The four calls run concurrently: find the echo call's body whatever the arrival order.
        (body,) = [b for b in server.bodies if b["input"] == {"q": "echo"}]
        assert _ordinal(body["call_id"]) == "1"
        assert body["session_id"].startswith("session-")
        _run(agent, calls, runner.crashed())
        assert set(server.requests.values()) == {1}  # replay sent nothing
        assert broken_key not in server.requests


def test_blank_input_schema_is_refused_at_construction():
    with pytest.raises(ValueError, match="blank"):
        FakeSubagent(input_schema={})
