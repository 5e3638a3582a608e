"""An export read by ``replay --file`` is data from outside the process: a line that is too
long, too deep or not a state is skipped and named, and the states around it are read."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from flink_agents.durable.store import ActionState, RunKey
from flink_agents.replay.recorded import read_states, write_states


def test_bad_lines_of_an_export_are_skipped_and_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = RunKey(agent="a", key='"k"', seq=0)
    good = [ActionState(key=run.action("first")), ActionState(key=run.action("second"))]
    path = tmp_path / "export.jsonl"
    write_states(good, path)
    first, second = path.read_text().splitlines()
    deep = '{"key":' + first[len('{"key":') :].split(',"completed"')[0] + ',"events":['
    deep += "[" * 1_000 + "]" * 1_000 + "]}"  # deeper than the parser goes, shorter than the cap
    path.write_text("\n".join([first, deep, "x" * 5_000, "not json", second]) + "\n")

    with caplog.at_level(logging.ERROR):
        states = read_states(path, max_line_chars=4_096)

    assert [s.key.action for s in states] == ["first", "second"]
    skipped = [r.getMessage() for r in caplog.records]
    assert len(skipped) == 3
    assert (
        skipped[0].startswith(f"skipping {path}:2: not an action state (")
        and "recursion" in (skipped[0])
    )
    assert skipped[1] == f"skipping {path}:3: longer than 4096 characters"
    assert skipped[2].startswith(f"skipping {path}:4: not an action state")
