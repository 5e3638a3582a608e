"""Per-key budgets hold on the standalone cluster through TaskManager kills and a savepoint.

The agent (written here as YAML) asks a fake OpenAI-compatible model, one question after another
(``tests.budget_samples.ask_in_turn``), under a per-key budget of :data:`CAP_CALLS` calls'
tokens; its error policy is ``emit``, so a refused call ends its run with an error output
(``error_type: BudgetExceeded``). The fake model (:class:`tests.budget_samples.UsageServer`, a
real HTTP server in this process) answers every request after :data:`LATENCY_S` with the same
usage (:data:`CALL_TOKENS`) and notes each question: it is the witness. Questions are numbered
per key across its runs (``k3/0``, ``k3/1``, ...), so the witness knows each call's place in
its key's spend. The job is submitted with ``flink-agents submit`` and reads its inputs from
Kafka, writes its outputs to Kafka and keeps its durable calls in a Kafka action-state store.

1. **Kills**: :data:`KEYS` keys each send a run of 7 questions and then one of 23 (30 calls
   they would make) under a cap of 10 calls. Without a fault, and with the TaskManager killed
   (``kill -9``) once the witness has answered a number of calls drawn from a seed: every key's
   first run answers, its second ends with ``BudgetExceeded``; the witness saw exactly the
   questions 0 to 9 of every key (nothing after exhaustion); a question asked twice was one
   in flight at the kill (its outcome could not be recorded); the store records exactly 10
   calls' spend per key (read as ``flink-agents store inspect`` reads it), and the counter the
   refusal names equals it.
2. **A budget lowered at a restore**: each key sends one run of 30 questions under a cap of 10;
   with runs mid-way a savepoint is taken and the job cancelled; it is submitted again from the
   savepoint with a cap of :data:`LOWERED_CAP_CALLS`. The replays end (every run's output comes),
   no call recorded before the savepoint is sent again, and a key gets new calls only up to the
   lowered cap: it ends with max(recorded at the savepoint, lowered cap) calls recorded. A
   second run per key after the restore is refused before it asks anything.

``make test`` runs the kill of the first seed (a few minutes); ``make budget-failover``
(``FLINK_AGENTS_BUDGET_FAILOVER=1``) runs every scenario. docs/budgets.md has their results.
"""

from __future__ import annotations

import json
import os
import random
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from e2e.test_standalone_failover import (
    Outputs,
    TaskManagerKill,
    cancel,
    cluster_script,
    job_running,
    job_status,
    rest,
    submit,
    take_savepoint,
    taskmanager_log_tail,
    wait_for,
)
from flink_agents.durable.store.inspect import key_states, open_store, recorded_spend
from tests.budget_samples import CALL_TOKENS, MAX_TOKENS, UsageServer

pytestmark = [pytest.mark.cluster, pytest.mark.kafka, pytest.mark.flink]

KEYS = 20
CAP_CALLS = 10
LOWERED_CAP_CALLS = 5
RUNS = (7, 23)
"""The questions of each key's two runs in the kill scenario: 30 calls it would make."""
LATENCY_S = 0.25
"""The fake model's answer time: a key's ten calls take a few seconds, so a kill lands in them."""
KILL_SEEDS = (1, 2, 5, 7, 9)
"""Their moments (:func:`kill_moment`): 35, 15, 160, 83 and 119 answered calls of the 200."""
EVERY_SCENARIO = os.environ.get("FLINK_AGENTS_BUDGET_FAILOVER") == "1"
"""``make budget-failover``: every scenario; else only the first seed's kill (minutes each)."""
ONLY_WITH_MAKE_TARGET = pytest.mark.skipif(
    not EVERY_SCENARIO, reason="make budget-failover (FLINK_AGENTS_BUDGET_FAILOVER=1) runs it"
)
RECORDED_SLACK_S = 1.0
"""A call answered this long before a fault counts as recorded (the store acknowledges its
outcome just after the answer; the slack covers that write on a loaded machine)."""
REFUSAL = re.compile(r"budget 'per-key' exhausted: (\d+) tokens spent or reserved")


def kill_moment(seed: int) -> int:
    """How many calls the witness has answered when the TaskManager is killed: drawn from
    ``seed`` among all the calls the keys may make."""
    return random.Random(seed).randint(1, KEYS * CAP_CALLS - 1)


