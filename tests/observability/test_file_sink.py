"""The JSON-lines sink queues records and writes them from its own thread; a listener that
raises never breaks a run."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from examples.weather import build_agent
from flink_agents.observability import (
    EventLogConfig,
    JsonLinesSink,
    RunAdmitted,
    RunFinished,
    file_sink,
    parse_record,
)
from flink_agents.observability import log as log_module
from flink_agents.observability.queued import LINGER_S
from flink_agents.runtime import run_local


def test_records_are_written_in_order_and_all_are_there_after_close(tmp_path):
    path = tmp_path / "logs" / "events.jsonl"
    sink = JsonLinesSink(path)
    records = [RunAdmitted(time=0.0, agent="a", key={"user": n}, seq=n) for n in range(500)]
    for record in records:
        sink.on_record(record)
    sink.close()
    assert [parse_record(line) for line in path.read_text().splitlines()] == records

    again = JsonLinesSink(path)  # appended to, as after a failover
    again.on_record(records[0])
    again.close()
    assert len(path.read_text().splitlines()) == 501


def test_lines_queued_while_the_writer_takes_a_batch_are_neither_lost_nor_reordered(tmp_path):
    path = tmp_path / "events.jsonl"
    sink = JsonLinesSink(path)
    for n in range(20_000):
        sink.on_line(b'{"n":%d}' % n)
        if n % 1_000 == 0:
            time.sleep(LINGER_S * 1.5)  # let the writer take a batch now and then
    sink.close()
    assert path.read_bytes() == b"".join(b'{"n":%d}\n' % n for n in range(20_000))


def test_a_failing_listener_is_logged_and_the_others_still_get_every_record(caplog):
    class Broken:
        def on_record(self, record):
            raise RuntimeError("listener bug")

    finished = []

    class Keep:
        def on_record(self, record):
            if isinstance(record, RunFinished):
                finished.append(record.status)

    with caplog.at_level(logging.ERROR, logger="flink_agents.observability.log"):
        [result] = run_local(
            build_agent(), [{"city": "Oslo"}], key="city", listeners=[Broken(), Keep()]
        )
    assert result.error is None
    assert finished == ["succeeded"]
    assert "event listener" in caplog.text and "listener bug" in caplog.text


def test_on_the_fast_path_the_lines_are_rendered_on_the_writer_thread(tmp_path, monkeypatch):
    rendered_on: set[str] = set()
    render = file_sink.line_of

    def watched(*parts: Any) -> bytes:
        rendered_on.add(threading.current_thread().name)
        return render(*parts)

    monkeypatch.setattr(file_sink, "line_of", watched)
    monkeypatch.setattr(log_module, "line_of", watched)
    path = tmp_path / "events.jsonl"
    [result] = run_local(
        build_agent(), [{"city": "Oslo"}], key="city", event_log=EventLogConfig(path=str(path))
    )
    assert result.error is None
    assert rendered_on == {f"event-log:{path.name}"}  # none on the engine's thread
    kinds = [parse_record(line).kind for line in path.read_text().splitlines()]
    assert kinds[0] == "run_admitted" and kinds[-1] == "run_finished"


def test_the_writer_steps_aside_after_every_slice_of_lines(tmp_path, monkeypatch):
    steps: list[str] = []
    render = file_sink.line_of
    monkeypatch.setattr(file_sink, "line_of", lambda *parts: steps.append("line") or render(*parts))
    monkeypatch.setattr(file_sink.time, "sleep", lambda seconds: steps.append("pause"))
    path = tmp_path / "events.jsonl"
    sink = JsonLinesSink(path)
    for n in range(4 * file_sink.SLICE + 3):
        sink.on_line_parts({"n": n}, b',"payload":[%d]' % n)
    sink.close()
    lines = path.read_text().splitlines()
    assert lines == [f'{{"n":{n},"payload":[{n}]}}' for n in range(4 * file_sink.SLICE + 3)]
    runs = "".join("L" if step == "line" else "|" for step in steps).split("|")
    assert max(len(run) for run in runs) <= file_sink.SLICE
    assert steps.count("line") == len(lines)
