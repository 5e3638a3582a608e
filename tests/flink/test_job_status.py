"""`flink-agents run JOB.yaml`: on a terminal, a status line on stderr fed by the job's metrics
from Flink's REST API (a fake REST API here), nothing else when stderr is not a terminal; on
every stream, the job's failures read from the same API, and an exit code that tells them."""

from __future__ import annotations

import io
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

import flink_agents.cli as cli
import flink_agents.flink.job_runner as job_runner
import flink_agents.flink.job_status as job_status
from flink_agents.cli.status_line import PolledStatusLine, status_text
from flink_agents.flink.job_status import (
    FailureWatch,
    JobCounts,
    JobFailure,
    JobMetricsReader,
    counts_from,
    innermost_cause,
    wanted_metrics,
)
from tests.cli.test_status_line import Terminal

JOB = "4b1d"
VERTEX = "v-agent"
NAMES = [
    "numRecordsIn",  # the task's (its first operator is the agent)
    "agent_support_desk.numRecordsIn",
    "agent_support_desk.numRecordsOut",
    "Sink__Print_to_Std__Out.numRecordsIn",
    "agent_support_desk.flink_agents.runs.in_flight",
    "agent_support_desk.flink_agents.runs.started",
]


class FakeFlinkRest(ThreadingHTTPServer):
    """Answers the three requests the reader makes, with ``values`` summed over subtasks."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.values: dict[str, float] = {}
        self.exceptions: list[dict[str, Any]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: FakeFlinkRest

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        url = urlparse(self.path)
        if url.path == f"/jobs/{JOB}":
            body: Any = {
                "vertices": [
                    {"id": "v-src", "name": "Source: x"},
                    {"id": VERTEX, "name": "agent:support_desk -> Sink: Print to Std. Out"},
                ]
            }
        elif url.path == f"/jobs/{JOB}/vertices/{VERTEX}/subtasks/metrics":
            query = parse_qs(url.query)
            if "get" not in query:
                body = [{"id": name} for name in NAMES]
            else:
                assert query["agg"] == ["sum"]
                wanted = query["get"][0].split(",")
                body = [
                    {"id": n, "sum": self.server.values[n]}
                    for n in wanted
                    if n in self.server.values
                ]
        elif url.path == f"/jobs/{JOB}/exceptions":
            body = {"exceptionHistory": {"entries": self.server.exceptions, "truncated": False}}
        else:
            self.send_error(404)
            return
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def rest() -> Iterator[FakeFlinkRest]:
    server = FakeFlinkRest()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def test_the_line_shows_the_agent_operators_records_and_runs_in_flight(rest) -> None:
    rest.values = {
        "agent_support_desk.numRecordsIn": 12.0,
        "agent_support_desk.numRecordsOut": 9.0,
        "agent_support_desk.flink_agents.runs.in_flight": 3.0,
    }
    assert JobMetricsReader(rest.url, JOB).read() == JobCounts(12, 9, 3)


def test_a_count_not_reported_yet_shows_as_unknown(rest) -> None:
    rest.values = {"agent_support_desk.numRecordsIn": 2.0, "agent_support_desk.numRecordsOut": 0.0}
    counts = JobMetricsReader(rest.url, JOB).read()
    assert counts == JobCounts(2, 0, None)
    assert status_text(counts) == "in 2  out 0  in flight ?"


def test_no_answer_reads_as_nothing_to_show() -> None:
    assert JobMetricsReader("http://127.0.0.1:9", JOB).read() is None  # nothing listens there
    assert wanted_metrics(["numRecordsIn", "Source__x.numRecordsOut"]) == {}
    assert counts_from({}, {}) == JobCounts(None, None, None)


def test_a_polled_line_keeps_what_it_shows_while_nothing_is_read() -> None:
    terminal = Terminal()
    answers: list[JobCounts | None] = [None, JobCounts(1, 0, 1), None]
    status = PolledStatusLine(terminal, lambda: answers.pop(0) if answers else None, 0.01)
    deadline = time.monotonic() + 5
    while answers:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    status.close()
    assert terminal.getvalue() == "\r\x1b[Kin 1  out 0  in flight 1\n"


def test_a_line_that_never_showed_anything_ends_no_line() -> None:
    terminal = Terminal()
    PolledStatusLine(terminal, lambda: None, 0.01).close()
    assert terminal.getvalue() == ""


class FakeJobClient:
    """A job that gives one output once the line has shown its input, and ends once the line
    has shown the output."""

    def __init__(self, terminal: Terminal, rest: FakeFlinkRest) -> None:
        self.terminal = terminal
        self.rest = rest

    def get_job_id(self) -> str:
        return JOB

    def get_job_execution_result(self) -> FakeJobClient:
        return self

    def result(self) -> None:
        self._until_shown("in 1  out 0  in flight ?")
        self.rest.values["agent_support_desk.numRecordsOut"] = 1.0
        self._until_shown("in 1  out 1  in flight ?")

    def _until_shown(self, text: str) -> None:
        deadline = time.monotonic() + 30
        while text not in self.terminal.getvalue():
            assert time.monotonic() < deadline, self.terminal.getvalue()
            time.sleep(0.01)


def _job_file(tmp_path) -> str:
    job = tmp_path / "job.yaml"
    (tmp_path / "in.jsonl").write_text('{"city": "Oslo"}\n')  # `run` checks the source exists
    job.write_text(
        "name: j\nagent: examples.weather:build_agent\n"
        "source: {kind: list, path: in.jsonl}\nkey: city\n"
    )
    return str(job)


def test_on_a_terminal_run_shows_the_jobs_metrics_until_it_ends(rest, tmp_path, monkeypatch):
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    rest.values = {"agent_support_desk.numRecordsIn": 1.0, "agent_support_desk.numRecordsOut": 0.0}

    class FakeEnvironment:
        def execute_async(self, name: str) -> FakeJobClient:
            return FakeJobClient(terminal, rest)

    settings: dict[str, str] = {}

    def fake_environment(spec: Any, *, extra: dict[str, str]) -> FakeEnvironment:
        settings.update(extra)
        return FakeEnvironment()

    port = rest.server_address[1]
    monkeypatch.setattr(job_status, "free_local_port", lambda: port)
    monkeypatch.setattr(job_runner, "environment", fake_environment)
    monkeypatch.setattr(job_runner, "build", lambda spec, env: None)
    monkeypatch.setattr(job_runner, "run", lambda spec: pytest.fail("ran without the status"))
    assert cli.main(["run", _job_file(tmp_path)]) == 0
    assert terminal.getvalue() == (
        "\r\x1b[Kin 1  out 0  in flight ?\r\x1b[Kin 1  out 1  in flight ?\n"
    )
    # The mini-cluster's REST API is where the line reads it, and refreshes its metrics as often.
    assert (settings["rest.bind-address"], settings["rest.bind-port"]) == ("127.0.0.1", str(port))
    assert settings["metrics.fetcher.update-interval"] == "1000"


def test_a_free_local_port_can_be_bound() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", job_status.free_local_port()))


def _fake_job(
    monkeypatch: pytest.MonkeyPatch, rest: FakeFlinkRest, result: Any = None
) -> dict[str, str]:
    """`run` builds a fake environment whose job ends by calling ``result`` (or at once); the
    settings the environment was given are returned."""

    class FakeClient:
        def get_job_id(self) -> str:
            return JOB

        def get_job_execution_result(self) -> FakeClient:
            return self

        def result(self) -> None:
            if result is not None:
                result()

    class FakeEnvironment:
        def execute_async(self, name: str) -> FakeClient:
            return FakeClient()

    settings: dict[str, str] = {}

    def fake_environment(spec: Any, *, extra: dict[str, str]) -> FakeEnvironment:
        settings.update(extra)
        return FakeEnvironment()

    port = rest.server_address[1]
    monkeypatch.setattr(job_status, "free_local_port", lambda: port)
    monkeypatch.setattr(job_runner, "environment", fake_environment)
    monkeypatch.setattr(job_runner, "build", lambda spec, env: None)
    return settings


def test_without_a_terminal_run_shows_nothing_when_nothing_failed(rest, tmp_path, monkeypatch):
    quiet = io.StringIO()
    monkeypatch.setattr("sys.stderr", quiet)
    _fake_job(monkeypatch, rest)
    assert cli.main(["run", _job_file(tmp_path)]) == 0
    assert quiet.getvalue() == ""


STACKTRACE = (
    "org.apache.flink.runtime.JobException: Recovery is suppressed\n\tat x.y(Z.java:1)\n"
    "Caused by: java.lang.RuntimeException: Error in Python function\n\tat a.b(C.java:2)\n"
    "Caused by: org.apache.kafka.common.InvalidRecordException: Timestamp 9223372036854775806 "
    "of message with offset 0 is out of range.\n\tat d.e(F.java:3)\n"
)


def _failure(at_ms: int) -> dict[str, Any]:
    return {
        "exceptionName": "org.apache.flink.runtime.JobException",
        "stacktrace": STACKTRACE,
        "timestamp": at_ms,
        "taskName": "agent:weather -> Sink: kafka:out (1/1)",
        "concurrentExceptions": [],
    }


def test_the_innermost_cause_is_the_line_a_reader_needs() -> None:
    assert innermost_cause(STACKTRACE) == (
        "org.apache.kafka.common.InvalidRecordException: Timestamp 9223372036854775806 of "
        "message with offset 0 is out of range."
    )
    assert innermost_cause("java.io.IOException: gone") == "java.io.IOException: gone"
    long = innermost_cause("Caused by: " + "x" * 1000)
    assert len(long) == 300 and long.endswith("...")


def test_failures_are_read_oldest_first(rest) -> None:
    rest.exceptions = [_failure(2000), _failure(1000)]
    failures = JobMetricsReader(rest.url, JOB).read_failures()
    assert [failure.timestamp_ms for failure in failures or []] == [1000, 2000]
    assert failures is not None and failures[0].task == "agent:weather -> Sink: kafka:out (1/1)"
    assert JobMetricsReader("http://127.0.0.1:9", JOB).read_failures() is None


def test_the_watch_keeps_the_failures_seen_while_the_api_answered() -> None:
    answers: list[list[JobFailure] | None] = [[JobFailure("boom", None, 1)], None]
    watch = FailureWatch(lambda: answers.pop(0) if answers else None, interval_s=0.01)
    deadline = time.monotonic() + 10
    while answers and time.monotonic() < deadline:
        time.sleep(0.01)
    assert watch.stop() == [JobFailure("boom", None, 1)]


def test_a_job_whose_tasks_restarted_says_so_and_exits_3(rest, tmp_path, monkeypatch):
    stderr = io.StringIO()
    monkeypatch.setattr("sys.stderr", stderr)

    def one_restart() -> None:
        rest.exceptions = [_failure(1000)]
        time.sleep(0.6)  # the watch reads every 0.25 s while the job runs

    _fake_job(monkeypatch, rest, one_restart)
    assert cli.main(["run", _job_file(tmp_path)]) == cli.EXIT_RESTARTED == 3
    report = stderr.getvalue()
    assert "failure 1 in agent:weather -> Sink: kafka:out (1/1): org.apache.kafka" in report
    assert "job 'j' finished, but its tasks restarted 1 time(s)" in report


def test_a_job_that_failed_for_good_names_its_causes_and_exits_1(rest, tmp_path, monkeypatch):
    from py4j.protocol import Py4JJavaError

    class JobFailed(Py4JJavaError):
        def __init__(self) -> None:
            Exception.__init__(self)

        def __str__(self) -> str:
            return STACKTRACE

    stderr = io.StringIO()
    monkeypatch.setattr("sys.stderr", stderr)

    def restarts_then_fails() -> None:
        rest.exceptions = [_failure(1000), _failure(2000), _failure(3000)]
        time.sleep(0.6)
        raise JobFailed()

    _fake_job(monkeypatch, rest, restarts_then_fails)
    assert cli.main(["run", _job_file(tmp_path)]) == 1
    report = stderr.getvalue()
    assert report.count("flink-agents run: failure ") == 3
    assert "job 'j' FAILED: org.apache.kafka.common.InvalidRecordException: Timestamp" in report
