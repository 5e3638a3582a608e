"""Where a key's records go: Flink's key groups computed in Python, key-group ranges mapped onto
the topic's partitions, and restores that read only the partitions of a subtask's key groups."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from flink_agents.durable.store import (
    ANY_PLACEMENT,
    CRC32_PLACEMENT,
    ActionState,
    CallResult,
    InMemoryActionStateStore,
    InMemoryLog,
    KeyGroupRange,
    PartitionMark,
    Placement,
    RecoveryMarker,
    RunKey,
    StoreError,
    canonical_json,
    key_group,
    partition_for,
)

# Printed by Flink 2.2.1's own classes (flink-dist): for the one-field Row that PyFlink's
# key_by makes of a str key, Row.hashCode() and KeyGroupRangeAssignment.assignToKeyGroup at
# 128 and 32768 key groups.
FLINK_SAYS = [
    ('"a"', 35777, 1, 28801),
    ('"user-1"', -1021173457, 74, 14154),
    ('""', 1150, 109, 28781),
    ("42", 1724, 18, 30738),
    ('"é😀x"', -1402636014, 112, 14704),
    ('"k-17"', 1073597366, 15, 4879),
    ("[1,2]", 85544159, 4, 1028),
]


@pytest.mark.parametrize(("key", "row_hash", "of_128", "of_32768"), FLINK_SAYS)
def test_the_key_group_of_a_key_is_the_one_flink_assigns(key, row_hash, of_128, of_32768):
    assert key_group(key, 128) == of_128
    assert key_group(key, 32768) == of_32768


def test_subtask_ranges_are_flinks_and_cover_every_key_group_once():
    # computeKeyGroupRangeForOperatorIndex(128, 3, i)
    assert [KeyGroupRange.of_subtask(i, 3, 128) for i in range(3)] == [
        KeyGroupRange(0, 42, 128),
        KeyGroupRange(43, 85, 128),
        KeyGroupRange(86, 127, 128),
    ]
    for parallelism in (1, 2, 5, 7, 128):
        ranges = [KeyGroupRange.of_subtask(i, parallelism, 128) for i in range(parallelism)]
        owners = [[i for i, r in enumerate(ranges) if group in r] for group in range(128)]
        # computeOperatorIndexForKeyGroup: group * parallelism // max parallelism
        assert owners == [[group * parallelism // 128] for group in range(128)]
    with pytest.raises(ValueError, match="no subtask 2 of parallelism 2"):
        KeyGroupRange.of_subtask(2, 2, 128)


@pytest.mark.parametrize("partitions", [1, 3, 4, 16, 128, 200])
@pytest.mark.parametrize("parallelism", [1, 2, 3, 4, 32, 128])
def test_a_subtask_reads_every_partition_its_keys_can_be_in_and_no_more(partitions, parallelism):
    placement = Placement(128)
    for subtask in range(parallelism):
        groups = KeyGroupRange.of_subtask(subtask, parallelism, 128)
        reading = placement.partitions_of(groups, partitions)
        holding = sorted({g * partitions // 128 for g in range(groups.first, groups.last + 1)})
        assert reading == holding


def test_with_as_many_partitions_as_subtasks_each_subtask_reads_one():
    placement = Placement(128)
    for parallelism in (1, 2, 4, 32, 128):
        reading = [
            placement.partitions_of(KeyGroupRange.of_subtask(i, parallelism, 128), parallelism)
            for i in range(parallelism)
        ]
        assert reading == [[i] for i in range(parallelism)]


def test_a_runs_partition_follows_its_key_group():
    run = RunKey(agent="agent", key='"user-1"', seq=3)  # key group 74 of 128
    assert partition_for(run, 4, Placement(128)) == 74 * 4 // 128 == 2
    assert partition_for(run, 4) == CRC32_PLACEMENT.partition("agent", '"user-1"', 4)


def test_placements_are_named_in_markers_and_read_back():
    for placement in (CRC32_PLACEMENT, Placement(128), Placement(32768), ANY_PLACEMENT):
        assert Placement.named(placement.name) == placement
    assert Placement(128).name == "key-groups/128"
    for unknown in ("key-groups", "key-groups/0", "murmur", "key-groups/x"):
        with pytest.raises(StoreError, match="unknown store placement"):
            Placement.named(unknown)
    with pytest.raises(StoreError, match="does not write"):
        ANY_PLACEMENT.partition("agent", '"a"', 4)


def test_a_marker_without_a_placement_was_taken_under_crc32():
    old = '{"topic": "t", "store_id": "s", "taken": 0, "partitions": {"0": {"low": 0, "end": 0}}}'
    assert RecoveryMarker.from_json(old).placement == "crc32"


# --- restores --------------------------------------------------------------------------------


def state(key: str, value: int = 1) -> ActionState:
    run = RunKey(agent="agent", key=canonical_json(key), seq=0)
    s = ActionState(key=run.action("act"))
    s.record_call(CallResult.pending("act-0").succeed(value))
    return s


KEYS = [f"customer-{n}" for n in range(64)]


def written(partitions: int, placement: Placement) -> tuple[InMemoryLog, RecoveryMarker]:
    """A log with a finished state of every key in ``KEYS`` after the marker."""
    log = InMemoryLog(partitions)
    store = InMemoryActionStateStore(log, placement=placement)
    marker = store.recovery_marker()
    for key in KEYS:
        store.put(state(key))
    store.close()
    return log, marker


def test_each_subtask_restores_its_keys_reading_only_its_partitions():
    placement = Placement(128)
    log, marker = written(4, placement)
    assert all(log.partitions)  # the keys spread over every partition
    found: list[str] = []
    for subtask in range(2):
        groups = KeyGroupRange.of_subtask(subtask, 2, 128)
        store = InMemoryActionStateStore(log, placement=placement)
        report = store.restore(marker, groups)
        mine = [k for k in KEYS if key_group(canonical_json(k), 128) in groups]
        assert sorted(json.loads(k.key) for k in store.state_keys()) == sorted(mine)
        read = sum(len(log.partitions[p]) for p in placement.partitions_of(groups, 4))
        assert report.loaded + report.elsewhere == read == len(mine)  # two partitions each
        found += mine
    assert sorted(found) == sorted(KEYS)


def test_with_fewer_partitions_than_subtasks_a_shared_partitions_others_are_not_loaded():
    placement = Placement(128)
    log, marker = written(2, placement)
    groups = KeyGroupRange.of_subtask(0, 4, 128)  # key groups 0..31: partition 0, shared
    store = InMemoryActionStateStore(log, placement=placement)
    report = store.restore(marker, groups)
    mine = [k for k in KEYS if key_group(canonical_json(k), 128) in groups]
    assert (report.loaded, report.elsewhere) == (len(mine), len(log.partitions[0]) - len(mine))


def test_a_topic_written_before_key_groups_restores_and_stays_crc32():
    # A job upgraded with its savepoint: its markers say crc32 (or name no placement).
    log, crc32_marker = written(4, CRC32_PLACEMENT)
    groups = KeyGroupRange.of_subtask(0, 2, 128)
    store = InMemoryActionStateStore(log, placement=Placement(128))
    report = store.restore(crc32_marker, groups)
    mine = [k for k in KEYS if key_group(canonical_json(k), 128) in groups]
    assert (report.loaded, report.elsewhere, report.corrupt) == (
        len(mine),
        len(KEYS) - len(mine),
        [],
    )
    assert store.placement == CRC32_PLACEMENT
    assert store.recovery_marker().placement == "crc32"  # the next restore reads the same way


def test_without_a_marker_the_placement_is_found_from_the_records():
    # A restart that saw no key with a marker: the store reads every partition.
    for written_by in (CRC32_PLACEMENT, Placement(128)):
        log, marker = written(4, written_by)
        unknown = marker.model_copy(update={"placement": "any"})
        store = InMemoryActionStateStore(log, placement=Placement(128))
        report = store.restore(unknown, KeyGroupRange.of_subtask(1, 2, 128))
        assert report.loaded + report.elsewhere == len(KEYS) and report.corrupt == []
        assert store.placement == written_by


def test_a_marker_of_other_key_groups_is_refused():
    _, marker = written(4, Placement(64))
    store = InMemoryActionStateStore(InMemoryLog(4), placement=Placement(128))
    with pytest.raises(StoreError, match="max parallelism is fixed for the life"):
        store.restore(marker, KeyGroupRange.of_subtask(0, 1, 128))


def test_markers_of_different_placements_do_not_merge():
    _, crc32_marker = written(4, CRC32_PLACEMENT)
    _, groups_marker = written(4, Placement(128))
    with pytest.raises(StoreError, match="same topic and placement"):
        RecoveryMarker.merge([crc32_marker, groups_marker])


def test_the_tools_read_a_key_group_topic_without_knowing_its_key_groups():
    log, _ = written(4, Placement(128))
    tool = InMemoryActionStateStore(log, placement=ANY_PLACEMENT)
    start = RecoveryMarker(
        topic=tool.topic,
        store_id="tool",
        taken=-1,
        partitions={p: PartitionMark(low=0, end=0) for p in range(4)},
        placement="any",
    )
    report = tool.restore(start)
    assert (report.loaded, report.corrupt) == (len(KEYS), [])


# --- Flink's own classes, when a JVM and Flink's jars are here --------------------------------

ORACLE = """
import java.io.*;
import java.nio.charset.StandardCharsets;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.types.Row;

