"""Sub-agents, actions and types the sub-agent tests reference by ``module:qualname``."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

from pydantic import BaseModel

from flink_agents.agents import ReActAgent
from flink_agents.api import (
    Agent,
    ChatModelSetup,
    InputEvent,
    OutputEvent,
    Resource,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents.api.subagents.delegation import (
    Subagent,
    SubagentRequest,
    SubagentResult,
    SubagentSetup,
)
from flink_agents.durable import CallProbe, DurableCall, DurableCalls
from flink_agents.durable.store import (
    ActionState,
    CallResult,
    InMemoryActionStateStore,
    InMemoryLog,
    RunKey,
    StoreWriteError,
    canonical_json,
)
from flink_agents.plan import compile_agent
from flink_agents.runtime import RunResult, run_local
from tests.sample_agents import add_scripted_connection


class Review(BaseModel):
    verdict: str
    score: int


class ReviewInput(BaseModel):
    text: str


class Node(BaseModel):
    """Self-referential: cannot be rendered as a plain object schema."""

    children: list[Node] = []


class FakeSubagent(SubagentSetup):
    """Answers by ``mode``; counts invocations and keeps the requests it got, per ``counter``."""

    calls: ClassVar[Counter[str]] = Counter()
    requests: ClassVar[dict[str, list[SubagentRequest]]] = {}

    mode: str = "echo"
    counter: str = "fake"

    async def invoke(self, request: SubagentRequest, ctx: RunnerContext) -> Any:
        await asyncio.sleep(0)
        FakeSubagent.calls[self.counter] += 1
        FakeSubagent.requests.setdefault(self.counter, []).append(request)
        if self.mode == "raise":
            raise RuntimeError("boom " + "x" * 3_000)  # with the trace, above the cap
        if self.mode == "raise_wide":
            raise RuntimeError("bøøm " * 1_000)  # 6,000 UTF-8 bytes in 5,000 characters
        if self.mode == "store_error":
            raise StoreWriteError("1 write not acknowledged")  # infrastructure, not the work
        if self.mode == "set":
            return {"tags": [1, {"inner": {1, 2}}]}
        if self.mode == "nan":
            return {"score": float("nan")}
        if self.mode == "review":
            return {"verdict": "approve", "score": 7, "extra": "ignored"}
        return {"echo": request.input}

    @classmethod
    def reset(cls) -> None:
        cls.calls.clear()
        cls.requests.clear()


class NotASubagent(Resource):
    """An AGENT resource that is no SubagentSetup: cannot be offered as a callable."""

    resource_type = ResourceType.AGENT


DELEGATED: list[SubagentResult] = []
"""Every result :func:`delegate` was handed, as it was handed (outputs hold their JSON form)."""


@action(InputEvent)
async def delegate(event: InputEvent, ctx: RunnerContext) -> None:
    """Submits ``input["calls"]``: ``[sub-agent, input, session or None]`` each, all at once."""
    futures = [
        Subagent(ctx, name).submit(payload, session_id=session)
        for name, payload, session in event.input["calls"]
    ]
    for result in await asyncio.gather(*futures):
        DELEGATED.append(result)
        ctx.send_event(OutputEvent(output=result))


def delegation_results(outputs: list[Any]) -> list[SubagentResult]:
    """The outputs of :func:`delegate` (in JSON form, as every output) read back as results."""
    return [SubagentResult.model_validate(output) for output in outputs]


def model_agent(
    name: str, turns: list[dict[str, Any]], *, subagents: list[str], tools: tuple[Any, ...] = ()
) -> ReActAgent:
    """A prompt-less ReAct agent on the scripted connection ``name`` offering ``subagents``."""
    agent = ReActAgent(
        name=name,
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection="conn", model=name),
        subagents=subagents,
        tools=tools,
    )
    add_scripted_connection(agent, name, turns)
    return agent


def add_subagents(agent: Agent, subagents: dict[str, ResourceDescriptor | Agent]) -> Agent:
    """Register each target: an agent as an internal sub-agent, a descriptor as a resource."""
    for name, target in subagents.items():
        if isinstance(target, Agent):
            agent.add_subagent(name, target)
        else:
            agent.add_resource(name, ResourceType.AGENT, target)
    return agent


def caller_agent(**subagents: ResourceDescriptor | Agent) -> Agent:
    """An agent whose one action runs the calls its input lists."""
    return add_subagents(Agent(name="caller", error_policy="emit"), subagents).add_action(delegate)


def lookup_fact(topic: str) -> str:
    """Look a fact up.

    Args:
        topic: What to look up.
    """
    return f"fact about {topic}"


# --- the real durable runner, replaying every action's calls ------------------------------------


# --- recorded runs: DurableCalls over an in-memory store, the live calls seen by a probe -------


class CallsMade(CallProbe):
    """The calls made live (not handed back from a record), in the order they were made."""

    def __init__(self) -> None:
        self.calls: list[DurableCall] = []

    def invoke(self, call: DurableCall, *, blocking: bool = False) -> Any:
        self.calls.append(call)
        return call.invoke()


@dataclass
class RecordedRuns:
    """Runs an agent on one input as a job does: its durable calls go through ``DurableCalls``
    over an in-memory store (the codec, statuses and replay checks of the real path), and
    ``made`` sees every call made live. :meth:`crashed` is what a new process finds after a
    crash while the run was in flight."""

    store: InMemoryActionStateStore = field(default_factory=InMemoryActionStateStore)
    made: CallsMade = field(default_factory=CallsMade)
    agent: str | None = None  # the plan's name, once run

    @property
    def identities(self) -> list[DurableCall]:
        """The calls made live, in order."""
        return self.made.calls

    def run(self, agent: Agent, value: Any, key: Any = "k") -> RunResult:
        plan = compile_agent(agent)
        self.agent = plan.name
        calls = DurableCalls.for_plan(self.store, plan.name, plan.config, probe=self.made)
        [result] = run_local(plan, [value], key=lambda _: key, call_runner=calls)
        return result

    def recorded(self, call: DurableCall, key: Any = "k") -> CallResult:
        """The store's record of ``call`` (of the run of ``key``)."""
        found = {c.call_id: c for state in self._states(key) for c in state.calls}
        return found[call.identity.call_id]

    def crashed(self, *, forget: DurableCall | None = None, key: Any = "k") -> RecordedRuns:
        """A new store holding the run's records with none of its actions completed (and
        ``forget``'s record pending: the call was then in flight): replaying the input runs the
        actions again, and each recorded call is handed back, decoded from the log, instead
        of made."""
        log = InMemoryLog()
        writer = InMemoryActionStateStore(log)
        marker = writer.recovery_marker()
        forgotten = None if forget is None else forget.identity.call_id
        for state in self._states(key):
            calls = [_in_flight(c) if c.call_id == forgotten else c for c in state.calls]
            update = {"completed": False, "events": [], "memory_updates": [], "calls": calls}
            writer.put(state.model_copy(update=update))
        writer.flush()
        store = InMemoryActionStateStore(log)  # a new process's, restored from the checkpoint
        store.restore(marker)
        return RecordedRuns(store)

    def _states(self, key: Any) -> list[ActionState]:
        assert self.agent is not None, "run an agent first"
        return self.store.get_run(RunKey(agent=self.agent, key=canonical_json(key), seq=0))