def agent_yaml(base_url: str, cap_calls: int) -> str:
    """The budgeted agent: ``ask_in_turn`` under a per-key cap of ``cap_calls`` calls' tokens
    (a call's worst case, its prompt's estimate plus ``max_tokens``, is under its real usage, so
    exactly ``cap_calls`` calls fit)."""
    agent = {
        "name": "budgeted",
        "error_policy": "emit",
        "actions": [{"function": "tests.budget_samples:ask_in_turn"}],
        "connections": {
            "llm": {"class": "openai", "arguments": {"base_url": base_url, "timeout_seconds": 30}}
        },
        "chat_models": {
            "model": {"connection": "llm", "model": "big", "arguments": {"max_tokens": MAX_TOKENS}}
        },
        "budgets": {"limits": [{"name": "per-key", "tokens": cap_calls * CALL_TOKENS}]},
    }
    return yaml.safe_dump({"agents": [agent]}, sort_keys=False)


@dataclass
class BudgetJob:
    """The budgeted agent's job on the standalone cluster: its topics, spec and witness."""

    cluster: Any
    bootstrap: str
    folder: Path
    server: UsageServer
    topics: dict[str, str]
    job_id: str | None = None

    @property
    def spec(self) -> Path:
        return self.folder / "budgets-job.yaml"

    def write(self, cap_calls: int) -> None:
        """The agent under ``cap_calls`` and the job spec naming it."""
        agent = self.folder / "budgeted-agent.yaml"
        agent.write_text(agent_yaml(self.server.base_url, cap_calls))
        spec = {
            "name": f"e2e-budgets-{self.topics['input']}",
            "agent": str(agent),
            "source": {
                "kind": "kafka",
                "topic": self.topics["input"],
                "bootstrap_servers": self.bootstrap,
                "group_id": self.topics["input"],
                "starting_offsets": "earliest",
            },
            "key": "key",
            "sink": {
                "kind": "kafka",
                "topic": self.topics["output"],
                "bootstrap_servers": self.bootstrap,
            },
            "execution_mode": "thread",
            "checkpointing": {"interval_ms": 500, "dir": str(self.folder / "ckpt")},
            # Restarts fail while no TaskManager is registered: a fresh one may take minutes to
            # start on a loaded machine.
            "restart_strategy": {"type": "fixed-delay", "attempts": 300, "delay_ms": 1000},
            "store": {
                "kind": "kafka",
                "bootstrap_servers": self.bootstrap,
                "topic": self.topics["store"],
                "partitions": 1,
            },
            # Ended runs' states stay in the store for the whole test: the check reads them.
            "operator": {"prune_after_ms": 3_600_000},
        }
        self.spec.write_text(yaml.safe_dump(spec, sort_keys=False))

    def submit(self, *options: str) -> None:
        self.job_id = submit(self.cluster, self.spec, *options)
        self.wait("the job to run", lambda: job_running(self.cluster, self.job_id), 120)

    def stopped(self) -> bool:
        """The job ended (cancelled after a savepoint): none of its tasks runs."""
        return rest(self.cluster, f"/jobs/{self.job_id}")["state"] in ("CANCELED", "FINISHED")

    def wait_for_checkpoint(self) -> None:
        def done() -> bool:
            counts = rest(self.cluster, f"/jobs/{self.job_id}/checkpoints")["counts"]
            return int(counts["completed"]) > 0

        self.wait("a completed checkpoint", done, 60)

    def state(self) -> str:
        answered = len(self.server.snapshot())
        return (
            f"job {self.job_id}: {job_status(self.cluster, self.job_id)}; witness answered "
            f"{answered}\n" + taskmanager_log_tail(self.cluster)
        )

    def wait(self, what: str, condition: Callable[[], bool], timeout_s: float) -> None:
        wait_for(what, condition, timeout_s, self.state)

    def recorded(self, first_of_run: dict[int, int]) -> dict[str, Recorded]:
        """Per key, what the store records (read as ``flink-agents store inspect`` reads it):
        the numbers of the questions whose call has recorded spend (call ``chat-i`` of run
        ``seq`` asked question ``first_of_run[seq] + i``) and the spend of them all."""
        store, corrupt = open_store(self.bootstrap, self.topics["store"])
        try:
            assert corrupt == 0, f"{corrupt} corrupt store records"
            found = {}
            for key in (f"k{k}" for k in range(KEYS)):
                states = key_states(store, key)
                numbers = {
                    first_of_run[state.key.seq] + int(call.call_id.removeprefix("chat-"))
                    for state in states
                    for call in state.calls
                    if call.spend is not None
                }
                found[key] = Recorded(numbers, recorded_spend(states).tokens)
            return found
        finally:
            store.close()


