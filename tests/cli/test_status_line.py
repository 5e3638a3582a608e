"""`flink-agents run --local` shows records in and out and runs in flight on a terminal's stderr
(one line, redrawn in place), and nothing when stderr is not a terminal."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

from flink_agents.cli import main
from flink_agents.cli.status_line import StatusLine
from flink_agents.observability import RunAdmitted, RunFinished, RunStarted


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _inputs(tmp_path: Path) -> str:
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps({"city": c}) + "\n" for c in ("Oslo", "Lisbon", "Rome")))
    return str(path)


def _run(tmp_path: Path) -> list[str]:
    return ["run", "--local", "examples.weather:build_agent", "--input", _inputs(tmp_path)]


def test_on_a_terminal_the_status_line_ends_with_every_record_in_and_out(
    tmp_path, monkeypatch, capsys
):
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    assert main([*_run(tmp_path), "--key", "city"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3  # the outputs stay on stdout
    shown = terminal.getvalue()
    assert shown.endswith("\r\x1b[Kin 3  out 3  in flight 0\n")
    assert shown.count("\n") == 1  # one line, redrawn in place


def test_without_a_terminal_nothing_is_shown(tmp_path, monkeypatch, capsys):
    quiet = io.StringIO()
    monkeypatch.setattr("sys.stderr", quiet)
    assert main([*_run(tmp_path), "--key", "city"]) == 0
    assert quiet.getvalue() == ""


def _record(kind: type, **fields) -> object:
    return kind(time=0.0, agent="a", key="k", seq=0, **fields)


def test_the_line_is_redrawn_while_runs_are_in_flight():
    terminal = Terminal()
    status = StatusLine(terminal, interval_s=0.01)
    status.on_record(_record(RunAdmitted))
    status.on_record(_record(RunAdmitted))
    status.on_record(_record(RunStarted))
    deadline = time.monotonic() + 5
    while "in 2  out 0  in flight 1" not in terminal.getvalue():
        assert time.monotonic() < deadline, terminal.getvalue()
        time.sleep(0.01)
    status.on_record(_record(RunFinished, status="succeeded", latency_ms=1.0, outputs=2))
    status.close()
    assert terminal.getvalue().endswith("in 2  out 2  in flight 0\n")


def test_closing_draws_the_last_state_and_ends_the_line_once():
    terminal = Terminal()
    status = StatusLine(terminal, interval_s=60.0)
    status.close()
    status.close()  # closing twice ends the line once
    assert terminal.getvalue() == "\r\x1b[Kin 0  out 0  in flight 0\n"
