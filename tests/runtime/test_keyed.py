"""The per-key logic, driven directly as a keyed host drives it.

Keyed state is a plain dict of saved values by key (what Flink restores is a copy of it), timers
are what the logic asks for, and the action-state store is an in-memory log shared by the
attempts, the way a Kafka topic outlives a failed task. The failover itself is covered on real
clusters in e2e/.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from examples import customer_memory
from examples.weather import build_agent
from flink_agents.durable.call import DurableCall
from flink_agents.durable.freeze_fence import FreezeFence, FrozenProcessError
from flink_agents.durable.store import (
    CRC32_PLACEMENT,
    ActionState,
    InMemoryActionStateStore,
    InMemoryLog,
    KeyGroupRange,
    Placement,
    RecordCodec,
    RecoveryMarker,
    StoreError,
    key_group,
)
from flink_agents.durable.store.store_config import StoreConfig
from flink_agents.observability import EventLogConfig, Observer
from flink_agents.observability.sinks import queued
from flink_agents.plan.compile import compile_agent
from flink_agents.plan.models import AgentPlan
from flink_agents.runtime import OperatorOptions, RuntimeSettings, keyed
from flink_agents.runtime.host import EngineHost
from flink_agents.runtime.keyed import KeyedAgentLogic, SavedKey, Visit
from flink_agents.runtime.recovery import MarkerClock
from flink_agents.runtime.state import KeyState
from tests.sample_agents import EchoAgent, fail_on_negative, remembering_agent

WEATHER = compile_agent(build_agent())


@dataclass
class KeySlot:
    """One key's saved value in a dict of keyed state (the logic's ``SavedState``)."""

    table: dict[str, str]
    key: str

    def value(self) -> str | None:
        return self.table.get(self.key)

    def update(self, value: str) -> None:
        self.table[self.key] = value


def now_ms() -> int:
    return int(time.time() * 1000)


class RecordingStore(InMemoryActionStateStore):
    def __init__(
        self,
        log: InMemoryLog,
        restores: list[RecoveryMarker],
        placement: Placement = CRC32_PLACEMENT,
        read: list[int] | None = None,
    ) -> None:
        super().__init__(log, placement=placement)
        self.restores = restores
        self.read = [] if read is None else read  # the partitions restores read

    def restore(self, marker: RecoveryMarker, key_groups: KeyGroupRange | None = None):
        self.restores.append(marker)
        return super().restore(marker, key_groups)

    def _read(self, starts: dict[int, int]):
        self.read.extend(sorted(starts))
        return super()._read(starts)


class Attempt:
    """One task attempt: the logic opened over keyed state restored from `checkpoint`."""

    def __init__(
        self,
        monkeypatch: pytest.MonkeyPatch,
        log: InMemoryLog | None,
        checkpoint: dict[str, str],
        number: int,
        plan: AgentPlan = WEATHER,
        subtask: int = 0,
        record_arguments: bool = True,
        parallelism: int = 1,
        event_log: EventLogConfig | None = None,
        max_parallelism: int | None = None,
        listeners: Sequence[Observer] = (),
        task_alive: Callable[[], bool] | None = None,
        **options: Any,
    ) -> None:
        self.table = dict(checkpoint)
        self.poll_timers: list[int] = []
        self.restores: list[RecoveryMarker] = []
        self.read: list[int] = []
        store = None
        if log is not None:

            def build(config: StoreConfig, groups: int | None = None) -> RecordingStore:
                placement = config.placement_for(groups)
                return RecordingStore(log, self.restores, placement, self.read)

            monkeypatch.setattr(StoreConfig, "build", build)
            store = StoreConfig(kind="memory", record_arguments=record_arguments)
        settings = RuntimeSettings(
            operator=OperatorOptions(**options), store=store, event_log=event_log
        )
        self.logic = KeyedAgentLogic(plan, settings, listeners=listeners)
        self.logic.open(
            attempt=number,
            subtask=subtask,
            parallelism=parallelism,
            max_parallelism=max_parallelism,
            task_alive=task_alive,
        )

    def __enter__(self) -> Attempt:
        return self

    def __exit__(self, *exc: object) -> None:
        self.logic.close()

    def send(self, key: Any, record: Any) -> list[dict]:
        return self.send_text(key, json.dumps(record))

    def send_text(self, key: Any, text: str) -> list[dict]:
        flink_key = json.dumps(key)
        visit = self.logic.on_input(flink_key, text, KeySlot(self.table, flink_key), now_ms)
        return self._took(visit)

    def visit(self, key: Any, *, end_of_input: bool = False) -> list[dict]:
        """Fire the key's timer once."""
        flink_key = json.dumps(key)
        visit = self.logic.on_timer(
            flink_key, KeySlot(self.table, flink_key), now_ms(), now_ms, end_of_input=end_of_input
        )
        return self._took(visit)

    def answers(self, key: Any, count: int = 1, timeout: float = 10.0) -> list[dict]:
        """Visit the key until at least `count` outputs of its runs came out."""
        outputs: list[dict] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            outputs += self.visit(key)
            if len(outputs) >= count:
                return outputs
            time.sleep(0.02)
        raise AssertionError(f"{len(outputs)} of {count} outputs for {key!r} within {timeout} s")

    def _took(self, visit: Visit) -> list[dict]:
        if visit.poll_at is not None:
            self.poll_timers.append(visit.poll_at)
        return [json.loads(record) for record in visit.outputs]


