"""PyFlink's local mini-cluster runs a keyed job with keyed state."""

from __future__ import annotations

import pytest

from tests.smoke.keyed_count_job import EXPECTED_FINAL_COUNTS, RECORDS, build

pytestmark = pytest.mark.flink


def test_keyed_state_counts_per_key(flink_env) -> None:
    lines = list(build(flink_env).execute_and_collect())

    assert len(lines) == len(RECORDS)
    final = {}
    for line in lines:
        key, count = line.split(",")
        final[key] = int(count)
    assert final == EXPECTED_FINAL_COUNTS