def _in_flight(call: CallResult) -> CallResult:
    """``call``'s record as it was while the call was in flight: started, no outcome."""
    return CallResult.pending(
        call.call_id,
        function=call.function,
        args_digest=call.args_digest,
        arguments=call.arguments,
        started_at=call.started_at,
        kind=call.kind,
    )


# --- a local HTTP sub-agent server ---------------------------------------------------------------


@contextmanager
def serving(httpd: ThreadingHTTPServer) -> Iterator[None]:
    """Serve ``httpd`` from a thread of its own for the block; then shut it down and close it."""
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


class SubagentServer:
    """An HTTP sub-agent on 127.0.0.1 that counts requests per idempotency key.

    ``/echo`` answers ``{"result": {"echo": input}}``, ``/refuse`` reports an error, ``/broken``
    answers 500, ``/garbage`` answers non-JSON.
    """

    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        self.bodies: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests[self.headers.get("Idempotency-Key", "")] += 1
                server.bodies.append(body)
                status, answer = 200, b""
                if self.path == "/echo":
                    answer = json.dumps({"result": {"echo": body["input"]}}).encode()
                elif self.path == "/refuse":
                    answer = json.dumps({"error": "customer unknown"}).encode()
                elif self.path == "/broken":
                    status, answer = 500, b"internal trouble"
                else:
                    answer = b"<html>not json</html>"
                self.send_response(status)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                return None

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @contextmanager
    def running(self) -> Iterator[SubagentServer]:
        with serving(self._httpd):
            yield self


# --- internal children -----------------------------------------------------------------------


class ShoutAgent(Agent):
    """A plain child: upper-cases its input, with a suffix from its own action config."""

    @action(InputEvent, config={"suffix": "!"})
    def shout(event: InputEvent, ctx: RunnerContext) -> None:
        if event.input == "fail":
            raise ValueError("cannot shout 'fail'")
        ctx.send_event(OutputEvent(output=str(event.input).upper() + ctx.action_config["suffix"]))


def react_child(
    name: str,
    turns: list[dict[str, Any]],
    *,
    tools: tuple[Any, ...] = (),
    prompt: Any = None,
    output_schema: type[BaseModel] | None = None,
) -> ReActAgent:
    """A ReAct agent with its own scripted model (counters under ``name``)."""
    agent = ReActAgent(
        name=name,
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection=f"{name}_conn"),
        tools=tools,
        prompt=prompt,
        output_schema=output_schema,
    )
    add_scripted_connection(agent, name, turns, resource=f"{name}_conn")
    return agent


LOOKUPS: Counter[str] = Counter()


def counted_lookup(topic: str) -> str:
    """Look a topic up (counted).

    Args:
        topic: What to look up.
    """
    LOOKUPS[topic] += 1
    return f"notes on {topic}"
