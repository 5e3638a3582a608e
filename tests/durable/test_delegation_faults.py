"""Timeouts, retries and cancellation of delegations, through ``DurableCalls`` and a real HTTP
sub-agent service on 127.0.0.1 that plays a script of answers and logs every request's
idempotency key.

| Contract                                                          | Test                       |
|-------------------------------------------------------------------|----------------------------|
| an attempt has a timeout; a timeout, a dropped connection and the | test_transient_*           |
| statuses 408/429/5xx are attempted again, under the same key      |                            |
| other 4xx fail for good after one attempt: a FAILED delegation,   | test_permanent_*           |
| handed back on replay without a request                           |                            |
| the budget is per durable call: a spent budget fails the          | test_spent_budget_*,       |
| delegation, and attempts made before a restart count              | test_attempts_before_*     |
| a cancelled caller leaves the delegation PENDING; replay sends it | test_cancelled_caller_*    |
| again with the same idempotency key                               |                            |
| an internal child has a timeout: past it the delegation fails for | test_internal_child_*      |
| good, and replay hands the failure back without running the child |                            |
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from flink_agents.api import Agent, InputEvent, OutputEvent, ResourceDescriptor, RunnerContext
from flink_agents.api import action as action_decorator
from flink_agents.api.subagents.delegation import Subagent
from flink_agents.durable.identity import canonical_json
from flink_agents.durable.store import (
    ActionStateStore,
    CallResult,
    CallStatus,
    InMemoryActionStateStore,
    InMemoryLog,
    RunKey,
)
from flink_agents.plan import compile_agent
from flink_agents.plan.models import AgentPlan
from flink_agents.providers.http_subagent import IDEMPOTENCY_HEADER, HttpSubagent
from flink_agents.runtime import KeyState, RunResult, Runtime
from flink_agents.testing import resume
from tests.durable.helpers import PROBE
from tests.subagent_samples import add_subagents, serving

AGENT = "faults"
FAST_RETRY: dict[str, Any] = {"max_attempts": 3, "initial_backoff_seconds": 0.01}


@dataclass(frozen=True)
class Answer:
    """One scripted answer: ``status`` with ``body`` after ``delay`` seconds; ``drop`` closes the
    connection without answering; ``hold`` keeps the request open until the server stops."""

    status: int = 200
    body: dict[str, Any] = field(default_factory=lambda: {"result": "done"})
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    drop: bool = False
    hold: bool = False


OK = Answer()
HOLD = Answer(hold=True)
DROP = Answer(drop=True)


class ScriptedService:
    """Answers request number n with ``script[n]`` (the last entry once the script is spent)."""

    def __init__(self, *script: Answer) -> None:
        self.script = list(script)
        self.keys: list[str] = []
        self.held = threading.Event()  # a held request arrived
        self._release = threading.Event()
        self._lock = threading.Lock()
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                with service._lock:
                    answer = service.script[min(len(service.keys), len(service.script) - 1)]
                    service.keys.append(self.headers.get(IDEMPOTENCY_HEADER, ""))
                if answer.hold:
                    service.held.set()
                    service._release.wait()
                    return
                if answer.drop:
                    self.close_connection = True
                    return
                service._release.wait(answer.delay)
                data = json.dumps(answer.body).encode()
                try:
                    self.send_response(answer.status)
                    for name, value in answer.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the caller gave up (a timed-out attempt)

            def log_message(self, *args: Any) -> None:
                return None

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/agent"

    @contextmanager
    def running(self) -> Iterator[ScriptedService]:
        with serving(self._httpd):
            try:
                yield self
            finally:
                self._release.set()  # held requests end instead of waiting forever


@action_decorator(InputEvent)
async def delegate(event: InputEvent, ctx: RunnerContext) -> None:
    result = await Subagent(ctx, "svc").call(event.input)
    ctx.send_event(OutputEvent(output=result.model_dump(mode="json")))


def _plan(target: ResourceDescriptor | Agent) -> AgentPlan:
    return compile_agent(add_subagents(Agent(name=AGENT), {"svc": target}).add_action(delegate))


def _http(service: ScriptedService, **arguments: Any) -> AgentPlan:
    arguments.setdefault("retry", FAST_RETRY)
    return _plan(ResourceDescriptor.of(HttpSubagent, url=service.url, **arguments))


def _delegations(store: ActionStateStore) -> list[CallResult]:
    states = store.get_run(RunKey(agent=AGENT, key=canonical_json("k"), seq=0))
    return [c for s in states for c in s.calls if c.call_id.startswith('["subagent"')]


async def _live(plan: AgentPlan, store: ActionStateStore) -> RunResult:
    engine = Runtime.build(plan, store=store).engine
    engine.submit("k", "ticket-1")
    await engine.drain()
    [result] = engine.take_results()
    return result


async def _cancel_when_held(
    plan: AgentPlan, store: ActionStateStore, service: ScriptedService
) -> KeyState:
    """Run until the service holds a request, then cancel the run (the job stops); returns the
    key state a checkpoint would hold (the input still pending)."""
    engine = Runtime.build(plan, store=store).engine
    engine.submit("k", "ticket-1")
    engine.pump()
    for _ in range(500):
        if service.held.is_set():
            break
        await asyncio.sleep(0.01)
    assert service.held.is_set(), "the held request never arrived"
    await asyncio.sleep(0.05)  # the attempt's record is flushed one group flush later
    state = engine.snapshot_key("k")
    await engine.close()
    return state


class Stores:
    """A live store and, for a new process, one restored from the checkpoint before the input."""

    def __init__(self) -> None:
        self.log = InMemoryLog()
        self.first = InMemoryActionStateStore(self.log)
        self.marker = self.first.recovery_marker()

    def restored(self) -> InMemoryActionStateStore:
        store = InMemoryActionStateStore(self.log)
        store.restore(self.marker)
        return store


# --- transient failures are attempted again, under the same key ----------------------------


@pytest.mark.parametrize(
    "first",
    [
        Answer(status=408),
        Answer(status=429, headers={"Retry-After": "0"}),
        Answer(status=500),
        Answer(status=503),
        Answer(delay=4.0),  # longer than the attempt's timeout
        DROP,
    ],
    ids=["408", "429", "500", "503", "timeout", "dropped"],
)
def test_transient_failure_is_attempted_again_with_the_same_key(first: Answer) -> None:
    stores = Stores()
    with ScriptedService(first, OK).running() as service:
        # A timeout generous enough that the second, good answer never misses it on a loaded
        # machine; the "timeout" case's first answer takes longer still.
        result = asyncio.run(_live(_http(service, timeout_seconds=1.5), stores.first))
    assert result.output_values == [{"success": True, "result": "done", "error_message": None}]
    assert len(service.keys) == 2 and len(set(service.keys)) == 1
    [record] = _delegations(stores.first)
    assert (record.status, record.attempts) == (CallStatus.SUCCEEDED, 2)


# --- permanent failures -------------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 401, 404, 409, 422])
def test_permanent_failure_is_one_attempt_and_replays_without_a_request(status: int) -> None:
    stores = Stores()
    refusal = Answer(status=status, body={"detail": "unknown customer"})
    with ScriptedService(refusal, OK).running() as service:
        live = asyncio.run(_live(_http(service), stores.first))
        [output] = live.output_values
        assert output["success"] is False
        assert f"failed: answered {status}:" in output["error_message"]
        assert "unknown customer" in output["error_message"]
        [record] = _delegations(stores.first)
        assert (record.status, record.attempts) == (CallStatus.FAILED, 1)

        replayed = asyncio.run(_live(_http(service), stores.restored()))
    assert replayed.output_values == live.output_values  # byte for byte
    assert len(service.keys) == 1  # the recorded failure was handed back, not sent again


def test_an_answer_over_max_response_bytes_fails_the_delegation_once() -> None:
    stores = Stores()
    huge = Answer(body={"result": "x" * 200_000})
    with ScriptedService(huge, OK).running() as service:
        result = asyncio.run(_live(_http(service, max_response_bytes=50_000), stores.first))
    [output] = result.output_values
    assert output["success"] is False
    assert "is larger than 50000 bytes (max_response_bytes)" in output["error_message"]
    assert len(service.keys) == 1  # final: another attempt would read the same body
    [record] = _delegations(stores.first)
    assert (record.status, record.attempts) == (CallStatus.FAILED, 1)


# --- the attempt budget ---------------------------------------------------------------------


def test_spent_budget_fails_the_delegation_after_max_attempts_under_one_key() -> None:
    stores = Stores()
    with ScriptedService(Answer(status=503, body={"detail": "overloaded"})).running() as service:
        result = asyncio.run(_live(_http(service), stores.first))
    [output] = result.output_values
    assert output["success"] is False
    assert "failed: answered 503:" in output["error_message"]
    assert output["error_message"].endswith("(attempt budget of 3 spent)")
    assert len(service.keys) == 3 and len(set(service.keys)) == 1
    [record] = _delegations(stores.first)
    assert (record.status, record.attempts) == (CallStatus.FAILED, 3)


def test_failed_attempts_before_a_restart_count_against_the_budget_the_one_it_ended_not() -> None:
    stores = Stores()
    script = (Answer(status=503), HOLD, Answer(status=503), Answer(status=503))
    with ScriptedService(*script).running() as service:
        plan = _http(service)
        state = asyncio.run(_cancel_when_held(plan, stores.first, service))
        [pending] = _delegations(stores.restored())
        assert (pending.status, pending.attempts, pending.failed_attempts) == (
            CallStatus.PENDING,
            2,
            1,
        )

        result, _ = asyncio.run(resume(plan, stores.restored(), "k", state))
    [output] = result.output_values
    assert "(attempt budget of 3 spent)" in output["error_message"]
    # One failed before the restart, one was ended by it: two more may fail after it.
    assert len(service.keys) == 4 and len(set(service.keys)) == 1
    [failed] = _delegations(stores.restored())
    assert (failed.status, failed.attempts, failed.failed_attempts) == (CallStatus.FAILED, 4, 3)


# --- cancellation -------------------------------------------------------------------------


def test_cancelled_caller_leaves_the_call_pending_and_replay_sends_it_with_the_same_key() -> None:
    stores = Stores()
    with ScriptedService(HOLD, OK).running() as service:
        plan = _http(service)
        state = asyncio.run(_cancel_when_held(plan, stores.first, service))
        [pending] = _delegations(stores.restored())
        assert (pending.status, pending.attempts) == (CallStatus.PENDING, 1)
        assert [p.input for p in state.pending] == ["ticket-1"]  # the run was not finished

        replay_store = stores.restored()
        result, _ = asyncio.run(resume(plan, replay_store, "k", state))
    assert result.output_values == [{"success": True, "result": "done", "error_message": None}]
    assert len(service.keys) == 2 and len(set(service.keys)) == 1  # the service deduplicates
    [record] = _delegations(replay_store)
    assert (record.status, record.attempts) == (CallStatus.SUCCEEDED, 2)


# --- an internal child's timeout ------------------------------------------------------------


class SlowChild(Agent):
    """A child whose one durable call takes longer than its delegation allows."""

    @action_decorator(InputEvent)
    async def think(event: InputEvent, ctx: RunnerContext) -> None:
        PROBE.counts["child"] += 1
        await ctx.durable_execute_async(_slow, event.input)
        ctx.send_event(OutputEvent(output="too late"))


async def _slow(value: Any) -> Any:
    await asyncio.sleep(5)
    return value


def test_internal_child_past_its_timeout_fails_the_delegation_and_replays_it() -> None:
    PROBE.reset()
    stores = Stores()
    parent = Agent(name=AGENT).add_subagent("svc", SlowChild(name="slow"), timeout_seconds=0.2)
    plan = compile_agent(parent.add_action(delegate))
    live = asyncio.run(_live(plan, stores.first))
    [output] = live.output_values
    assert output["success"] is False
    assert output["error_message"] == "sub-agent 'svc' did not finish within 0.2 s"
    [record] = _delegations(stores.first)
    assert record.status is CallStatus.FAILED

    replayed = asyncio.run(_live(plan, stores.restored()))
    assert replayed.output_values == live.output_values
    assert PROBE.counts["child"] == 1  # the recorded failure was handed back; no child run
