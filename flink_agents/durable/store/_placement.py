"""Where a run's records go: the store topic's partition of a Flink key, and which partitions a
subtask reads on restore.

Two placements, named in every recovery marker (`RecoveryMarker.placement`):

* ``crc32`` (the first one; markers without a placement were taken under it): crc32 of the
  canonical JSON ``[agent, key]`` modulo the partition count. Keys of every subtask share every
  partition, so each subtask reads all of them on restore.
* ``key-groups/M``: the key's Flink key group (of ``M`` key groups, the job's max parallelism)
  mapped onto the partitions in contiguous ranges -- the arithmetic Flink uses to map key groups
  onto subtasks. A subtask owns a contiguous range of key groups, so it reads only the partitions
  that range touches: about ``1/parallelism`` of the topic when there are at least as many
  partitions as subtasks.

The key group is Flink's own: PyFlink's ``key_by(..., key_type=Types.STRING())`` keys the Java
stream by a one-field ``Row`` holding the key string (``KeyByKeySelector``), and Flink assigns a
key to ``murmurHash(row.hashCode()) % M`` (``KeyGroupRangeAssignment``). ``Row.hashCode`` of a
one-field insert row is ``62 + String.hashCode()`` (``RowUtils.deepHashCodeRow``: ``31 * kind +
deepHashCodeArray``, the field hashed as ``Arrays.deepHashCode([field])``). The functions below
compute the same in Python; `tests/durable/store/test_placement.py` pins them against values
printed by Flink's own classes, and the operator checks every key it is given
(`Placement.check_owner`) so that a Flink whose hashing differs fails loudly instead of placing
records where their owner would not read them.
"""

from __future__ import annotations

import dataclasses
import functools
import zlib

from flink_agents.durable.store._canonical import canonical_json
from flink_agents.durable.store._store_errors import StoreError

CRC32 = "crc32"
"""The name of the crc32 placement (markers without a placement were taken under it)."""
KEY_GROUPS = "key-groups"
"""The prefix of a key-group placement's name: ``key-groups/<max parallelism>``."""
ANY = "any"
"""The name of the tools' placement: reads records placed either way, never writes."""

_MASK = 0xFFFFFFFF


def _int32(value: int) -> int:
    """``value`` wrapped to a Java int (two's complement, 32 bits)."""
    value &= _MASK
    return value - (1 << 32) if value >= 1 << 31 else value


def _rotate_left(value: int, bits: int) -> int:
    value &= _MASK
    return ((value << bits) | (value >> (32 - bits))) & _MASK


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()``: over UTF-16 code units, wrapped to an int."""
    units = text.encode("utf-16-le", "surrogatepass")
    result = 0
    for i in range(0, len(units), 2):
        result = (31 * result + (units[i] | units[i + 1] << 8)) & _MASK
    return _int32(result)


def murmur_hash(code: int) -> int:
    """Flink's ``MathUtils.murmurHash(int)``: a non-negative int."""
    code = (code * 0xCC9E2D51) & _MASK
    code = _rotate_left(code, 15)
    code = (code * 0x1B873593) & _MASK
    code = _rotate_left(code, 13)
    code = (code * 5 + 0xE6546B64) & _MASK
    code ^= 4
    code ^= code >> 16  # bitMix: >>> on the unsigned form
    code = (code * 0x85EBCA6B) & _MASK
    code ^= code >> 13
    code = (code * 0xC2B2AE35) & _MASK
    code ^= code >> 16
    signed = _int32(code)
    if signed >= 0:
        return signed
    return -signed if signed != -(1 << 31) else 0


@functools.lru_cache(maxsize=4096)
def key_group(key: str, max_parallelism: int) -> int:
    """The Flink key group of the keyed stream's key ``key`` (a str key of PyFlink's ``key_by``)."""
    row_hash = _int32(62 + java_string_hash(key))
    return murmur_hash(row_hash) % max_parallelism


@dataclasses.dataclass(frozen=True)
class KeyGroupRange:
    """Key groups ``first..last`` (inclusive) of ``max_parallelism``: what one subtask owns."""

    first: int
    last: int
    max_parallelism: int

    @classmethod
    def of_subtask(cls, subtask: int, parallelism: int, max_parallelism: int) -> KeyGroupRange:
        """The key groups Flink gives subtask ``subtask`` of ``parallelism``
        (``KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex``)."""
        if not 0 <= subtask < parallelism <= max_parallelism:
            raise ValueError(
                f"no subtask {subtask} of parallelism {parallelism} at max parallelism "
                f"{max_parallelism}"
            )
        return cls(
            first=(subtask * max_parallelism + parallelism - 1) // parallelism,
            last=((subtask + 1) * max_parallelism - 1) // parallelism,
            max_parallelism=max_parallelism,
        )

    def __contains__(self, group: object) -> bool:
        return isinstance(group, int) and self.first <= group <= self.last


