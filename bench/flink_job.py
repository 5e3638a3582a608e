"""One benchmark job on the PyFlink mini-cluster: stamped inputs in, stamped outputs out.

Shared by every Flink measurement (our operator, the naive baseline, the store, recovery):

* the source holds JSON records ``{"k": key, "text": "@T0"}``; a map right after it replaces
  ``@T0`` with the wall time, so the text the agent sees *is* its input's timestamp;
* every answer repeats that text, and a map chained right after the agent operator writes
  ``<t_in> <t_out>`` with the time the output left the operator;
* a FileSink collects those lines; :func:`bench.stats.summarize` turns them into rate and
  latency over the middle of the run.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pyflink.common import Configuration, Encoder, Types
from pyflink.datastream import DataStream, StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import FileSink

from bench.stats import RunStats, read_stamps, summarize
from flink_agents.flink.job import JobSpec

REPO = Path(__file__).resolve().parents[1]
PLACEHOLDER = "@T0"
_STAMP = re.compile(r"\d{10}\.\d{6}")

# Small network buffers: with Flink's 32 KB segments a saturated exchange holds thousands of
# these ~40-byte records, and latency would measure that queue rather than the operator.
SMALL_BUFFERS = {
    "taskmanager.memory.segment-size": "4kb",
    "taskmanager.network.memory.floating-buffers-per-gate": "2",
}

Pipeline = Callable[[StreamExecutionEnvironment, DataStream], DataStream]
"""Builds the measured part: stamped input records (JSON text) in, output records out."""


@dataclass(frozen=True)
class JobSettings:
    """How the mini-cluster runs one job."""

    mode: str = "thread"  # PyFlink Python execution mode; "process" = loopback locally
    checkpoint_ms: int = 1000
    restart_delay_ms: int = 1000


def flink_config(work: Path, settings: JobSettings) -> dict[str, str]:
    """The project's job configuration (via JobSpec) plus the bench's buffer settings."""
    spec = JobSpec(
        name="bench",
        agent="unused",
        source={"kind": "list", "path": "unused"},
        key="k",
        execution_mode=settings.mode,
        checkpointing={"interval_ms": settings.checkpoint_ms, "dir": str(work / "ckpt")},
        restart_strategy={"delay_ms": settings.restart_delay_ms},
    )
    return {**spec.flink_config(), **SMALL_BUFFERS}


def input_records(count: int, keys: int) -> list[str]:
    """``count`` records spread round-robin over ``keys`` keys, text to be stamped."""
    return [json.dumps({"k": i % keys, "text": PLACEHOLDER}) for i in range(count)]


def stamp_input(text: str) -> str:
    return text.replace(PLACEHOLDER, f"{time.time():.6f}", 1)


def stamp_output(text: str) -> str:
    """``<t_in> <t_out>``; an output without a stamp (an error output) gets ``nan``."""
    found = _STAMP.search(text)
    return f"{found.group(0) if found else 'nan'} {time.time():.6f}"


def run_job(
    name: str,
    pipeline: Pipeline,
    *,
    inputs: int,
    keys: int,
    settings: JobSettings | None = None,
    after: Callable[[DataStream], DataStream] | None = None,
) -> tuple[RunStats, float]:
    """Execute one job to the end; return its stats and wall time (job submission included).

    ``after`` may insert a step between the operator and the output stamp (e.g. a failure).
    """
    settings = settings or JobSettings()
    (REPO / ".cache").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"bench-{name}-", dir=REPO / ".cache"))
    try:
        config = Configuration()
        for key, value in flink_config(work, settings).items():
            config.set_string(key, value)
        env = StreamExecutionEnvironment.get_execution_environment(config)
        env.set_parallelism(1)
        source = env.from_collection(input_records(inputs, keys), type_info=Types.STRING())
        stamped = source.map(stamp_input, output_type=Types.STRING())
        outputs = pipeline(env, stamped)
        if after is not None:
            outputs = after(outputs)
        sink = FileSink.for_row_format(str(work / "out"), Encoder.simple_string_encoder()).build()
        outputs.map(stamp_output, output_type=Types.STRING()).sink_to(sink)
        started = time.time()
        env.execute(f"bench-{name}")
        wall = time.time() - started
        pairs, errors = read_stamps(work / "out")
        return summarize(pairs, errors), wall
    finally:
        shutil.rmtree(work, ignore_errors=True)
