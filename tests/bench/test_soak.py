"""The soak's schedule, checker and growth bounds on made-up histories (bench/soak_*.py): a
seed fixes the schedule, every planted violation is reported by name with its call (or input)
and the fault nearest before it. Fast: no JVM, no broker."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from bench.crash_oracle import Request
from bench.soak_checker import Happened, Output, check_history
from bench.soak_growth import BOUNDS, judge_growth, slope_per_hour
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


def test_growth_is_the_pooled_slope_of_the_processes_over_the_last_half_per_hour() -> None:
    # Two TaskManagers one after the other (a kill at 10 min), each leaking 1 MB a minute
    # after a warm-up jump: the replacement's start (lower) and warm-up do not count.
    first = [(t * 60.0, 900.0 + t) for t in range(11)]
    second = [(t * 60.0, (400.0 if t < 13 else 600.0) + t) for t in range(11, 21)]
    segments = {"101": first, "202": second}
    assert slope_per_hour(segments, 0.0, 1200.0) == pytest.approx(60.0)
    assert slope_per_hour({"101": first[:3]}, 0.0, 1200.0) == 0.0  # nothing in the last half


def test_a_restart_cuts_every_process_and_its_warm_up_does_not_count() -> None:
    # One TaskManager all along, flat at 500 MB, jumping to 900 MB as it loads the job again
    # after a restart at 16 min: the jump is a warm-up, not growth. A leak after it still shows.
    flat = {"101": [(t * 60.0, 900.0 if t >= 17 else 500.0) for t in range(31)]}
    assert slope_per_hour(flat, 0.0, 1800.0) > 0  # without the restart the jump reads as growth
    assert slope_per_hour(flat, 0.0, 1800.0, restarts=[960.0]) == 0.0
    leaking = {"101": [(t * 60.0, 500.0 + (t if t >= 17 else 0)) for t in range(31)]}
    assert slope_per_hour(leaking, 0.0, 1800.0, restarts=[960.0]) == pytest.approx(60.0)


def test_growth_above_its_bound_fails_and_an_unsampled_metric_passes() -> None:
    bound, _ = BOUNDS["taskmanager_rss_mb"]
    leaking = {"101": [(t * 60.0, 500.0 + t * bound / 30) for t in range(21)]}  # twice the bound
    judged = {g.metric: g for g in judge_growth({"taskmanager_rss_mb": leaking}, 0.0, 1200.0)}
    assert judged["taskmanager_rss_mb"].slope == pytest.approx(2 * bound)
    assert not judged["taskmanager_rss_mb"].ok
    assert judged["jobmanager_rss_mb"].ok
