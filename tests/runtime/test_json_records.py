"""Output records: which ones report an error (the dead-letter topic takes those)."""

from flink_agents.runtime.json_records import OutputRecord, bad_input_record, is_error_record


def test_error_records_are_failed_runs_and_bad_inputs() -> None:
    answer = OutputRecord(agent="a", key="k", seq=0, output={"error": "a field, not a failure"})
    failed = OutputRecord(agent="a", key="k", seq=1, error={"error_type": "ValueError"})
    assert not is_error_record(answer.to_json())
    assert is_error_record(failed.to_json())
    assert is_error_record(bad_input_record("a", None, "not JSON").to_json())