@dataclass(frozen=True)
class Recorded:
    """A key's calls with recorded spend, by question number, and the tokens they spent."""

    questions: set[int]
    tokens: int


@contextmanager
def budget_job(cluster: Any, bootstrap: str, folder: Path) -> Iterator[BudgetJob]:
    """A :class:`BudgetJob` with fresh topics and a started witness; on the way out the job is
    cancelled, the witness stopped and the topics deleted."""
    run_id = uuid.uuid4().hex[:8]
    topics = {t: f"e2e-budgets-{t}-{run_id}" for t in ("input", "output", "store")}
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics(
        [NewTopic(topics[t], num_partitions=1, replication_factor=1) for t in ("input", "output")]
    )
    server = UsageServer(latency_s=LATENCY_S).__enter__()
    job = BudgetJob(cluster, bootstrap, folder, server, topics)
    try:
        yield job
    except BaseException:
        print(job.state())
        raise
    finally:
        if job.job_id:
            cancel(cluster, job.job_id)
        server.__exit__(None, None, None)
        try:
            admin.delete_topics(list(topics.values()))
        except Exception as exc:  # the store topic may not exist if the job never opened
            print(f"deleting topics: {exc}")
        admin.close()


def produce(bootstrap: str, topic: str, inputs: list[dict[str, Any]], gap_s: float) -> None:
    """Write ``inputs`` to ``topic``, ``gap_s`` apart."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    try:
        for record in inputs:
            producer.send(topic, json.dumps(record).encode()).get(timeout=30)
            time.sleep(gap_s)
    finally:
        producer.close()


def by_run(records: list[dict[str, Any]]) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """The output records per (key, seq), duplicates kept (the sink is at least once)."""
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for record in records:
        runs.setdefault((record["key"], record["seq"]), []).append(record)
    return runs


def refused_at(records: list[dict[str, Any]]) -> set[int]:
    """The tokens the refusals of ``records`` name as spent (the key's counter then)."""
    spent = set()
    for record in records:
        assert record.get("error", {}).get("error_type") == "BudgetExceeded", record
        match = REFUSAL.search(record["error"]["message"])
        assert match, record["error"]["message"]
        spent.add(int(match.group(1)))
    return spent


def asked_questions(server: UsageServer) -> dict[str, Counter[int]]:
    """Per key, how many times each question number reached the witness."""
    asked: dict[str, Counter[int]] = {}
    for question, _, _ in server.snapshot():
        key, number = question.split("/")
        asked.setdefault(key, Counter())[int(number)] += 1
    return asked


# --- 1. a per-key cap through TaskManager kills -------------------------------------------------


KILLS = [
    pytest.param(None, id="no-fault", marks=ONLY_WITH_MAKE_TARGET),
    pytest.param(KILL_SEEDS[0], id=f"kill-seed-{KILL_SEEDS[0]}"),
    *(
        pytest.param(seed, id=f"kill-seed-{seed}", marks=ONLY_WITH_MAKE_TARGET)
        for seed in KILL_SEEDS[1:]
    ),
]


# A fresh TaskManager's first Python worker takes a minute to start on a loaded machine.
@pytest.mark.timeout(600)
@pytest.mark.parametrize("seed", KILLS)
def test_a_per_key_cap_lets_exactly_its_calls_through_a_taskmanager_kill(
    flink_cluster: Any,
    kafka_bootstrap: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    seed: int | None,
) -> None:
    started = time.monotonic()
    first_of_run = {0: 0, 1: RUNS[0]}
    inputs = [
        {"key": f"k{k}", "first": first_of_run[seq], "n": n}
        for seq, n in enumerate(RUNS)
        for k in range(KEYS)
    ]
    notes: list[str] = []
    with budget_job(flink_cluster, kafka_bootstrap, tmp_path) as job:
        job.write(CAP_CALLS)
        job.submit()
        job.wait_for_checkpoint()
        outputs = Outputs(kafka_bootstrap, job.topics["output"]).start()
        try:
            produce(kafka_bootstrap, job.topics["input"], inputs, gap_s=0.05)
            kill = 0.0
            if seed is not None:
                moment = kill_moment(seed)
                job.wait(
                    f"{moment} calls answered",
                    lambda: len(job.server.snapshot()) >= moment,
                    120,
                )
                taskmanager = TaskManagerKill(flink_cluster, job.job_id or "", job.state)
                try:
                    kill = taskmanager.kill()
                    answered_at_kill = len(job.server.snapshot())
                    taskmanager.recover()
                finally:
                    taskmanager.restore()
                notes.append(
                    f"killed after {moment} answered calls (seed {seed}; {answered_at_kill} "
                    f"reached the witness by the kill), recovered "
                    f"{time.monotonic() - started:.0f} s into the test"
                )
            expected = {(f"k{k}", seq) for k in range(KEYS) for seq in range(len(RUNS))}
            job.wait(
                f"the outputs of all {len(expected)} runs",
                lambda: expected <= set(by_run(outputs.snapshot())),
                180,
            )
            time.sleep(2)  # late duplicates (at-least-once sink) would arrive by now
        finally:
            outputs.stop()
        recorded = job.recorded(first_of_run)
        runs = by_run(outputs.snapshot())
        asked = asked_questions(job.server)
        in_flight = Counter(
            question.split("/")[0]
            for question, came, answered in job.server.snapshot()
            if came <= kill and answered >= kill - RECORDED_SLACK_S
        )

    sent_again = {key: sum(asked[key].values()) - len(asked[key]) for key in sorted(asked)}
    summary = [
        f"{KEYS} keys x runs of {RUNS} questions under a cap of {CAP_CALLS} calls: done in "
        f"{time.monotonic() - started:.0f} s",
        *notes,
        f"witness requests {sum(sum(c.values()) for c in asked.values())}, distinct "
        f"{sum(len(c) for c in asked.values())}; sent again {sum(sent_again.values())} "
        f"(in flight at the kill: {sum(in_flight.values())})",
        f"store: {sum(len(r.questions) for r in recorded.values())} calls with recorded spend, "
        f"{sum(r.tokens for r in recorded.values())} tokens; "
        f"output records {sum(len(r) for r in runs.values())} for {len(runs)} runs",
    ]
    with capsys.disabled():
        print("\n" + "\n".join(f"[budgets {seed or 'no-fault'}] {line}" for line in summary))

    assert set(runs) == {(f"k{k}", seq) for k in range(KEYS) for seq in range(len(RUNS))}
    for k in range(KEYS):
        key = f"k{k}"
        assert {json.dumps(r.get("output"), sort_keys=True) for r in runs[(key, 0)]} == {
            json.dumps({"answered": RUNS[0]})
        }, runs[(key, 0)]
        # Exactly the cap's calls reached the service, none after exhaustion.
        assert set(asked[key]) == set(range(CAP_CALLS)), (key, asked[key])
        assert recorded[key] == Recorded(set(range(CAP_CALLS)), CAP_CALLS * CALL_TOKENS), key
        # The counter the refusal names is the recorded usage.
        assert refused_at(runs[(key, 1)]) == {CAP_CALLS * CALL_TOKENS}, runs[(key, 1)]
    over = {key: n for key, n in sent_again.items() if n > in_flight.get(key, 0)}
    assert not over, f"calls sent again that were not in flight at the kill: {over} > {in_flight}"


# --- 2. a budget lowered between a savepoint and its restore -----------------------------------


@ONLY_WITH_MAKE_TARGET
@pytest.mark.timeout(600)
def test_a_budget_lowered_at_a_restore_lets_the_replays_end_and_refuses_new_calls(
    flink_cluster: Any, kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.monotonic()
    calls = 30
    first_of_run = {0: 0, 1: calls}
    with budget_job(flink_cluster, kafka_bootstrap, tmp_path) as job:
        job.write(CAP_CALLS)
        job.submit()
        job.wait_for_checkpoint()
        outputs = Outputs(kafka_bootstrap, job.topics["output"]).start()
        try:
            # Keys come 0.3 s apart: at the savepoint some have ended, some are mid-way, some
            # have asked nothing yet.
            inputs = [{"key": f"k{k}", "first": 0, "n": calls} for k in range(KEYS)]
            produce(kafka_bootstrap, job.topics["input"], inputs, gap_s=0.3)
            quarter = KEYS * CAP_CALLS // 4
            job.wait(
                f"{quarter} calls answered", lambda: len(job.server.snapshot()) >= quarter, 120
            )
            moment = time.time()
            # Thread mode leaves the operator open after its task ended (stopped or cancelled):
            # the engine goes on asking the model until an attempt of the agent opens in that
            # interpreter (runtime/keyed.py), hence the TaskManager killed after this.
            savepoint = take_savepoint(flink_cluster, job.job_id or "", tmp_path / "sp", stop=True)
            job.wait("the job to stop", job.stopped, 60)
            stopped = time.time()
            # The stopped job's engine outlives it in the TaskManager's interpreter (thread
            # mode leaves its operator open, see stop_with_savepoint): kill that TaskManager,
            # as its engine would otherwise go on asking under the old budget.
            killed = TaskManagerKill(flink_cluster, job.job_id or "", job.state).kill()
            cluster_script(flink_cluster, "start-taskmanager")
            before = {key: len(r.questions) for key, r in job.recorded(first_of_run).items()}
            ended_before = set(by_run(outputs.snapshot()))
            asked_before = len(job.server.snapshot())
            job.write(LOWERED_CAP_CALLS)
            restored = time.time()
            job.submit("--from-savepoint", savepoint)
            # A second run of every key after the restore: the lowered cap refuses it at once.
            produce(
                kafka_bootstrap,
                job.topics["input"],
                [{"key": f"k{k}", "first": calls, "n": 1} for k in range(KEYS)],
                gap_s=0.0,
            )
            expected = {(f"k{k}", seq) for k in range(KEYS) for seq in (0, 1)}
            job.wait(
                f"the outputs of all {len(expected)} runs",
                lambda: expected <= set(by_run(outputs.snapshot())),
                180,
            )
            time.sleep(2)
        finally:
            outputs.stop()
        after = job.recorded(first_of_run)
        runs = by_run(outputs.snapshot())
        asked = job.server.snapshot()

    answered_before_savepoint = {
        q for q, _, answered in asked if answered < moment - RECORDED_SLACK_S
    }
    orphaned = [q for q, came, _ in asked if stopped <= came < killed]
    asked_while_stopped = [q for q, came, _ in asked if killed <= came < restored]
    asked_after_restore = [q for q, came, _ in asked if came >= restored]
    resent = [q for q in asked_after_restore if q in answered_before_savepoint]
    new_after: Counter[str] = Counter(q.split("/")[0] for q in asked_after_restore)
    summary = [
        f"{KEYS} keys x one run of {calls} questions, cap {CAP_CALLS} calls, lowered to "
        f"{LOWERED_CAP_CALLS} at the restore: done in {time.monotonic() - started:.0f} s",
        f"savepoint after {asked_before} answered calls; recorded per key at it "
        f"{dict(sorted(Counter(before.values()).items()))} (calls: keys); "
        f"{len(ended_before)} runs had ended",
        f"requests after the stop by its orphaned engine (killed {killed - stopped:.1f} s "
        f"later): {len(orphaned)}; after the kill and before the restore: "
        f"{len(asked_while_stopped)}; after the restore "
        f"(+{time.time() - restored:.0f} s): {len(asked_after_restore)}, "
        f"{len(resent)} of them calls answered before the savepoint",
    ]
    with capsys.disabled():
        print("\n" + "\n".join(f"[budgets lowered] {line}" for line in summary))

    assert any(0 < n < CAP_CALLS for n in before.values()), f"no run mid-way: {before}"
    assert not asked_while_stopped, f"requests while the job was stopped: {asked_while_stopped}"
    assert not resent, f"recorded calls sent again after the restore: {resent}"
    assert set(runs) == {(f"k{k}", seq) for k in range(KEYS) for seq in (0, 1)}
    for k in range(KEYS):
        key = f"k{k}"
        final = max(before[key], LOWERED_CAP_CALLS)
        # The replay kept every recorded call; new ones came only up to the lowered cap.
        seen = sorted(
            (q, round(came - stopped, 2), round(done - stopped, 2))
            for q, came, done in asked
            if q.startswith(f"{key}/")
        )
        assert after[key] == Recorded(set(range(final)), final * CALL_TOKENS), (
            key,
            before[key],
            f"asked (s after the stop; savepoint at {moment - stopped:.2f}, restore submitted "
            f"at {restored - stopped:.2f}): {seen}",
        )
        assert new_after[key] == final - before[key], (key, before[key], new_after[key])
        # Both runs end refused, naming the counter: everything the key recorded.
        assert refused_at(runs[(key, 0)]) == {final * CALL_TOKENS}, (key, runs[(key, 0)])
        assert refused_at(runs[(key, 1)]) == {final * CALL_TOKENS}, (key, runs[(key, 1)])