def ask(attempt: Attempt, city: str) -> list[dict]:
    return attempt.send(city, {"city": city})


def saved_marker(checkpoint: dict[str, str], city: str) -> RecoveryMarker:
    """The recovery marker a key's state holds in `checkpoint`."""
    saved = SavedKey.model_validate_json(checkpoint[json.dumps(city)])
    assert saved.marker is not None
    return RecoveryMarker.from_json(saved.marker)


def first_run(log: InMemoryLog, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A first attempt answers Oslo; returns its keyed state (the checkpoint)."""
    with Attempt(monkeypatch, log, {}, 0) as first:
        ask(first, "Oslo")
        assert first.answers("Oslo")[0]["output"]["city"] == "Oslo"
        assert first.restores == []  # a fresh start restores nothing
        return dict(first.table)


@pytest.mark.parametrize("record_arguments", [True, False])
def test_the_store_config_decides_whether_calls_record_their_arguments(
    monkeypatch, record_arguments
):
    log = InMemoryLog()
    with Attempt(monkeypatch, log, {}, 0, record_arguments=record_arguments) as attempt:
        ask(attempt, "Oslo")
        attempt.answers("Oslo")
    codec = RecordCodec()
    calls = [
        call
        for offset, (key, value) in enumerate(log.partitions[0])
        if value is not None
        and isinstance(
            record := codec.decode(key, value, topic="t", partition=0, offset=offset), ActionState
        )
        for call in record.calls
    ]
    assert calls
    assert all((call.arguments is not None) is record_arguments for call in calls)


# --- restoring the action-state store after a restart -------------------------------------------


def test_a_new_key_first_after_a_restart_waits_for_a_key_that_carries_a_marker(monkeypatch):
    log = InMemoryLog()
    checkpoint = first_run(log, monkeypatch)

    with Attempt(monkeypatch, log, checkpoint, 1) as second:
        assert ask(second, "Rome") == []  # a new key: no marker in its state
        assert second.restores == []  # not yet: the whole topic would have to be read
        assert second.poll_timers  # its timer will come back for it
        assert second.visit("Rome") == []  # still waiting; the input stays in state

        ask(second, "Oslo")  # a key saved before the checkpoint: it carries a marker
        assert second.restores == [saved_marker(checkpoint, "Oslo")]
        rome = second.answers("Rome")
        assert [(r["key"], r["seq"], r["output"]["city"]) for r in rome] == [("Rome", 0, "Rome")]


def test_without_any_marker_the_whole_topic_is_read_after_the_wait(monkeypatch):
    log = InMemoryLog()
    checkpoint = first_run(log, monkeypatch)

    with Attempt(monkeypatch, log, checkpoint, 1, marker_wait_ms=50) as second:
        assert ask(second, "Rome") == []
        assert second.restores == []
        time.sleep(0.1)
        rome = second.answers("Rome")
        [marker] = second.restores
        assert all(mark.low == 0 for mark in marker.partitions.values())  # from the start
        assert [(r["key"], r["seq"]) for r in rome] == [("Rome", 0)]


def test_a_start_from_a_savepoint_restores_the_store_when_declared(monkeypatch):
    log = InMemoryLog()
    savepoint = first_run(log, monkeypatch)

    # Attempt 0, as for any new job: only the option says that state was restored.
    with Attempt(monkeypatch, log, savepoint, 0, started_from_savepoint=True) as started:
        assert ask(started, "Rome") == []
        assert started.restores == []
        ask(started, "Oslo")
        assert started.restores == [saved_marker(savepoint, "Oslo")]
        assert [r["key"] for r in started.answers("Rome")] == ["Rome"]


def in_flight_at_parallelism(
    monkeypatch: pytest.MonkeyPatch, log: InMemoryLog, cities: list[str], parallelism: int
) -> dict[str, str]:
    """Each city's run in flight in its own subtask; returns their keyed states (a savepoint)."""
    savepoint: dict[str, str] = {}
    for subtask, city in enumerate(cities):
        with Attempt(monkeypatch, log, {}, 0, subtask=subtask, parallelism=parallelism) as task:
            ask(task, city)
            savepoint.update(task.table)  # taken before the run's outputs were emitted
    return savepoint


def test_after_a_rescale_that_merges_subtasks_the_store_reads_its_whole_topic(monkeypatch):
    # Each subtask's marker covers only its own runs: the one from Oslo's subtask says nothing
    # of Rome's, whose states may lie before it. Both keys now meet in one subtask.
    log = InMemoryLog()
    savepoint = in_flight_at_parallelism(monkeypatch, log, ["Rome", "Oslo"], parallelism=2)

    with Attempt(monkeypatch, log, savepoint, 0, started_from_savepoint=True) as merged:
        oslo = merged.answers("Oslo")
        [marker] = merged.restores
        assert all(mark.low == 0 for mark in marker.partitions.values())  # from the start
        rome = merged.answers("Rome")
        assert [(r["key"], r["seq"]) for r in oslo + rome] == [("Oslo", 0), ("Rome", 0)]


def test_after_a_rescale_from_one_subtask_each_subtask_restores_from_the_saved_marker(
    monkeypatch,
):
    log = InMemoryLog()
    savepoint = in_flight_at_parallelism(monkeypatch, log, ["Oslo"], parallelism=1)

    with Attempt(
        monkeypatch, log, savepoint, 0, subtask=1, parallelism=2, started_from_savepoint=True
    ) as split:
        oslo = split.answers("Oslo")
        assert split.restores == [saved_marker(savepoint, "Oslo")]  # no whole-topic read
        assert [(r["key"], r["seq"]) for r in oslo] == [("Oslo", 0)]


KEY_GROUPS = 128
CITIES = ["Oslo", "Rome", "Lima", "Pune", "Kyiv", "Baku", "Doha", "Riga"]


def subtask_of(city: str, parallelism: int) -> int:
    """The subtask Flink gives the key of ``city`` at ``parallelism`` (of 128 key groups)."""
    group = key_group(json.dumps(city), KEY_GROUPS)
    return group * parallelism // KEY_GROUPS


def answered_at(
    monkeypatch: pytest.MonkeyPatch,
    log: InMemoryLog,
    savepoint: dict[str, str],
    parallelism: int,
    then_ask: bool,
) -> tuple[dict[str, str], list[dict], list[list[int]]]:
    """Every city's key on its subtask at ``parallelism``, started from ``savepoint``: the
    restored runs answered, then (``then_ask``) a new run per city in flight at the savepoint
    returned, answered after it was taken. Returns the savepoint, the restored runs' answers
    and the partitions each subtask's restore read."""
    taken: dict[str, str] = {}
    answers: list[dict] = []
    read: list[list[int]] = []
    for subtask in range(parallelism):
        mine = [city for city in CITIES if subtask_of(city, parallelism) == subtask]
        with Attempt(
            monkeypatch,
            log,
            {k: v for k, v in savepoint.items() if json.loads(k) in mine},
            0,
            subtask=subtask,
            parallelism=parallelism,
            max_parallelism=KEY_GROUPS,
            started_from_savepoint=bool(savepoint),
        ) as task:
            for city in mine:
                if savepoint:
                    answers += task.answers(city)
                if then_ask:
                    ask(task, city)
            taken.update(task.table)  # before the new runs' outputs were emitted
            for city in mine if then_ask else []:
                task.answers(city)
            read.append(task.read)
    return taken, answers, read


def test_with_key_group_placement_a_rescale_1_4_2_calls_nothing_again_and_reads_less(
    monkeypatch,
):
    invoked: list[DurableCall] = []
    invoke = DurableCall.invoke
    monkeypatch.setattr(DurableCall, "invoke", lambda call: invoked.append(call) or invoke(call))
    log = InMemoryLog(4)
    at_one, _, _ = answered_at(monkeypatch, log, {}, 1, then_ask=True)
    calls_at_one = len(invoked)
    assert calls_at_one >= len(CITIES)
    # Split 1 -> 4: subtask i owns key groups 32i..32i+31, which partition i holds alone.
    at_four, answers, read = answered_at(monkeypatch, log, at_one, 4, then_ask=True)
    assert sorted((a["key"], a["seq"]) for a in answers) == sorted((c, 0) for c in CITIES)
    assert read == [[0], [1], [2], [3]]
    calls_at_four = len(invoked) - calls_at_one
    assert calls_at_four == calls_at_one  # the new runs' calls only
    # Merge 4 -> 2: the saved markers are of other subtasks, so each reads its two from 0.
    _, answers, read = answered_at(monkeypatch, log, at_four, 2, then_ask=False)
    assert sorted((a["key"], a["seq"]) for a in answers) == sorted((c, 1) for c in CITIES)
    assert read == [[0, 1], [2, 3]]
    assert len(invoked) - calls_at_one - calls_at_four == 0  # no restored run called again
    assert {p for p, records in enumerate(log.partitions) if records} == {0, 1, 2, 3}


def test_a_key_flink_gave_another_subtask_by_the_placement_fails_loudly(monkeypatch):
    # What a Flink hashing keys differently would look like: its records would land where
    # their owner does not read on restore.
    city = next(c for c in CITIES if subtask_of(c, 2) == 1)
    with (
        Attempt(
            monkeypatch, InMemoryLog(4), {}, 0, subtask=0, parallelism=2, max_parallelism=128
        ) as wrong,
        pytest.raises(StoreError, match="hashes keys differently"),
    ):
        ask(wrong, city)


def test_an_input_pending_at_the_checkpoint_runs_again_with_its_seq_at_its_first_visit(
    monkeypatch,
):
    log = InMemoryLog()
    with Attempt(monkeypatch, log, {}, 0) as first:
        ask(first, "Oslo")
        checkpoint = dict(first.table)  # taken before the run's outputs were emitted

    with Attempt(monkeypatch, log, checkpoint, 1) as second:
        oslo = second.answers("Oslo")  # the restored timer's visit: no new input
        assert second.restores == [saved_marker(checkpoint, "Oslo")]
        assert [(r["key"], r["seq"], r["output"]["city"]) for r in oslo] == [("Oslo", 0, "Oslo")]
        assert json.loads(second.table[json.dumps("Oslo")])["runs"]["pending"] == []


# --- the key state: the one owner of seq and short-term memory ----------------------------------


def test_seq_and_memory_continue_from_the_saved_key_state_after_a_restart(monkeypatch):
    echo = compile_agent(EchoAgent(name="echo"))
    with Attempt(monkeypatch, None, {}, 0, plan=echo) as first:
        first.send("a", {"n": 1})
        first.send("a", {"n": 2})
        assert [r["seq"] for r in first.answers("a", count=2)] == [0, 1]
        checkpoint = dict(first.table)
    saved = SavedKey.model_validate_json(checkpoint[json.dumps("a")]).runs
    assert (saved.next_seq, saved.pending, saved.short_term_memory) == (2, [], {"count": 2})

    with Attempt(monkeypatch, None, checkpoint, 1, plan=echo) as second:
        second.send("a", {"n": 3})
        [answer] = second.answers("a")
        assert (answer["seq"], answer["output"]) == (2, {"doubled": 6, "count": 3})


def test_the_engine_lets_go_of_idle_keys_and_their_state_comes_back_from_the_key_state(
    monkeypatch,
):
    """A job keyed by, say, order id sees each key once: the engine holds a key only while it
    is busy and for ``idle_key_ms`` after; the key state (Flink's) holds it from then on."""
    echo = compile_agent(EchoAgent(name="echo"))
    with Attempt(monkeypatch, None, {}, 0, plan=echo, idle_key_ms=0) as attempt:
        host = attempt.logic._require_host()
        for order in range(20):
            attempt.send(f"order-{order}", {"n": order})
            attempt.answers(f"order-{order}")
        attempt.send("a", {"n": 1})
        assert attempt.answers("a")[0]["output"] == {"doubled": 2, "count": 1}
        attempt.visit("a")  # a visit lets go of the keys idle since (all of them, at 0 ms)
        assert host.call(host.engine.keys) == []
        attempt.send("a", {"n": 2})  # restored from its key state: count and seq go on
        [again] = attempt.answers("a")
    assert (again["seq"], again["output"]) == (1, {"doubled": 4, "count": 2})


def test_long_term_memory_is_saved_with_the_key_and_continues_after_a_restart(monkeypatch):
    plan = compile_agent(customer_memory.build_agent())
    first_ticket = "My router is an XR-500 and the wifi keeps dropping."
    with Attempt(monkeypatch, None, {}, 0, plan=plan) as first:
        first.send("ada", {"customer": "ada", "text": first_ticket})
        first.answers("ada")
        checkpoint = dict(first.table)
    saved = SavedKey.model_validate_json(checkpoint[json.dumps("ada")]).runs
    assert [item.text for item in saved.long_term_memory["facts"].values()] == [first_ticket]

    with Attempt(monkeypatch, None, checkpoint, 1, plan=plan) as second:
        second.send("ada", {"customer": "ada", "text": "Which firmware for my router?"})
        [answer] = second.answers("ada")
    assert answer["output"]["answer"] == "For your XR-500: install firmware 2.4."


def test_short_term_memory_expires_by_the_clock_saved_with_each_input(monkeypatch):
    """An input checkpointed pending runs after the restore with the clock it was admitted
    with, however late; a new input gets the new clock, and the expired entry is dropped."""
    plan = compile_agent(remembering_agent())
    t0 = 1_000_000
    with Attempt(monkeypatch, None, {}, 0, plan=plan) as first:
        monkeypatch.setattr(keyed, "now_ms", lambda: float(t0))
        first.send("k", {"set": {"a": 1}, "ttl": 10})
        first.answers("k")
        monkeypatch.setattr(keyed, "now_ms", lambda: float(t0 + 9_000))
        first.send("k", {"read": ["a"]})
        checkpoint = dict(first.table)  # the read's input pending, with its clock
    saved = SavedKey.model_validate_json(checkpoint[json.dumps("k")]).runs
    assert saved.short_term_expiry == {"a": t0 + 10_000}
    assert [p.admitted_at for p in saved.pending] == [t0 + 9_000]

    monkeypatch.setattr(keyed, "now_ms", lambda: float(t0 + 3_600_000))
    with Attempt(monkeypatch, None, checkpoint, 1, plan=plan) as second:
        assert second.answers("k")[0]["output"] == {"a": 1}  # what the live run saw
        second.send("k", {"read": ["a"]})
        assert second.answers("k")[0]["output"] == {"a": None}
        runs = SavedKey.model_validate_json(second.table[json.dumps("k")]).runs
    assert (runs.short_term_memory, runs.short_term_expiry) == ({}, {})


def test_only_a_key_with_saved_state_is_restored_into_the_engine(monkeypatch):
    restored: list[str] = []
    restore = EngineHost.restore

    def counted(host: EngineHost, token: str, state: KeyState) -> None:
        restored.append(token)
        restore(host, token, state)

    monkeypatch.setattr(EngineHost, "restore", counted)
    echo = compile_agent(EchoAgent(name="echo"))
    with Attempt(monkeypatch, None, {}, 0, plan=echo) as first:
        first.send("a", {"n": 1})
        first.answers("a")
        checkpoint = dict(first.table)
    assert restored == []  # a key new to the job has nothing to restore

    with Attempt(monkeypatch, None, checkpoint, 1, plan=echo) as second:
        second.send("a", {"n": 2})
        second.send("b", {"n": 3})
        [answer_a] = second.answers("a")
        [answer_b] = second.answers("b")
    assert restored == [json.dumps("a")]
    assert (answer_a["seq"], answer_a["output"]) == (1, {"doubled": 4, "count": 2})
    assert (answer_b["seq"], answer_b["output"]) == (0, {"doubled": 6, "count": 1})


def test_a_failed_run_commits_no_memory(monkeypatch):
    agent = EchoAgent(name="guard", error_policy="emit")
    agent.add_action(fail_on_negative, name="check")
    with Attempt(monkeypatch, None, {}, 0, plan=compile_agent(agent)) as attempt:
        for n in (1, -5):
            attempt.send("a", {"n": n})
        outputs = attempt.answers("a", count=3)  # 1 and its doubling, then the error
        assert "error" in outputs[-1]
        saved = SavedKey.model_validate_json(attempt.table[json.dumps("a")]).runs
        assert (saved.next_seq, saved.pending) == (2, [])
        assert saved.short_term_memory == {"last": 1, "count": 1}


# --- visits and timers -------------------------------------------------------------------------


def test_an_input_asks_for_a_poll_on_the_grid_and_for_the_end_of_input_visit(monkeypatch):
    with Attempt(monkeypatch, None, {}, 0, poll_interval_ms=7) as attempt:
        before = now_ms()
        flink_key = json.dumps("Oslo")
        visit = attempt.logic.on_input(
            flink_key, json.dumps({"city": "Oslo"}), KeySlot(attempt.table, flink_key), now_ms
        )
        assert visit.outputs == () and visit.until_end_of_input
        assert visit.poll_at is not None and visit.poll_at > before and visit.poll_at % 7 == 0


def test_the_end_of_input_visit_waits_for_the_keys_runs(monkeypatch):
    with Attempt(monkeypatch, None, {}, 0) as attempt:
        for _ in range(3):
            ask(attempt, "Oslo")
        polls = len(attempt.poll_timers)
        outputs = attempt.visit("Oslo", end_of_input=True)
        assert [r["seq"] for r in outputs] == [0, 1, 2]
        assert len(attempt.poll_timers) == polls  # no poll after the end of the input


def test_a_finished_runs_records_are_in_the_event_log_file_before_its_outputs_leave(
    monkeypatch, tmp_path
):
    # The file sink's writer thread does not look on its own: only the visit writes.
    monkeypatch.setattr(queued, "LINGER_S", 3600.0)
    monkeypatch.setattr(queued, "IDLE_S", 3600.0)
    path = tmp_path / "events.jsonl"
    with Attempt(monkeypatch, None, {}, 0, event_log=EventLogConfig(path=str(path))) as attempt:
        ask(attempt, "Oslo")
        assert path.read_text() == ""  # queued, not written
        [output] = attempt.answers("Oslo")
        # What a kill -9 right after the output would leave: every record of the run.
        records = [json.loads(line) for line in path.read_text().splitlines()]
        assert records[-1]["kind"] == "run_finished" and records[-1]["status"] == "succeeded"
        assert [r["kind"] for r in records].count("call") == 5  # 3 model calls, 2 tool calls
        assert {(r["key"], r["seq"]) for r in records} == {(output["key"], output["seq"])}


def test_a_record_that_is_not_json_or_has_no_key_is_reported(monkeypatch):
    with Attempt(monkeypatch, None, {}, 0) as attempt:
        [not_json] = attempt.send_text("Oslo", "not json")
        [no_key] = attempt.send(None, {"town": "Oslo"})
        for report in (not_json, no_key):
            assert (report["seq"], report["error"]["error_type"]) == (-1, "BadRecord")
        assert attempt.table == {}  # nothing accepted


# --- attempts ------------------------------------------------------------------------------------


def test_an_attempt_left_open_is_closed_when_the_next_one_of_its_subtask_opens(monkeypatch):
    failed = Attempt(monkeypatch, None, {}, 0)  # a failed attempt whose close() never came
    other_subtask = Attempt(monkeypatch, None, {}, 0, subtask=1)
    try:
        with Attempt(monkeypatch, None, {}, 1):
            with pytest.raises(RuntimeError, match="before open"):
                ask(failed, "Oslo")
            ask(other_subtask, "Oslo")
            assert other_subtask.answers("Oslo")[0]["key"] == "Oslo"
    finally:
        other_subtask.logic.close()


def test_an_attempt_whose_task_ended_closes_itself(monkeypatch, caplog):
    """A host that ends without close() (PyFlink's thread mode): the engine closes itself once
    the host says its task is gone, and sends nothing more."""
    caplog.set_level(logging.INFO, logger="flink_agents.runtime.keyed")
    alive = [True]
    attempt = Attempt(monkeypatch, None, {}, 0, task_alive=lambda: alive[0])
    try:
        ask(attempt, "Oslo")
        assert attempt.answers("Oslo")[0]["key"] == "Oslo"
        alive[0] = False
        deadline = time.monotonic() + 10
        while "ended without closing its engine" not in caplog.text:
            assert time.monotonic() < deadline, "the engine of an ended task is still open"
            time.sleep(0.05)
        with pytest.raises(RuntimeError, match="before open"):
            ask(attempt, "Bergen")
    finally:
        attempt.logic.close()


def test_the_next_attempt_opens_only_after_a_close_under_way_has_written_its_last_state(
    monkeypatch,
):
    """The watchdog closes an attempt whose task ended; its store's close flushes the last
    outcomes. The next attempt of the subtask, opening meanwhile, must wait for that close: its
    restore reads the log, and an outcome landing after that read is a call sent again."""
    log = InMemoryLog()
    ended = Attempt(monkeypatch, log, {}, 0)
    store = ended.logic._store
    assert store is not None
    flushing, written = threading.Event(), threading.Event()
    close_store = store.close

    def slow_close() -> None:  # the flush waits for the broker
        flushing.set()
        written.wait(10)
        close_store()

    monkeypatch.setattr(store, "close", slow_close)
    watchdog = threading.Thread(target=ended.logic.close)
    watchdog.start()
    assert flushing.wait(10)
    opened: list[Attempt] = []
    opening = threading.Thread(target=lambda: opened.append(Attempt(monkeypatch, log, {}, 1)))
    opening.start()
    opening.join(0.5)
    try:
        assert opening.is_alive(), "the next attempt opened while the last writes were unsent"
    finally:
        written.set()
        watchdog.join(10)
        opening.join(10)
    assert opened and not opening.is_alive()
    opened[0].logic.close()


def test_a_finished_run_stays_in_the_markers_until_its_outputs_are_emitted(monkeypatch):
    """A run ends in the store when its outputs leave, not when it finishes: a marker taken in
    between (a checkpoint may still hold its input) must keep its records for the replay."""
    with Attempt(monkeypatch, InMemoryLog(), {}, 0) as attempt:
        host, store = attempt.logic._require_host(), attempt.logic._store
        assert store is not None
        ask(attempt, "Oslo")
        deadline = time.monotonic() + 10
        while host.unfinished and time.monotonic() < deadline:
            time.sleep(0.01)
        assert host.unfinished == 0  # finished, not visited: its output is not emitted yet
        finished = host.call(store.recovery_marker)
        assert [run.key for run in finished.open_runs] == [json.dumps("Oslo")]
        assert attempt.answers("Oslo")[0]["key"] == "Oslo"
        emitted = host.call(store.recovery_marker)
        assert emitted.open_runs == []


def test_the_markers_kept_for_pruning_hold_no_open_runs(monkeypatch):
    """The marker clock keeps every marker for the prune delay: compact ones, without the list
    of open runs (thousands of objects per marker with many runs in flight)."""
    kept: list[RecoveryMarker] = []
    taken = MarkerClock.taken

    def recorded(clock: MarkerClock, marker: RecoveryMarker, now: float | None = None):
        kept.append(marker)
        return taken(clock, marker, now)

    monkeypatch.setattr(MarkerClock, "taken", recorded)
    monkeypatch.setattr(MarkerClock, "due", lambda clock, now=None: True)  # a marker per save
    with Attempt(monkeypatch, InMemoryLog(), {}, 0) as attempt:
        host = attempt.logic._require_host()
        ask(attempt, "Oslo")
        deadline = time.monotonic() + 10
        while host.unfinished and time.monotonic() < deadline:
            time.sleep(0.01)
        assert host.unfinished == 0  # finished, not emitted: still open in the store
        ask(attempt, "Bergen")  # its save takes a marker with Oslo's run open
        assert attempt.answers("Oslo")[0]["key"] == "Oslo"
    assert len(kept) >= 2
    assert [marker.open_runs for marker in kept] == [[]] * len(kept)


# --- a TaskManager frozen past the heartbeat timeout ----------------------------------------------


@pytest.fixture
def frozen(monkeypatch) -> tuple[list[float], list[FreezeFence]]:
    """The clock of the fences the logic builds (the test moves it), and those fences: their
    watchdogs froze with the process."""
    clock = [100.0]
    fences: list[FreezeFence] = []

    class FrozenWatchdogFence(FreezeFence):
        def __init__(self, threshold_s: float, **owner: Any) -> None:
            super().__init__(threshold_s, clock=lambda: clock[0], **owner)
            fences.append(self)

        def start(self) -> None:
            pass

    monkeypatch.setattr(keyed, "FreezeFence", FrozenWatchdogFence)
    return clock, fences


def test_an_attempt_frozen_past_the_heartbeat_timeout_fails_and_sends_and_emits_nothing(
    monkeypatch, frozen
):
    clock, fences = frozen
    log = InMemoryLog()
    with Attempt(
        monkeypatch, log, {}, 0, heartbeat_timeout_ms=10_000, heartbeat_interval_ms=2_000
    ) as attempt:
        assert [fence.threshold_s for fence in fences] == [8.0]
        written = len(log.partitions[0])
        clock[0] += 9.0
        ask(attempt, "Oslo")
        with pytest.raises(FrozenProcessError):
            attempt.answers("Oslo")
        assert len(log.partitions[0]) == written


def test_without_a_store_a_frozen_attempt_sends_no_call(monkeypatch, frozen):
    clock, fences = frozen
    sent: list[DurableCall] = []
    invoke = DurableCall.invoke
    monkeypatch.setattr(DurableCall, "invoke", lambda call: sent.append(call) or invoke(call))
    with Attempt(
        monkeypatch, None, {}, 0, heartbeat_timeout_ms=10_000, heartbeat_interval_ms=2_000
    ) as attempt:
        assert [fence.threshold_s for fence in fences] == [8.0]
        ask(attempt, "Bergen")
        assert attempt.answers("Bergen")[0]["key"] == "Bergen"
        before = len(sent)
        assert before > 0
        clock[0] += 9.0
        ask(attempt, "Oslo")
        with pytest.raises(FrozenProcessError):
            attempt.answers("Oslo")
        assert len(sent) == before


def test_the_heartbeat_interval_must_leave_a_fence():
    assert OperatorOptions().freeze_fence_s == 40.0  # Flink's defaults: 50 s - 10 s
    with pytest.raises(ValueError, match="heartbeat_interval_ms"):
        OperatorOptions(heartbeat_timeout_ms=10_000, heartbeat_interval_ms=10_000)


# --- the cost of an input -------------------------------------------------------------------------


@dataclass
class CountedSlot(KeySlot):
    """A key's saved value that counts how often it is read."""

    reads: list[str] = field(default_factory=list)

    def value(self) -> str | None:
        self.reads.append(self.key)
        return super().value()


def test_a_key_with_inputs_pending_is_not_read_back_from_keyed_state(monkeypatch):
    echo = compile_agent(EchoAgent(name="echo"))
    with Attempt(monkeypatch, None, {}, 0, plan=echo) as attempt:
        slot = CountedSlot(attempt.table, json.dumps("a"))
        for n in range(3):
            attempt.logic.on_input(slot.key, json.dumps({"n": n}), slot, now_ms)
        assert len(slot.reads) == 1  # the first input found no state; the others, its own
        outputs: list[str] = []
        deadline = time.monotonic() + 10
        while len(outputs) < 3 and time.monotonic() < deadline:
            outputs += attempt.logic.on_timer(slot.key, slot, now_ms(), now_ms).outputs
            time.sleep(0.01)
        assert [json.loads(o)["seq"] for o in outputs] == [0, 1, 2]
        assert len(slot.reads) == 1
        saved = SavedKey.model_validate_json(attempt.table[slot.key]).runs
        assert (saved.next_seq, saved.pending) == (3, [])  # what it kept was written through

        attempt.logic.on_input(slot.key, json.dumps({"n": 3}), slot, now_ms)
        assert len(slot.reads) == 2  # nothing pending any more: read again


def test_an_input_and_a_key_with_lone_surrogates_are_saved_and_restored(monkeypatch):
    # Undecodable bytes as `surrogateescape` leaves them (an input's JSON may carry "\udcff").
    echo, log, key = compile_agent(EchoAgent(name="echo")), InMemoryLog(), "file-\udcff"
    with Attempt(monkeypatch, log, {}, 0, plan=echo) as first:
        first.send_text(key, '{"n": 1, "name": "a\\udcffb"}')
        checkpoint = dict(first.table)  # the input still pending
    [saved] = checkpoint.values()
    assert "\\udcff" in saved and "\udcff" not in saved  # escaped: the text encodes as UTF-8
    saved.encode("utf-8")
    with Attempt(monkeypatch, log, checkpoint, 1, plan=echo) as second:
        [answer] = second.answers(key)
    assert (answer["key"], answer["seq"], answer["output"]) == (key, 0, {"doubled": 2, "count": 1})
