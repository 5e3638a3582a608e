"""The JSON-lines sink queues records and writes them from its own thread; a listener that
raises never breaks a run."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable

from examples.weather import build_agent
from flink_agents.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents.observability import (
    EventLogConfig,
    JsonLinesSink,
    RunAdmitted,
    RunFinished,
    parse_record,
)
from flink_agents.observability.sinks.queued import LINGER_S
from flink_agents.plan import compile_agent
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


def test_a_line_put_after_the_writer_emptied_its_queue_is_written_without_close(tmp_path):
    path = tmp_path / "events.jsonl"
    sink = JsonLinesSink(path)
    try:
        for n in range(3):
            sink.on_line(b'{"n":%d}' % n)
            _wait_for(lambda n=n: path.read_bytes().count(b"\n") == n + 1)  # without close()
    finally:
        sink.close()


def test_two_threads_putting_at_once_do_not_leave_lines_unwritten(tmp_path):
    path = tmp_path / "events.jsonl"
    sink = JsonLinesSink(path)

    def put(first: int) -> None:
        for n in range(first, 20_000, 2):
            sink.on_line(b'{"n":%d}' % n)

    other = threading.Thread(target=put, args=(1,))
    try:
        other.start()
        put(0)
        other.join()
        _wait_for(lambda: path.read_bytes().count(b"\n") == 20_000)  # without close()
    finally:
        sink.close()
    written = path.read_bytes().splitlines()
    assert sorted(written) == sorted(b'{"n":%d}' % n for n in range(20_000))
    for parity in (0, 1):  # each thread's lines in the order it put them
        mine = [line for line in written if int(line[5:-1]) % 2 == parity]
        assert mine == [b'{"n":%d}' % n for n in range(parity, 20_000, 2)]


def _wait_for(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the writer did not write the line"
        time.sleep(LINGER_S)


def test_a_failing_listener_is_logged_and_the_others_still_get_every_record(caplog):
    class Broken:
        def on_record(self, record):
            raise RuntimeError("listener bug")

    finished = []

    class Keep:
        def on_record(self, record):
            if isinstance(record, RunFinished):
                finished.append(record.status)

    with caplog.at_level(logging.ERROR, logger="flink_agents.observability.event_log"):
        [result] = run_local(
            build_agent(), [{"city": "Oslo"}], key="city", listeners=[Broken(), Keep()]
        )
    assert result.error is None
    assert finished == ["succeeded"]
    assert "event listener" in caplog.text and "listener bug" in caplog.text


async def _listed(name: str) -> str:
    return name


@action(InputEvent)
async def list_file(event: InputEvent, ctx: RunnerContext) -> None:
    name = await ctx.durable_execute_async(_listed, event.input)
    ctx.send_event(OutputEvent(output=name))


def test_lone_surrogates_in_a_key_and_a_value_are_written_escaped_not_a_failed_run(tmp_path):
    name = "report-\udcff.txt"  # b"report-\xff.txt" decoded with surrogateescape
    path = tmp_path / "events.jsonl"
    plan = compile_agent(Agent(name="surrogates").add_action(list_file))
    [result] = run_local(plan, [name], key=lambda v: v, event_log=EventLogConfig(path=str(path)))
    assert result.output_values == [name]
    lines = path.read_bytes().splitlines()
    assert lines and all(b"\\udcff" in line for line in lines)
    assert {json.loads(line)["key"] for line in lines} == {name}
