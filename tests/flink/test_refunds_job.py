"""examples/refunds_job.py on the mini-cluster: 50 orders pause for approval, decisions come
from a Kafka topic; 40 approved, 5 edited and 5 left to time out give exactly 45 refunds."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from examples.refunds_job import ASKED, EDITED, run

pytestmark = [pytest.mark.flink, pytest.mark.kafka]


def test_fifty_paused_refunds_end_as_the_person_decided(kafka_bootstrap: str, tmp_path: Path):
    report = run(kafka_bootstrap, tmp_path, orders=50, approved=40, edited=5)

    assert len(report.answers) == 50 and report.waiting == 50 and report.decisions_sent == 45
    # Each refund sent once: one request per idempotency key, one key per refunded order.
    assert report.refund_requests == 45
    assert report.refunds == {
        **{f"o-{n}": ASKED for n in range(1, 41)},
        **{f"o-{n}": EDITED for n in range(41, 46)},
    }
    assert report.verdicts() == Counter(approved=40, edited=5, timed_out=5), report.answers
    timed_out = sorted(key for key, answer in report.answers.items() if "timed out" in answer)
    assert timed_out == [f"o-{n}" for n in range(46, 51)]
