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


def test_a_signed_export_is_read_only_where_it_verifies(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = RunKey(agent="a", key='"k"', seq=0)
    states = [ActionState(key=run.action("first")), ActionState(key=run.action("second"))]
    signed, unsigned = tmp_path / "signed.jsonl", tmp_path / "unsigned.jsonl"
    write_states(states, signed, secret=b"job secret")
    write_states(states, unsigned)
    first, second = signed.read_text().splitlines()
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text(first + "\n" + second.replace('"second"', '"forged"') + "\n")

    assert read_states(signed, secret=b"job secret") == states
    assert read_states(signed) == states  # no secret given: read, as unsigned exports are
    with caplog.at_level(logging.ERROR):
        assert read_states(signed, secret=b"another secret") == []
        assert read_states(tampered, secret=b"job secret") == states[:1]
        assert read_states(unsigned, secret=b"job secret") == []
    skipped = [r.getMessage() for r in caplog.records]
    assert skipped[:2] == [
        f"skipping {signed}:{n}: its signature does not verify with the store secret"
        for n in (1, 2)
    ]
    assert (
        skipped[2] == f"skipping {tampered}:2: its signature does not verify with the store secret"
    )
    assert skipped[3].startswith(f"skipping {unsigned}:1: not signed (a store secret is set")
    assert len(skipped) == 5
