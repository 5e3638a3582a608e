"""The soak's schedule, checker and growth bounds on made-up histories (bench/soak_*.py): a
seed fixes the schedule, every planted violation is reported by name with its call (or input)
and the fault nearest before it. Fast: no JVM, no broker."""

from __future__ import annotations

import json
import os
import struct
import time
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

import pytest

from bench.crash_oracle import Request
from bench.soak_checker import Happened, Output, check_history
from bench.soak_flink import (
    block_checkpoints,
    next_checkpoint_id,
    restart_count,
    restoring_state,
    unblock_checkpoints,
)
from bench.soak_growth import BOUNDS, Segments, judge_growth, log_records, slope_per_hour
from bench.soak_heap import FOLDER_VARIABLE, PythonHeapSampler, read_heaps
from bench.soak_schedule import (
    KINDS,
    SETTLE_S,
    Fault,
    draw_schedule,
    read_schedule,
    write_schedule,
)

ANSWER = "the answer"
EXPECTED = {("a", 0): ANSWER, ("b", 0): ANSWER}
KILL = Happened("F001-taskmanager-kill", "taskmanager-kill", 100.0, 100.0)


def _answers(*runs: tuple[str, int, float]) -> list[Output]:
    return [
        Output(key, seq, at, {"key": key, "seq": seq, "output": ANSWER}) for key, seq, at in runs
    ]


CLEAN_OUTPUTS = _answers(("a", 0, 90.0), ("b", 0, 120.0))


def test_the_same_seed_draws_the_same_schedule_and_it_reads_back(tmp_path: Path) -> None:
    faults = draw_schedule(7, 3600, 60)
    assert faults == draw_schedule(7, 3600, 60)
    assert faults != draw_schedule(8, 3600, 60)
    write_schedule(tmp_path / "schedule.json", 7, faults)
    assert read_schedule(tmp_path / "schedule.json") == faults


def test_an_hour_draws_every_kind_overlapping_across_targets_never_within_one() -> None:
    faults = draw_schedule(37, 3600, 60)
    assert {f.kind for f in faults} == set(KINDS)
    assert len(faults) >= 30
    assert all(f.at >= 30 and f.end <= 3600 - SETTLE_S for f in faults)
    for target in {f.target for f in faults}:
        mine = [f for f in faults if f.target == target]
        assert all(b.at >= a.end + SETTLE_S for a, b in pairwise(mine))
    across = [(a, b) for a in faults for b in faults if a.target < b.target]
    assert any(a.at <= b.end and b.at <= a.end for a, b in across), "no faults overlap"


def test_a_schedule_with_an_unknown_kind_is_refused_by_name(tmp_path: Path) -> None:
    write_schedule(tmp_path / "s.json", 1, [Fault("F001-x", "datacenter-fire", 40.0, 1.0)])
    with pytest.raises(ValueError, match="datacenter-fire"):
        read_schedule(tmp_path / "s.json")


def test_a_clean_history_with_a_resend_in_flight_at_a_kill_passes() -> None:
    # Sent before the kill, recorded only by the retry after it: the one resend a kill allows.
    requests = [Request("model", "k1", 99.5, 99.9), Request("model", "k1", 104.0, 104.2)]
    verdict = check_history(requests, {"k1": 104.3}, [KILL], EXPECTED, CLEAN_OUTPUTS)
    assert verdict.ok, [v.line() for v in verdict.violations]
    assert (verdict.calls, verdict.resends) == (1, 1)
    assert set(verdict.counts().values()) == {0}


def test_a_completed_call_made_again_is_reported_with_its_call_and_fault() -> None:
    requests = [
        Request("billing", "paid-k2", 90.0, 90.2),
        Request("billing", "paid-k2", 103.0, 103.1),
    ]
    verdict = check_history(requests, {"paid-k2": 90.3}, [KILL], EXPECTED, CLEAN_OUTPUTS)
    assert verdict.counts()["reinvoked"] == 1
    (violation,) = verdict.violations
    assert "billing call paid-k2" in violation.line()
    assert violation.fault == KILL.fault_id


def test_a_resend_no_fault_explains_is_reported() -> None:
    # Sent twice long before any fault: a client's retry of something that was answered.
    requests = [
        Request("tool:lookup_fact", "t3", 10.0, 10.5),
        Request("tool:lookup_fact", "t3", 12.0, 12.1),
    ]
    verdict = check_history(requests, {"t3": 12.2}, [KILL], EXPECTED, CLEAN_OUTPUTS)
    assert verdict.counts()["resent-not-in-flight"] == 1
    assert verdict.violations[0].fault == "-"


