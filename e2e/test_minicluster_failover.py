"""`make run`'s demo keeps its promise: one injected failure, every ticket answered exactly once,
no completed call made again, no recorded failure sent again, and every ticket's model
conversation the same as without the failure.

``python -m examples.demo`` runs the support-desk job on the PyFlink mini-cluster
with a Kafka action-state store and the example services (the witness) in its own process. After
a checkpoint it fails once on purpose (FailOnce, in the job itself); Flink restores the
checkpoint and replays. The billing service refuses the tickets of two customers (404, final), so
six delegations fail. The demo exits 0 only if its report holds: 24 distinct answers for 24
tickets, no error, zero calls re-invoked that had completed before the failure (failed ones
included), and each ticket's model requests byte-identical to those of a no-fault run of the same
agent (the local runner, before the job). This test runs it as a subprocess, as a user would, and
checks the exit code, the printed report and its JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from examples.services import wait_until_port_free

pytestmark = [pytest.mark.flink, pytest.mark.kafka]

REPO = Path(__file__).resolve().parents[1]
SERVICES_PORT = 8765  # the demo's example services (the agent YAML points there)


def test_demo_answers_every_ticket_once_and_reinvokes_nothing(
    kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wait_until_port_free(SERVICES_PORT, timeout_s=60)
    summary_file = tmp_path / "report.json"
    # The mini-cluster litters the JVM's temp folder otherwise (docs/operations.md).
    # PyFlink marks a process that ran Python functions in loopback mode (this one, if Flink
    # tests ran before) with PYFLINK_GATEWAY_DISABLED; the demo must not inherit that.
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYFLINK_")}
    env["JVM_ARGS"] = f"-Djava.io.tmpdir={tmp_path}"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "examples.demo", "--json", str(summary_file)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=270,
    )
    seconds = time.monotonic() - started
    report = done.stdout[done.stdout.find("inputs:") :]
    with capsys.disabled():  # CI logs show the report even when the test passes
        print(f"\n[mini-cluster failover] demo exited {done.returncode} after {seconds:.0f} s")
        print("\n".join(f"[mini-cluster failover] {line}" for line in report.splitlines()))
    failure = f"demo exited {done.returncode}\n{done.stdout}\n{done.stderr[-4000:]}"
    assert done.returncode == 0, failure

    assert "outputs:      24 (24 distinct answers, 0 errors)" in report, failure
    assert "calls re-invoked after the failure: 0 (expected 0)" in report, failure
    assert "result:       OK" in report, failure
    summary = json.loads(summary_file.read_text())
    assert summary["failure_injected"], summary
    assert (summary["outputs"], summary["distinct_answers"], summary["errors"]) == (24, 24, 0)
    assert summary["reinvoked_total"] == 0, summary
    assert summary["delegations"] == {"researcher": 24, "billing": 24}, summary

    # Two unknown customers of eight, three tickets each: six final billing failures, each sent
    # once; the model saw the same conversation for every ticket as in the no-fault run.
    assert "0 re-invoked (expected 0)" in report, failure
    assert "conversations equal to the no-fault run: 24/24" in report, failure
    assert (summary["billing_failures"], summary["billing_failures_reinvoked"]) == (6, 0), summary
    assert (summary["conversations_equal"], summary["conversations_compared"]) == (24, 24)
