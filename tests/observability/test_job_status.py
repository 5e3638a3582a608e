"""`flink-agents run JOB.yaml` on a terminal: a status line on stderr fed by the job's metrics
from Flink's REST API (a fake REST API here); nothing when stderr is not a terminal."""

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
import flink_agents.observability.job_status as job_status
from flink_agents.observability.job_status import JobMetricsReader, counts_from, wanted_metrics
from flink_agents.observability.status import PolledStatusLine, StatusCounts
from tests.observability.test_status import Terminal

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
    assert JobMetricsReader(rest.url, JOB).read() == StatusCounts(12, 9, 3)


def test_a_count_not_reported_yet_shows_as_unknown(rest) -> None:
    rest.values = {"agent_support_desk.numRecordsIn": 2.0, "agent_support_desk.numRecordsOut": 0.0}
    counts = JobMetricsReader(rest.url, JOB).read()
    assert counts == StatusCounts(2, 0, None)
    assert counts.text() == "in 2  out 0  in flight ?"


def test_no_answer_reads_as_nothing_to_show() -> None:
    assert JobMetricsReader("http://127.0.0.1:9", JOB).read() is None  # nothing listens there
    assert wanted_metrics(["numRecordsIn", "Source__x.numRecordsOut"]) == {}
    assert counts_from({}, {}) == StatusCounts(None, None, None)


def test_a_polled_line_keeps_what_it_shows_while_nothing_is_read() -> None:
    terminal = Terminal()
    answers: list[StatusCounts | None] = [None, StatusCounts(1, 0, 1), None]
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


def test_without_a_terminal_run_shows_nothing(tmp_path, monkeypatch):
    quiet = io.StringIO()
    monkeypatch.setattr("sys.stderr", quiet)
    ran = []
    monkeypatch.setattr(job_runner, "run", lambda spec: ran.append(spec.name))
    assert cli.main(["run", _job_file(tmp_path)]) == 0
    assert ran == ["j"]
    assert quiet.getvalue() == ""
