"""The like-for-like peer comparison's order and table on synthetic rows: no JVM, no broker."""

from __future__ import annotations

from bench.peer_durable import OURS, medians, report, rounds_table, variants

PEER = "flink-agents 0.2.0"


def _row(side: str, store: str, rate: float, *, round_index: int = 0, records: int | None = None):
    return {
        "round": round_index, "side": side, "store": store, "latency": 0.2, "keys": 100,
        "bound": 100, "inputs": 1000, "outputs": 1000, "errors": 0, "runs_per_s": rate,
        "p50_ms": 300.0, "p99_ms": 500.0, "wall_s": 9.0, "store_records": records,
        "load_before": "7.50 9.00 10.00",
    }  # fmt: skip


def test_every_other_round_runs_the_variants_in_reverse_order() -> None:
    first = variants(PEER, 0)
    assert first == [(OURS, "none"), (OURS, "kafka"), (PEER, "none"), (PEER, "kafka")]
    assert variants(PEER, 1) == first[::-1]
    assert variants(PEER, 2) == first


def test_medians_are_over_the_rounds_of_one_variant() -> None:
    rows = [
        _row(OURS, "kafka", rate, round_index=i, records=records)
        for i, (rate, records) in enumerate([(300.0, 3000), (100.0, 2000), (200.0, 4000)])
    ] + [_row(OURS, "none", 900.0)]
    m = medians(rows, side=OURS, store="kafka")
    assert m["runs_per_s"] == 200.0
    assert m["records_per_input"] == 3.0
    assert m["n"] == 3


def test_report_gives_ours_over_theirs_for_each_store_setting() -> None:
    rows = [
        _row(OURS, "none", 500.0),
        _row(OURS, "kafka", 400.0, records=2000),
        _row(PEER, "none", 250.0),
        _row(PEER, "kafka", 40.0, records=6000),
    ]
    rates, latencies, _ = report(rows).split("\n\n")
    line = rates.splitlines()[2]
    # ours / theirs none, ours / theirs Kafka, ours Kafka / none, theirs Kafka / none
    assert line.endswith("| 2.00 | 10.00 | 0.80 | 0.16 |")
    assert "| 200 ms | 100 | flink-agents 0.2.0 | kafka | 300 | 500 | 6.00 |" in latencies


def test_the_rounds_table_shows_every_job_with_the_load_it_started_under() -> None:
    rows = [_row(OURS, "none", 500.0), _row(OURS, "none", 250.0, round_index=1)]
    assert "| 200 ms | ours | none | 500.0 (7.50) | 250.0 (7.50) |" in rounds_table(rows)