public class KeyGroups {
    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(
            new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String key; (key = in.readLine()) != null; ) {
            Row row = new Row(1);  // what PyFlink's KeyByKeySelector makes of the key
            row.setField(0, key);
            for (String maxParallelism : args) {
                int group = KeyGroupRangeAssignment.assignToKeyGroup(
                    row, Integer.parseInt(maxParallelism));
                System.out.print(group + " ");
            }
            System.out.println();
        }
    }
}
"""


def flink_dist() -> Path | None:
    import pyflink

    jars = sorted((Path(pyflink.__file__).parent / "lib").glob("flink-dist-*.jar"))
    return jars[0] if jars else None


@pytest.mark.flink
@pytest.mark.skipif(
    shutil.which("java") is None or flink_dist() is None, reason="needs a JVM and flink-dist"
)
def test_key_groups_match_the_installed_flinks_for_many_keys(tmp_path):
    rng = random.Random(35)
    alphabet = 'abcXYZ019 -_é߿ࠀ￿😀\\"/'
    values: list[object] = [rng.randrange(-(10**12), 10**12) for _ in range(200)]
    values += ["".join(rng.choices(alphabet, k=rng.randrange(40))) for _ in range(600)]
    values += [[rng.random(), "x"], {"tenant": "t-1", "user": 7}, "\ud800", None, True]
    keys = [canonical_json(value) for value in values]
    assert not any("\n" in key for key in keys)  # one key a line
    source = tmp_path / "KeyGroups.java"
    source.write_text(ORACLE)
    done = subprocess.run(
        ["java", "-cp", str(flink_dist()), str(source), "128", "4096"],
        input="\n".join(keys).encode("utf-8", "surrogatepass"),
        capture_output=True,
        check=True,
        timeout=120,
    )
    flinks = [[int(group) for group in line.split()] for line in done.stdout.decode().splitlines()]
    assert flinks == [[key_group(key, 128), key_group(key, 4096)] for key in keys]
