"""A restore from a checkpoint loses no input in process mode.

PyFlink 2.2 (process mode) registers the timers a bundle sets through the task's mailbox, after
the bundle ends; the bundle a checkpoint flushes before its barrier has its timers registered
only after the snapshot. The checkpoint then holds those keys' pending inputs and the source
past them, but no timer to visit the keys again: after a restore their outputs never come.
``AgentInput.apply`` (and ``JobSpec.flink_config()``) set one element per bundle in process mode,
which leaves no bundle open at a barrier.

The job: 600 inputs on 600 keys read at once, a small window (so ``process_element`` blocks and
bundles are full when a barrier comes), checkpoints every 200 ms, and a map that raises once at
the 450th output. Before the fix about one run in two lost a few dozen outputs (the ones of the
last bundle before the restored checkpoint); it can pass by luck without the fix (when no
checkpoint completes before the failure), never fail with it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyflink.common import Encoder, Types
from pyflink.datastream import MapFunction
from pyflink.datastream.connectors.file_system import FileSink

from flink_agents.agents import ReActAgent
from flink_agents.api import ChatModelSetup, Prompt, ResourceDescriptor
from flink_agents.flink import AgentsExecutionEnvironment, OperatorOptions
from tests.flink.conftest import filesystem_checkpoints, job_spec_settings
from tests.sample_agents import add_scripted_connection

pytestmark = [pytest.mark.flink]

INPUTS = 600
FAIL_AT = 450


class FailOnce(MapFunction):
    """Raises at the ``after``-th record of the first attempt (a flag file marks it done)."""

    def __init__(self, after: int, flag: str) -> None:
        self._after = after
        self._flag = flag

    def open(self, runtime_context: object) -> None:
        self._seen = 0

    def map(self, value: str) -> str:
        self._seen += 1
        flag = Path(self._flag)
        if self._seen >= self._after and not flag.exists():
            flag.write_text("failed")
            raise RuntimeError("test: injected failure")
        return value


def _one_call_agent() -> ReActAgent:
    agent = ReActAgent(
        name="restore_one_call",
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection="model", model="restore"),
        prompt=Prompt(text="{text}"),
    )
    add_scripted_connection(
        agent, "restore-test", [{"content": "ok: $input"}], resource="model", latency_seconds=0.05
    )
    return agent


def _settings(how: str, tmp_path: Path) -> dict[str, str]:
    checkpoints = tmp_path / "ckpt"
    if how == "job_spec":
        return job_spec_settings(
            checkpoints,
            execution_mode="process",
            accept_slow_process_mode=True,
            checkpointing={"interval_ms": 200},
            restart_strategy={"delay_ms": 200},
        )
    # A user's own environment: PyFlink's defaults (process mode, 1,000 elements per bundle).
    return {
        **filesystem_checkpoints(checkpoints, "200 ms"),
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": "3",
        "restart-strategy.fixed-delay.delay": "200 ms",
    }


@pytest.mark.parametrize("how", ["job_spec", "own_env"])
def test_restore_from_checkpoint_loses_no_input(make_flink_env, tmp_path: Path, how: str) -> None:
    env = make_flink_env(**_settings(how, tmp_path))
    agents = AgentsExecutionEnvironment(env, options=OperatorOptions(max_in_flight=50))
    records = [{"k": i, "text": f"q{i}"} for i in range(INPUTS)]
    flag = tmp_path / "failed"
    outputs = agents.from_list(records, key="k").apply(_one_call_agent()).to_datastream()
    outputs = outputs.map(FailOnce(FAIL_AT, str(flag)), output_type=Types.STRING())
    out_dir = tmp_path / "out"
    outputs.sink_to(FileSink.for_row_format(str(out_dir), Encoder.simple_string_encoder()).build())
    env.execute("restore-loses-no-input")

    assert flag.exists(), "the injected failure did not happen"
    # Committed part files only: a failed attempt leaves its in-progress file behind.
    lines = [
        json.loads(line)
        for path in out_dir.rglob("*")
        if path.is_file() and not path.name.startswith(".")
        for line in path.read_text().splitlines()
    ]
    missing = sorted(set(range(INPUTS)) - {line["key"] for line in lines})
    assert not missing, f"{len(missing)} inputs lost after the restore: {missing[:10]}"
