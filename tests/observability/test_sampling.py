"""Sampling the event log (for very high rates): a fraction of the runs, chosen by each run's
identity, every record of a kept run, every failed run's start and end; the metrics count all."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from flink_agents.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents.observability import EventLog, EventLogConfig, MetricsListener, read_records
from flink_agents.observability.sinks.metrics import RUNS_FAILED, RUNS_STARTED
from flink_agents.runtime import run_local

RUNS = 300


@action(InputEvent)
async def answer_or_fail(event: InputEvent, ctx: RunnerContext) -> None:
    if event.input["n"] % 10 == 0:
        raise ValueError(f"no answer for {event.input['n']}")
    ctx.send_event(OutputEvent(output=event.input["n"]))


def _agent() -> Agent:
    agent = Agent(name="sampled", error_policy="emit")
    agent.add_action(answer_or_fail)
    return agent


def _sampled_run(path: Path, sample: float) -> MetricsListener:
    metrics = MetricsListener()
    run_local(
        _agent(),
        [{"n": n} for n in range(RUNS)],
        key="n",
        event_log=EventLogConfig(path=str(path), sample_runs=sample),
        listeners=[metrics],
    )
    return metrics


def test_a_sampled_log_keeps_whole_runs_chosen_by_identity_and_every_failed_run(tmp_path):
    metrics = _sampled_run(tmp_path / "a.jsonl", 0.25)
    records = list(read_records(tmp_path / "a.jsonl"))
    kinds_by_key: dict[int, list[str]] = {}
    for record in records:
        kinds_by_key.setdefault(record.key, []).append(record.kind)

    failed = {n for n in range(RUNS) if n % 10 == 0}
    kept = {n for n, kinds in kinds_by_key.items() if "action_started" in kinds}
    assert 0.15 * RUNS < len(kept) < 0.35 * RUNS  # about the fraction asked for
    for n in kept:  # a kept run has all its records
        assert {"run_admitted", "run_started", "action_finished", "run_finished"} <= set(
            kinds_by_key[n]
        )
    for n in failed - kept:  # a failed run left out: its start and its end, with the error
        assert kinds_by_key[n] == ["run_started", "run_finished"]
    assert set(kinds_by_key) == kept | failed
    assert all(
        r.error and "no answer" in r.error
        for r in records
        if r.kind == "run_finished" and r.key in failed
    )
    log = EventLog([], sample=0.25)
    assert kept == {n for n in range(RUNS) if log.kept(_Run("sampled", n, 0))}  # by identity
    assert metrics.total(RUNS_STARTED) == RUNS  # the metrics count every run
    assert metrics.total(RUNS_FAILED) == len(failed)

    _sampled_run(tmp_path / "b.jsonl", 0.25)  # again (a replay, another process): the same runs
    assert (tmp_path / "b.jsonl").read_text().count('"kind":"run_started"') == len(kept | failed)


def test_without_sampling_every_run_is_kept(tmp_path):
    _sampled_run(tmp_path / "all.jsonl", 1.0)
    text = (tmp_path / "all.jsonl").read_text()
    assert text.count('"kind":"action_started"') == RUNS


@pytest.mark.parametrize("sample", [0.0, -0.5, 1.5])
def test_a_sample_outside_zero_to_one_is_refused(sample):
    with pytest.raises(ValidationError):
        EventLogConfig(sample_runs=sample)
    with pytest.raises(ValueError, match="sample"):
        EventLog([], sample=sample)


class _Run:
    def __init__(self, agent: str, key: object, seq: int) -> None:
        self.agent, self.key, self.seq = agent, key, seq
