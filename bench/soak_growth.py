"""Growth over a soak: samples of what must not grow, the slope over the last half, the bounds.

Processes are read from /proc (Linux): resident memory, open file descriptors, threads; topics
from the broker's disk (:func:`directory_mb`, :func:`log_records`). Each metric is a set of
**segments**: one per process (a TaskManager killed by a fault is replaced by a fresh one), or
one for a metric of the whole run (the store topic). Its slope is the pooled least-squares slope
of its segments over the last half of the run (one intercept per segment).

A process warms up: a TaskManager idles at a few hundred MB until it is given the job, then its
JVM heap, code cache and the Python interpreter of thread mode grow for several minutes to a
plateau (about 8 minutes in the first recorded run). So a process's samples count from
:data:`PROCESS_WARMUP_S` after it was first given the job (its first Python heap sample, written
only where the job runs) or, for a process never given it, after its first sample. A restart of
the job on a process that already had it is **not** a warm-up: memory a restart leaves behind is
exactly the leak this looks for, so it counts.

A metric of the whole run (a topic, the checkpoint) is read by its **floor**: the least value in
each :data:`FLOOR_WINDOW_S` of the last half, and the slope of those floors. A restart's backlog
fills the topics for a while and compaction, pruning and retention saw them down again, so the
samples rise and fall with every restart and every cleaner pass; what grows without bound lifts
the floor. (Cutting at restarts instead left nothing to judge when the job restarted every 40 s.)

A slope read from too little is no verdict: a metric needs :data:`MIN_COVERED_S` of samples in
the last half (summed over its pieces) where the caller asks for it (long runs), or it is
reported unmeasured and fails.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

#: metric -> the largest slope over the last half of a run that passes, per hour, with its unit.
BOUNDS: dict[str, tuple[float, str]] = {
    "taskmanager_rss_mb": (120.0, "MB/h"),
    "jobmanager_rss_mb": (120.0, "MB/h"),
    "taskmanager_fds": (200.0, "fds/h"),
    "taskmanager_threads": (120.0, "threads/h"),
    "jobmanager_threads": (120.0, "threads/h"),
    "checkpoint_kb": (2048.0, "KB/h"),
    "store_topic_mb": (200.0, "MB/h"),
    # Records on the store topic's disk: runs' states pruned (tombstones) and compacted away. A
    # store that pruned nothing would keep at least one record per call: about 130,000 an hour
    # at 6 tickets/s; a 10-minute look at a 6/s run saw a sawtooth of 18,000-34,000 records
    # rising about 60,000 an hour (its backlog growing too).
    "store_topic_records": (100_000.0, "records/h"),
    # The interpreter inside each TaskManager (bench/soak_heap.py): pymalloc blocks in use (one
    # per small object) and Python threads. 100,000 blocks an hour is about 5 objects kept per
    # ticket at 5.5 tickets/s.
    "python_blocks": (100_000.0, "blocks/h"),
    "python_threads": (20.0, "threads/h"),
    # The event-log topic keeps a few minutes of records (retention, bench/soak.py): a retention
    # that deletes nothing shows as the whole write rate, about 40 records (some 110 bytes each
    # after zstd) per ticket: at 6 tickets/s 860,000 records and 95 MB an hour.
    "event_log_topic_mb": (50.0, "MB/h"),
    "event_log_records": (100_000.0, "records/h"),
}


#: The window a metric of the whole run takes its floor (least value) in.
FLOOR_WINDOW_S = 300.0
#: Seconds of a process after it was first given the job (or born, if never) that do not count:
#: the first recorded run took 6-8 minutes from the job's arrival to a plateau.
PROCESS_WARMUP_S = 600.0
#: The samples a metric needs in the last half of a long run for its slope to be a verdict.
MIN_COVERED_S = 600.0

Segments = dict[str, list[tuple[float, float]]]
"""Per process (or ``""`` for the whole run), the ``(epoch seconds, value)`` samples."""


@dataclass(frozen=True)
class ProcessSample:
    rss_mb: float
    fds: int
    threads: int


def sample_process(pid: int) -> ProcessSample | None:
    """RSS, open descriptors and threads of ``pid`` (None when it is gone or stopped)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = sum(1 for _ in Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    if fields.get("State", "").strip().startswith(("T", "Z")):  # stopped by a fault, or dead
        return None
    return ProcessSample(
        rss_mb=int(fields["VmRSS"].split()[0]) / 1024,
        fds=fds,
        threads=int(fields["Threads"]),
    )


def directory_mb(path: Path) -> float:
    """Bytes on disk under ``path`` in MB (0.0 where it is missing)."""
    total = 0
    for file in path.rglob("*"):
        try:
            total += file.stat().st_size if file.is_file() else 0
        except OSError:
            continue  # a segment deleted by the cleaner while we looked
    return total / 2**20


#: A record batch's header (Kafka's message format v2): base offset, batch length (of what
#: follows it), leader epoch, magic, CRC, attributes, last offset delta, two timestamps,
#: producer id, epoch and base sequence, then the batch's record count.
_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
_CONTROL_BATCH = 0x20  # attributes: a transaction marker, not records


def log_records(partition_dir: Path) -> int:
    """The records held in a partition's log segments on disk (``*.log`` under
    ``partition_dir``), counted from the batch headers alone: compaction and retention at work
    show here, which the topic's offsets do not show for a compacted topic. A segment replaced
    or cut short while it is read counts up to where it ends."""
    total = 0
    for segment in sorted(partition_dir.glob("*.log")):
        try:
            with (
                segment.open("rb") as file,
                mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data,
            ):
                total += _segment_records(data)
        except (OSError, ValueError):
            continue  # deleted by the cleaner, or empty (mmap refuses an empty file)
    return total


def _segment_records(data: mmap.mmap | bytes) -> int:
    count = position = 0
    while position + _BATCH_HEADER.size <= len(data):
        fields = _BATCH_HEADER.unpack_from(data, position)
        length, magic, attributes, records = fields[1], fields[3], fields[5], fields[12]
        if magic != 2 or length <= 0:
            break  # preallocated zeros at a segment's end, or not the format read here
        if not attributes & _CONTROL_BATCH:
            count += records
        position += 12 + length
    return count


@dataclass(frozen=True)
class Slope:
    """A pooled slope per hour and the seconds of samples it was read from."""

    per_hour: float
    covered_s: float


def slope_per_hour(
    segments: Segments,
    start: float,
    end: float,
    arrivals: Mapping[str, float] | None = None,
) -> Slope:
    """The pooled least-squares slope per hour of ``segments`` over the last half of
    ``start``..``end`` (0.0 where no piece has 3 points there): a process's segment (named by
    its pid) from :data:`PROCESS_WARMUP_S` after ``arrivals[pid]`` (epoch seconds; its first
    sample when absent), the whole run's segment (``""``) by its floor in each
    :data:`FLOOR_WINDOW_S`."""
    middle = (start + end) / 2
    covariance = spread = covered = 0.0
    for kept in _pieces(segments, middle, arrivals or {}):
        if len(kept) < 3:
            continue
        covered += kept[-1][0] - kept[0][0]
        mean_t = sum(t for t, _ in kept) / len(kept)
        mean_v = sum(v for _, v in kept) / len(kept)
        covariance += sum((t - mean_t) * (v - mean_v) for t, v in kept)
        spread += sum((t - mean_t) ** 2 for t, _ in kept)
    return Slope(covariance / spread * 3600 if spread else 0.0, covered)


def _pieces(
    segments: Segments, middle: float, arrivals: Mapping[str, float]
) -> list[list[tuple[float, float]]]:
    """The points that count from ``middle`` on: a process's samples from its warm-up's end on;
    the whole run's floors, one per :data:`FLOOR_WINDOW_S` (at the window's middle)."""
    pieces: list[list[tuple[float, float]]] = []
    for segment, points in segments.items():
        if not points:
            continue
        points = sorted(points)
        if segment:
            warm = max(middle, arrivals.get(segment, points[0][0]) + PROCESS_WARMUP_S)
            pieces.append([(t, v) for t, v in points if t >= warm])
            continue
        floors: dict[int, float] = {}
        for t, v in points:
            if t < middle:
                continue
            window = int((t - middle) // FLOOR_WINDOW_S)
            floors[window] = min(v, floors.get(window, v))
        pieces.append([(middle + (w + 0.5) * FLOOR_WINDOW_S, v) for w, v in sorted(floors.items())])
    return pieces


def job_arrivals(series: Mapping[str, Segments]) -> dict[str, float]:
    """Per process, when it was first given the job: its first Python heap sample (the heap
    sampler runs only inside the job)."""
    return {
        pid: min(t for t, _ in points)
        for pid, points in series.get("python_blocks", {}).items()
        if points
    }


@dataclass(frozen=True)
class Growth:
    metric: str
    slope: float
    bound: float
    unit: str
    covered_s: float = 0.0
    required_s: float = 0.0

    @property
    def measured(self) -> bool:
        return self.covered_s >= self.required_s

    @property
    def ok(self) -> bool:
        return self.measured and self.slope <= self.bound


def judge_growth(
    series: dict[str, Segments],
    start: float,
    end: float,
    required_s: float = 0.0,
) -> list[Growth]:
    """Each bounded metric's slope over the last half of ``start``..``end`` against
    :data:`BOUNDS`, each needing ``required_s`` of samples there (a metric never sampled:
    0.0 over 0 s)."""
    arrivals = job_arrivals(series)
    judged = []
    for metric, (bound, unit) in BOUNDS.items():
        slope = slope_per_hour(series.get(metric, {}), start, end, arrivals)
        judged.append(Growth(metric, slope.per_hour, bound, unit, slope.covered_s, required_s))
    return judged
