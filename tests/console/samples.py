"""What the console's tests show: a real event log and outputs of the refunds example
(examples/refunds.py) run locally -- two orders paused for approval -- and a run a failover
cut off and executed again, its first call handed back (``replayed``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from examples.refunds import build_agent
from flink_agents.console import ConsoleSources
from flink_agents.durable.store import StoreConfig
from flink_agents.observability import (
    ActionFinished,
    ActionStarted,
    CallFinished,
    EventLogConfig,
    RunFinished,
    RunStarted,
)
from flink_agents.runtime import RunResult, RuntimeSettings, run_local

ORDERS = [{"order": "o-1"}, {"order": "o-2"}]
FAILOVER_KEY = "o-9"


@dataclass(frozen=True)
class Sample:
    event_log: Path
    outputs: Path
    decisions: Path
    paused: list[RunResult]

    def sources(self, **more: Any) -> ConsoleSources:
        return ConsoleSources(
            event_log=str(self.event_log),
            outputs=str(self.outputs),
            decisions_file=str(self.decisions),
            key_field="order",
            agent="examples.refunds:build_agent",
            **more,
        )


def refunds_sample(folder: Path) -> Sample:
    """Run the two orders until they pause; their waiting records as the job's outputs; and
    a failed-over run appended to the event log."""
    event_log = folder / "events.jsonl"
    settings = RuntimeSettings(
        store=StoreConfig(kind="memory"), event_log=EventLogConfig(path=str(event_log))
    )
    paused = run_local(build_agent(), ORDERS, key="order", settings=settings)
    outputs = folder / "outputs.jsonl"
    with outputs.open("w") as out:
        for result in paused:
            assert result.paused is not None
            run = result.run_id
            waiting = result.paused.model_dump(mode="json", exclude_defaults=True)
            out.write(
                json.dumps({"agent": run.agent, "key": run.key, "seq": run.seq, "waiting": waiting})
                + "\n"
            )
    with event_log.open("a") as log:
        for record in failed_over_run(paused[-1].run_id.agent, 2_000_000_000.0):
            log.write(record.model_dump_json() + "\n")
    return Sample(event_log, outputs, folder / "decisions.jsonl", paused)


def failed_over_run(agent: str, at: float) -> list[Any]:
    """A run cut off after its model call (no end: the process was killed), executed again
    with the call handed back from the store, then finished."""
    run = {"agent": agent, "key": FAILOVER_KEY, "seq": 0}
    action = {"action": "chat_action", "event_id": "e" * 32}
    call = {
        **action,
        "call_id": "chat",
        "call_kind": "model",
        "function": "flink_agents.api.chat_models:ChatModelSetup.chat",
        "target": "scripted-1",
        "arguments": {"messages": ["o-9"], "api_key": "sk-not-to-be-shown-0123456789"},
        "result": {"content": "refunded"},
    }
    return [
        RunStarted(time=at, **run, input={"order": FAILOVER_KEY}),
        ActionStarted(time=at + 0.1, **run, **action, event_type="ChatRequestEvent"),
        CallFinished(time=at + 0.2, **run, **call, outcome="live", attempts=1, latency_ms=90.0),
        RunStarted(time=at + 5, **run, input={"order": FAILOVER_KEY}),
        ActionStarted(time=at + 5.1, **run, **action, event_type="ChatRequestEvent"),
        CallFinished(time=at + 5.2, **run, **call, outcome="replayed", latency_ms=0.3),
        ActionFinished(
            time=at + 5.3, **run, **action, event_type="ChatRequestEvent", latency_ms=200.0
        ),
        RunFinished(time=at + 5.4, **run, status="succeeded", latency_ms=400.0, outputs=1),
    ]
