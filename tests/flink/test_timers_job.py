"""Timers on the mini-cluster with the Kafka store, across a real failure (docs/waits.md,
"Timers"): each order's run sleeps (a keyed timer resumes it) and schedules a reminder (a keyed
timer delivers it as a new run of the key). The job checkpoints every 300 ms and fails once on
purpose (``FailOnce`` of examples/demo.py, a map after the agent) while runs sleep and
reminders are pending; Flink restores the checkpoint. Every reminder fires exactly once (one
committed output, one call), and no call made before a sleep is made again.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from pathlib import Path

import pytest
from pyflink.common import Encoder, Types
from pyflink.datastream.connectors.file_system import FileSink

from examples.demo import FailOnce, read_outputs
from flink_agents.api import InputEvent, OutputEvent, RunnerContext, action
from flink_agents.durable.store import StoreConfig
from flink_agents.flink import AgentsExecutionEnvironment
from flink_agents.testing.plans import agent_plan
from tests.flink.conftest import job_spec_settings

pytestmark = [pytest.mark.flink, pytest.mark.kafka]

ORDERS = 6
TICKS = 40  # inputs of other keys after the orders, so the bounded source outlives the timers
RECORDS_PER_SECOND = 6
SLEEP_S = 1.0
REMIND_AFTER_S = 4.0
FAIL_AFTER = 2 * ORDERS  # outputs: every order asleep, then awake; the reminders still pending


def note(what: str, witness: str) -> str:
    """A call with a side effect: a line in the ``witness`` file (the job's Python workers may
    run in another process), with its time."""
    with open(witness, "a") as calls:
        calls.write(f"{time.time()} {what}\n")
    return what


def calls_made(witness: Path) -> dict[str, list[float]]:
    made: dict[str, list[float]] = defaultdict(list)
    for line in witness.read_text().splitlines():
        at, what = line.split(" ", 1)
        made[what].append(float(at))
    return made


@action(InputEvent)
async def order(event: InputEvent, ctx: RunnerContext) -> None:
    given = event.input
    if "tick" in given:
        return
    if given.get("reminder"):
        done = await ctx.durable_execute_async(note, f"remind {given['k']}", given["witness"])
        ctx.send_event(OutputEvent(output={"reminded": done}))
        return
    await ctx.durable_execute_async(note, f"take {given['k']}", given["witness"])
    await ctx.schedule({**given, "reminder": True}, delay_s=REMIND_AFTER_S)
    await ctx.sleep(SLEEP_S)
    done = await ctx.durable_execute_async(note, f"confirm {given['k']}", given["witness"])
    ctx.send_event(OutputEvent(output={"confirmed": done}))


def test_reminders_fire_once_across_a_failover_and_nothing_before_a_sleep_runs_again(
    make_flink_env, kafka_bootstrap: str, tmp_path: Path
) -> None:
    witness = tmp_path / "calls.txt"
    witness.touch()
    checkpoints = tmp_path / "ckpt"
    env = make_flink_env(
        **job_spec_settings(
            checkpoints,
            checkpointing={"interval_ms": 300},
            restart_strategy={"delay_ms": 500},
        )
    )
    store = StoreConfig(
        kind="kafka", bootstrap_servers=kafka_bootstrap, topic=f"test-timers-{uuid.uuid4().hex}"
    )
    records = [{"k": f"o-{n}", "witness": str(witness)} for n in range(ORDERS)]
    records += [{"k": f"tick-{n}", "tick": True} for n in range(TICKS)]
    agents = AgentsExecutionEnvironment(env, store=store)
    outputs = (
        agents.from_list(records, key="k", records_per_second=RECORDS_PER_SECOND)
        .apply(agent_plan(order, name="timers_job"))
        .to_datastream()
    )
    marker = tmp_path / "failure-injected"
    outputs = outputs.map(
        FailOnce(str(marker), FAIL_AFTER, str(checkpoints)), output_type=Types.STRING()
    )
    out_dir = tmp_path / "out"
    outputs.sink_to(FileSink.for_row_format(str(out_dir), Encoder.simple_string_encoder()).build())
    env.execute("timers-failover")

    assert marker.exists(), "the injected failure did not happen"
    failed_at = float(marker.read_text())
    lines = read_outputs(out_dir)
    keys = [f"o-{n}" for n in range(ORDERS)]
    asleep = sorted(line["key"] for line in lines if "waiting" in line)
    confirmed = sorted(line["output"]["confirmed"] for line in lines if "confirmed" in str(line))
    reminded = sorted(line["output"]["reminded"] for line in lines if "reminded" in str(line))
    assert not [line for line in lines if "error" in line or "refused" in line], lines
    assert asleep == keys
    assert confirmed == [f"confirm {key}" for key in keys]
    assert reminded == [f"remind {key}" for key in keys]  # each follow-up's output once

    calls = calls_made(witness)
    made = {what: len(times) for what, times in calls.items()}
    assert made == {f"{what} {key}": 1 for key in keys for what in ("take", "confirm", "remind")}
    # The failure came after the orders were taken, before their reminders fired.
    assert max(calls[f"take {key}"][0] for key in keys) < failed_at
    assert min(calls[f"remind {key}"][0] for key in keys) > failed_at
