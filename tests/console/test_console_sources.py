"""The console's event log feed: a file read once, then only what was appended; a line still
being written waits; ``{subtask}`` reads every subtask's file."""

from __future__ import annotations

import time
from pathlib import Path

from flink_agents.console import ConsoleSources
from flink_agents.console.console_sources import RecordFeed
from tests.console.samples import failed_over_run


def lines(agent: str) -> list[str]:
    return [record.model_dump_json() + "\n" for record in failed_over_run(agent, time.time())]


def test_appended_records_are_added_to_those_read_before(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    first, second = lines("a"), lines("b")
    log.write_text("".join(first))
    feed = RecordFeed(ConsoleSources(event_log=str(log)))
    read = feed.records()
    assert len(read) == len(first)
    with log.open("a") as out:
        out.write("".join(second) + second[0][:20])  # and half a line, being written
    again = feed.records()
    assert again is read and len(again) == len(first) + len(second)
    assert feed.generation == 0  # appended to, not built again
    with log.open("a") as out:
        out.write(second[0][20:])
    assert len(feed.records()) == len(first) + len(second) + 1


def test_a_replaced_file_is_read_again(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    log.write_text("".join(lines("a") * 2))
    feed = RecordFeed(ConsoleSources(event_log=str(log)))
    feed.records()
    log.write_text("".join(lines("b")))
    assert {record.agent for record in feed.records()} == {"b"}
    assert feed.generation == 1


def test_subtask_files_are_all_read(tmp_path: Path) -> None:
    (tmp_path / "events-0.jsonl").write_text("".join(lines("a")))
    (tmp_path / "events-1.jsonl").write_text("".join(lines("b")))
    feed = RecordFeed(ConsoleSources(event_log=str(tmp_path / "events-{subtask}.jsonl")))
    assert {record.agent for record in feed.records()} == {"a", "b"}