def test_lost_duplicate_and_wrong_outputs_are_reported_per_input() -> None:
    outputs = [
        *_answers(("a", 0, 101.0), ("a", 0, 130.0)),
        Output("c", 0, 140.0, {"key": "c", "seq": 0, "error": {"type": "ModelCallError"}}),
    ]
    verdict = check_history([], {}, [KILL], EXPECTED, outputs)
    assert verdict.counts() == {
        "reinvoked": 0,
        "resent-not-in-flight": 0,
        "lost": 1,
        "duplicate": 1,
        "wrong": 1,
    }
    lines = sorted(v.line() for v in verdict.violations)
    assert lines[0].startswith("duplicate: input a#0 (fault F001-taskmanager-kill)")
    assert lines[1].startswith("lost: input b#0")
    assert lines[2].startswith("wrong: input c#0") and "ModelCallError" in lines[2]


def _minutes(values: dict[int, float]) -> list[tuple[float, float]]:
    return [(minute * 60.0, value) for minute, value in sorted(values.items())]


def test_growth_is_the_pooled_slope_of_the_processes_over_the_last_half_per_hour() -> None:
    # Two TaskManagers one after the other (a kill at 40 min), each leaking 1 MB a minute. The
    # second idles at 300 MB until the job arrives at 45 min: its idling and the warm-up after
    # the arrival do not count; the first has nothing left in the last half past its warm-up.
    first = _minutes({m: 900.0 + m for m in range(41)})
    second = _minutes({m: 300.0 if m < 45 else 700.0 + m for m in range(41, 81)})
    slope = slope_per_hour({"101": first, "202": second}, 0.0, 4800.0, arrivals={"202": 2700.0})
    assert slope.per_hour == pytest.approx(60.0)
    assert slope.covered_s == (80 - 55) * 60.0
    assert slope_per_hour({"101": first[:3]}, 0.0, 1200.0).per_hour == 0.0  # nothing past half


