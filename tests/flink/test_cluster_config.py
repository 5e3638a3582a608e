"""The operator reads the cluster's heartbeat from FLINK_CONF_DIR, so the freeze fence matches
the cluster without the job repeating it; what the job sets wins."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from flink_agents.flink.cluster_config import cluster_heartbeat, duration_ms
from flink_agents.flink.operator import with_cluster_heartbeat
from flink_agents.runtime.options import OperatorOptions


def conf_dir(tmp_path: Path, text: str, name: str = "config.yaml") -> dict[str, str]:
    (tmp_path / name).write_text(text)
    return {"FLINK_CONF_DIR": str(tmp_path)}


def test_flat_keys_as_scripts_flink_cluster_writes_them(tmp_path: Path) -> None:
    environ = conf_dir(tmp_path, "heartbeat.timeout: 10000\nheartbeat.interval: 2000\n")
    assert cluster_heartbeat(environ) == {
        "heartbeat_timeout_ms": 10_000,
        "heartbeat_interval_ms": 2_000,
    }


def test_nested_maps_and_durations_with_units(tmp_path: Path) -> None:
    environ = conf_dir(tmp_path, "heartbeat:\n  timeout: 30 s\n  interval: 5000 ms\n")
    assert cluster_heartbeat(environ) == {
        "heartbeat_timeout_ms": 30_000,
        "heartbeat_interval_ms": 5_000,
    }


def test_the_legacy_file_name_is_read_too(tmp_path: Path) -> None:
    environ = conf_dir(tmp_path, "heartbeat.timeout: 1 min\n", name="flink-conf.yaml")
    assert cluster_heartbeat(environ) == {"heartbeat_timeout_ms": 60_000}


def test_nothing_without_a_configuration(tmp_path: Path) -> None:
    assert cluster_heartbeat({}) == {}
    assert cluster_heartbeat({"FLINK_CONF_DIR": str(tmp_path)}) == {}


def test_an_unreadable_value_is_skipped_and_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    environ = conf_dir(tmp_path, "heartbeat.timeout: soon\nheartbeat.interval: 2 s\n")
    with caplog.at_level(logging.WARNING):
        assert cluster_heartbeat(environ) == {"heartbeat_interval_ms": 2_000}
    assert "heartbeat.timeout" in caplog.text and "soon" in caplog.text


@pytest.mark.parametrize(
    ("value", "expected"), [(50000, 50_000), ("50000", 50_000), ("50 s", 50_000), ("2min", 120_000)]
)
def test_durations(value: object, expected: int) -> None:
    assert duration_ms(value) == expected


def test_the_fence_follows_the_cluster_when_the_job_is_silent(tmp_path: Path) -> None:
    environ = conf_dir(tmp_path, "heartbeat.timeout: 10000\nheartbeat.interval: 2000\n")
    options = with_cluster_heartbeat(OperatorOptions(max_in_flight=7), environ)
    assert options.freeze_fence_s == 8.0
    assert options.max_in_flight == 7


def test_what_the_job_sets_wins(tmp_path: Path) -> None:
    environ = conf_dir(tmp_path, "heartbeat.timeout: 10000\nheartbeat.interval: 2000\n")
    options = with_cluster_heartbeat(OperatorOptions(heartbeat_timeout_ms=20_000), environ)
    assert (options.heartbeat_timeout_ms, options.heartbeat_interval_ms) == (20_000, 2_000)


def test_a_cluster_value_the_options_refuse_keeps_the_defaults(tmp_path: Path) -> None:
    environ = conf_dir(tmp_path, "heartbeat.timeout: 5000\n")  # below the default interval
    options = with_cluster_heartbeat(OperatorOptions(), environ)
    assert options.freeze_fence_s == OperatorOptions().freeze_fence_s
