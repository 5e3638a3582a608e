"""One benchmark job on the PyFlink mini-cluster: stamped inputs in, stamped outputs out.

Shared by every Flink measurement (our operator, the naive baseline, the store, recovery,
and the peer driver, which loads it from its own virtual environment -- so no import of this
project's package here):

stamped inputs (see ``bench/stamping.py``), the measured pipeline, an output stamp chained
right after it, and a FileSink of ``<t_in> <t_out>`` lines that :func:`bench.stats.summarize`
turns into rate and latency over the middle of the run.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pyflink.common import Configuration, Encoder, Types, WatermarkStrategy
from pyflink.datastream import DataStream, StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import FileSink, FileSource, StreamFormat

from bench.stamping import (
    PLACEHOLDER,
    SMALL_BUFFERS,
    input_records,
    stamp_input,
    stamp_output,
)
from bench.stats import RunStats, read_stamps, summarize

FIXED_STAMP = "0000000000.000000"

REPO = Path(__file__).resolve().parents[1]
Pipeline = Callable[[StreamExecutionEnvironment, DataStream], DataStream]
"""Builds the measured part: stamped input records (JSON text) in, output records out."""


@dataclass(frozen=True)
class JobOutput:
    """Stamp pairs of every output, outputs without a stamp, and the job's wall time."""

    pairs: list[tuple[float, float]]
    errors: int
    wall_s: float

    def stats(self) -> RunStats:
        return summarize(self.pairs, self.errors)


def run_job(
    name: str,
    pipeline: Pipeline,
    *,
    inputs: int,
    keys: int,
    configure: Callable[[Path], dict[str, str]],
    after: Callable[[DataStream], DataStream] | None = None,
    stamp_inputs: bool = True,
) -> JobOutput:
    """Execute one job to the end and collect its stamps.

    ``configure`` gives the Flink configuration for a work folder (checkpoints go there);
    ``after`` may insert a step between the measured pipeline and the output stamp. Without
    ``stamp_inputs`` the inputs carry a fixed stamp: a replayed input must be the same input
    for its recorded calls to be handed back (no latency is measured then).
    """
    (REPO / ".cache").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"bench-{name}-", dir=REPO / ".cache"))
    try:
        config = Configuration()
        for key, value in {**configure(work), **SMALL_BUFFERS}.items():
            config.set_string(key, value)
        env = StreamExecutionEnvironment.get_execution_environment(config)
        env.set_parallelism(1)
        # A file source resumes at its checkpointed position after a restore; a collection
        # source starts over, which would give replayed inputs new seqs (and new call ids).
        records = work / "inputs.jsonl"
        lines = input_records(inputs, keys)
        if not stamp_inputs:  # a fixed stamp: outputs still parse, latency is meaningless
            lines = [line.replace(PLACEHOLDER, FIXED_STAMP, 1) for line in lines]
        records.write_text("".join(line + "\n" for line in lines))
        file_source = FileSource.for_record_stream_format(
            StreamFormat.text_line_format(), str(records)
        ).build()
        source = env.from_source(file_source, WatermarkStrategy.no_watermarks(), "inputs")
        stamped = source.map(stamp_input, output_type=Types.STRING()) if stamp_inputs else source
        outputs = pipeline(env, stamped)
        if after is not None:
            outputs = after(outputs)
        sink = FileSink.for_row_format(str(work / "out"), Encoder.simple_string_encoder()).build()
        outputs.map(stamp_output, output_type=Types.STRING()).sink_to(sink)
        started = time.time()
        env.execute(f"bench-{name}")
        wall = time.time() - started
        pairs, errors = read_stamps(work / "out")
        return JobOutput(pairs, errors, wall)
    finally:
        shutil.rmtree(work, ignore_errors=True)