def test_a_process_warms_up_from_the_jobs_arrival_and_a_restart_on_it_is_not_forgiven() -> None:
    # Idle at 300 MB until the job arrives at 36 min, then flat at 900 MB: no growth. Counted
    # from its birth instead, the arrival's jump would read as growth.
    arrived = {m: 900.0 if m >= 36 else 300.0 for m in range(61)}
    slope = slope_per_hour({"101": _minutes(arrived)}, 0.0, 3600.0, arrivals={"101": 2160.0})
    assert slope.per_hour == 0.0 and slope.covered_s == (60 - 46) * 60.0
    assert slope_per_hour({"101": _minutes(arrived)}, 0.0, 3600.0).per_hour > 0
    # The job restarted on it every 5 minutes, each restart leaving 25 MB behind: a leak, even
    # though every step is at a restart.
    stepping = {m: 900.0 + 25 * (m // 5) if m >= 16 else 300.0 for m in range(61)}
    slope = slope_per_hour({"101": _minutes(stepping)}, 0.0, 3600.0, {"101": 960.0})
    assert slope.per_hour == pytest.approx(300.0, rel=0.1)


def test_a_metric_of_the_whole_run_is_read_by_its_floor_so_restart_backlogs_do_not_count() -> None:
    # The store topic at 500 MB; every 40 s a restart's backlog lifts it to 900 MB for 20 s
    # before the cleaner saws it down: not growth, however often the job restarts.
    def sawtooth(floor: Callable[[float], float]) -> Segments:
        return {"": [(t, floor(t) + (400.0 if t % 40 < 20 else 0.0)) for t in range(0, 3600, 5)]}

    flat = slope_per_hour(sawtooth(lambda t: 500.0), 0.0, 3600.0)
    assert flat.per_hour == 0.0 and flat.covered_s == 1500.0  # six 5-minute floors
    # A floor rising 60 MB an hour under the same backlogs is growth, read as such.
    leaking = slope_per_hour(sawtooth(lambda t: 500.0 + t / 60), 0.0, 3600.0)
    assert leaking.per_hour == pytest.approx(60.0, rel=0.05)
    # A backlog near the end reads as growth in the samples, not in their floors.
    late = {"": [(float(t), 900.0 if 3400 <= t < 3500 else 500.0) for t in range(0, 3600, 5)]}
    assert slope_per_hour(late, 0.0, 3600.0).per_hour == 0.0


def test_growth_above_its_bound_fails_and_too_few_samples_are_no_verdict() -> None:
    bound, _ = BOUNDS["taskmanager_rss_mb"]
    leaking = {"101": _minutes({m: 500.0 + m * bound / 30 for m in range(61)})}  # twice the bound
    judged = {g.metric: g for g in judge_growth({"taskmanager_rss_mb": leaking}, 0.0, 3600.0)}
    assert judged["taskmanager_rss_mb"].slope == pytest.approx(2 * bound)
    assert not judged["taskmanager_rss_mb"].ok
    assert judged["jobmanager_rss_mb"].ok  # never sampled, and no samples asked for
    # A long run asks for 10 minutes of samples: a JobManager seen for 5 is unmeasured.
    brief = {"7": _minutes({m: 400.0 for m in range(50, 56)})}
    judged = {
        g.metric: g
        for g in judge_growth({"jobmanager_rss_mb": brief}, 0.0, 3600.0, required_s=600.0)
    }
    assert judged["jobmanager_rss_mb"].slope == 0.0
    assert not judged["jobmanager_rss_mb"].measured
    assert not judged["jobmanager_rss_mb"].ok


def test_a_schedule_can_space_one_targets_faults_wider() -> None:
    wide = draw_schedule(37, 3600, 200, target_gaps={"taskmanager": 1200})
    narrow = draw_schedule(37, 3600, 200)
    tm = [f for f in wide if f.target == "taskmanager"]
    assert len(tm) < len([f for f in narrow if f.target == "taskmanager"])
    assert [f for f in wide if f.target != "taskmanager"] != []
    with pytest.raises(ValueError, match="unknown fault targets \\['tm'\\]"):
        draw_schedule(37, 3600, 200, target_gaps={"tm": 10})


# --- the restore restart and failing checkpoints -----------------------------------------------

RESTORE = Happened("F002-restore-restart", "restore-restart", 200.0, 212.0, "tasks INITIALIZING")


def test_a_call_caught_by_both_kills_of_a_restore_restart_may_be_sent_three_times() -> None:
    # In flight at the first kill, sent again while the job restored, caught again by the
    # second kill, recorded by the third attempt: both resends fall in the one fault.
    requests = [
        Request("model", "k4", 199.0, 199.5),
        Request("model", "k4", 208.0, 208.3),
        Request("model", "k4", 230.0, 230.2),
    ]
    verdict = check_history(requests, {"k4": 230.3}, [RESTORE], EXPECTED, CLEAN_OUTPUTS)
    assert verdict.ok, [v.line() for v in verdict.violations]
    assert verdict.resends == 2


def test_a_call_sent_after_a_restore_restart_and_sent_again_is_still_reported() -> None:
    requests = [Request("billing", "k5", 260.0, 260.2), Request("billing", "k5", 262.0, 262.1)]
    verdict = check_history(requests, {"k5": 262.2}, [RESTORE], EXPECTED, CLEAN_OUTPUTS)
    assert verdict.counts()["resent-not-in-flight"] == 1
    assert verdict.violations[0].fault == RESTORE.fault_id


def test_failing_checkpoints_the_job_tolerated_explain_no_resend() -> None:
    # Checkpoints failed from 300 s to 320 s without a restart: nothing was sent again because
    # of them, so a resend in that window is a violation; had the job restarted, it is in order.
    requests = [Request("model", "k6", 305.0, 305.4), Request("model", "k6", 310.0, 310.2)]
    tolerated = Happened("F003-checkpoint-failing", "checkpoint-failing", 300.0, 320.0, "", False)
    verdict = check_history(requests, {"k6": 310.3}, [tolerated], EXPECTED, CLEAN_OUTPUTS)
    assert verdict.counts()["resent-not-in-flight"] == 1
    assert verdict.violations[0].fault == tolerated.fault_id
    restarted = Happened("F003-checkpoint-failing", "checkpoint-failing", 300.0, 320.0)
    assert check_history(requests, {"k6": 310.3}, [restarted], EXPECTED, CLEAN_OUTPUTS).ok


def test_the_new_kinds_have_their_targets() -> None:
    assert KINDS["restore-restart"][0] == "taskmanager"  # never during another TaskManager fault
    assert KINDS["checkpoint-failing"][0] == "checkpoints"  # overlaps the rest on purpose


def test_the_next_checkpoint_id_and_the_restore_state_read_from_rest_answers() -> None:
    assert next_checkpoint_id([{"id": 41}, {"id": 43}, {"id": 42}]) == 44
    assert next_checkpoint_id([]) == 1
    job = {"vertices": [{"tasks": {"RUNNING": 1}}, {"tasks": {"DEPLOYING": 1, "RUNNING": 0}}]}
    assert restoring_state(job) == "DEPLOYING"
    job["vertices"][0]["tasks"] = {"INITIALIZING": 1}
    assert restoring_state(job) == "INITIALIZING"
    assert restoring_state({"vertices": [{"tasks": {"RUNNING": 2, "CANCELED": 0}}]}) is None
    assert restart_count([{"id": "numRestarts", "value": "3"}]) == 3
    assert restart_count([]) is None


def test_blocked_checkpoint_folders_cannot_be_created_and_come_back_after(tmp_path: Path) -> None:
    (tmp_path / "chk-8").mkdir()  # triggered meanwhile: left alone, it may complete
    made = block_checkpoints(tmp_path, 7, 4)
    assert [p.name for p in made] == ["chk-7", "chk-9", "chk-10"]
    for path in made:
        with pytest.raises(FileExistsError):
            path.mkdir()  # what the JobManager's folder creation meets
    unblock_checkpoints(made)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chk-8"]
    (tmp_path / "chk-9").mkdir()


# --- growth: restarts the JobManager counted, the heap inside the TaskManager ------------------


def test_the_heap_event_log_and_restart_metrics_are_bounded() -> None:
    for metric in ("python_blocks", "python_threads", "event_log_topic_mb", "event_log_records"):
        assert metric in BOUNDS


def test_the_heap_sampler_writes_its_figures_at_most_every_few_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FOLDER_VARIABLE, str(tmp_path))
    sampler = PythonHeapSampler()
    sampler.on_record(None)  # type: ignore[arg-type]  # the record itself is not read
    written = json.loads(sampler.path.read_text())
    assert written["python_blocks"] > 0 and written["python_threads"] >= 1
    # Per name, digits as N: each restart's leftover thread would raise its name's count.
    assert written["thread_names"]["MainThread"] == 1
    assert sum(written["thread_names"].values()) == written["python_threads"]
    sampler.path.unlink()
    sampler.on_record(None)  # type: ignore[arg-type]
    assert not sampler.path.exists()  # not due yet
    heaps = read_heaps(tmp_path, written["t"] + 1, fresh_s=15)
    assert heaps == {}  # the one written was removed: nothing to read
    sampler._due = 0.0
    sampler.on_record(None)  # type: ignore[arg-type]
    (pid,) = read_heaps(tmp_path, time.time(), fresh_s=15)
    assert pid == os.getpid()
    assert read_heaps(tmp_path, time.time() + 60, fresh_s=15) == {}  # stale: left out


def test_the_heap_sampler_without_its_folder_says_which_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(FOLDER_VARIABLE, raising=False)
    with pytest.raises(RuntimeError, match=FOLDER_VARIABLE):
        PythonHeapSampler()


def _batch(records: int, *, control: bool = False, body: int = 20) -> bytes:
    """A record batch as Kafka writes it (format v2): the header, then ``body`` bytes."""
    header_after_length = 49  # from the leader epoch to the record count
    return struct.pack(
        ">qiibIhiqqqhii",
        0,
        header_after_length + body,
        0,
        2,
        0,
        0x20 if control else 0,
        records - 1,
        0,
        0,
        7,
        0,
        0,
        records,
    ) + bytes(body)


def test_a_partitions_records_are_counted_from_its_segments_batch_headers(tmp_path: Path) -> None:
    (tmp_path / "00000000000000000000.log").write_bytes(
        _batch(3) + _batch(1, control=True) + _batch(2, body=300)
    )
    # The active segment: a batch, then a batch cut short by the writer.
    (tmp_path / "00000000000000000006.log").write_bytes(_batch(4) + _batch(5)[:30])
    (tmp_path / "00000000000000000010.log").write_bytes(b"")  # rolled, nothing in it yet
    (tmp_path / "00000000000000000000.index").write_bytes(bytes(64))  # not a segment
    assert log_records(tmp_path) == 3 + 2 + 4
    assert log_records(tmp_path / "missing") == 0


def test_a_taskmanager_on_another_allocator_than_the_cluster_fails_the_run() -> None:
    # Until 2026-12-05 the soak started replacement TaskManagers with Flink's taskmanager.sh
    # alone, which ran them on glibc's malloc under FLINK_MALLOC=jemalloc: the climbing RSS of
    # the sixth recorded hour was theirs. Such a run now fails, naming the process.
    from bench.soak import allocator_errors

    assert allocator_errors({101: "jemalloc", 202: "jemalloc"}, "jemalloc") == []
    assert allocator_errors({101: "jemalloc", 202: "glibc"}, "jemalloc") == [
        "TaskManager 202 ran on glibc's malloc, the cluster on jemalloc's (FLINK_MALLOC)"
    ]