@dataclasses.dataclass(frozen=True)
class Placement:
    """How a store places a run's records in its topic's partitions (see the module).

    ``max_parallelism`` None: ``crc32``; else the key-group placement of that many key groups.
    ``checked`` False: `ANY_PLACEMENT`, for the tools that read a topic whatever placed it.
    """

    max_parallelism: int | None = None
    checked: bool = True

    @classmethod
    def named(cls, name: str) -> Placement:
        """The placement a marker names (`name`); a `StoreError` for one this version lacks."""
        if name == CRC32:
            return cls()
        if name == ANY:
            return cls(checked=False)
        prefix, _, groups = name.partition("/")
        if prefix == KEY_GROUPS and groups.isdigit() and int(groups) >= 1:
            return cls(int(groups))
        raise StoreError(f"unknown store placement {name!r} (known: {CRC32}, {KEY_GROUPS}/<M>)")

    @property
    def name(self) -> str:
        """``crc32`` or ``key-groups/<max parallelism>``, as markers record it (``any``: see
        `ANY_PLACEMENT`)."""
        if not self.checked:
            return ANY
        if self.max_parallelism is None:
            return CRC32
        return f"{KEY_GROUPS}/{self.max_parallelism}"

    def partition(self, agent: str, key: str, partitions: int) -> int:
        """The partition of every record of the runs of ``agent`` under ``key`` (the canonical
        JSON of the key value, as Flink keys the stream)."""
        if not self.checked:
            raise StoreError("a store opened to read a topic of any placement does not write")
        if self.max_parallelism is None:
            return _crc32_partition(agent, key, partitions)
        return key_group(key, self.max_parallelism) * partitions // self.max_parallelism

    def partitions_of(self, groups: KeyGroupRange | None, partitions: int) -> list[int]:
        """The partitions that can hold records of keys in ``groups`` (all: None, or crc32)."""
        if groups is None or self.max_parallelism is None:
            return list(range(partitions))
        self._check_range(groups)
        # Contiguous when there are no more partitions than key groups; with more, some
        # partitions hold no key group at all and are skipped.
        return sorted(
            {
                group * partitions // self.max_parallelism
                for group in range(groups.first, groups.last + 1)
            }
        )

    def owns(self, groups: KeyGroupRange | None, key: str) -> bool:
        """Whether ``key`` belongs to ``groups`` (every key does when ``groups`` is None)."""
        return groups is None or key_group(key, groups.max_parallelism) in groups

    def check_owner(self, groups: KeyGroupRange, key: str) -> None:
        """Raise `StoreError` if Flink gave ``key`` to a subtask that does not own its key group
        by the computation above (a Flink whose key hashing differs from the one assumed here:
        its records would be placed where their owner does not read them on restore)."""
        if self.max_parallelism is None or self.owns(groups, key):
            return
        raise StoreError(
            f"key {key!r}: Flink handed it to the subtask of key groups {groups.first}.."
            f"{groups.last}, but its key group computed for the store's placement is "
            f"{key_group(key, groups.max_parallelism)}: this Flink hashes keys differently "
            f"from the one {self.name} placement was made for; set the store's placement to "
            f"{CRC32} on a new topic (docs/state-store.md, 'Partitioning')"
        )

    def _check_range(self, groups: KeyGroupRange) -> None:
        if groups.max_parallelism != self.max_parallelism:
            raise StoreError(
                f"the store places records by {self.max_parallelism} key groups, the subtask "
                f"has {groups.max_parallelism}: a job's max parallelism is fixed for the life "
                "of its store topic"
            )


CRC32_PLACEMENT = Placement()
"""The crc32 placement: stores outside Flink, and topics written before key groups."""
ANY_PLACEMENT = Placement(checked=False)
"""The tools' placement (``store inspect``, ``export``, ``replay``): they read every partition
and accept a record in any of them, as they cannot know the job's key groups; they never write."""


@functools.lru_cache(maxsize=4096)
def _crc32_partition(agent: str, key: str, partitions: int) -> int:
    # Cached: a store asks for the partition of each write and a key's runs come one after
    # another.
    return zlib.crc32(canonical_json([agent, key]).encode("utf-8")) % partitions
