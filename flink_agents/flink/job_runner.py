"""Build and run a job spec: on the local mini-cluster, or submitted to a standalone cluster.

`python -m flink_agents.flink.job_runner JOB.yaml` is also the entry point `flink run -py`
executes on a cluster (see :func:`submit_command`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from pyflink.common import Configuration, Encoder, Types
from pyflink.datastream import DataStream, StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import FileSink

import flink_agents
from flink_agents.flink.environment import AgentInput, AgentsExecutionEnvironment
from flink_agents.flink.job import JobSpec, KafkaSourceSpec, ListSourceSpec, load_job


def environment(spec: JobSpec) -> StreamExecutionEnvironment:
    """A StreamExecutionEnvironment configured from the spec (checkpoints, restarts, mode)."""
    config = Configuration()
    for name, value in spec.flink_config().items():
        config.set_string(name, value)
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(spec.parallelism)
    return env


def _input(spec: JobSpec, agents: AgentsExecutionEnvironment) -> AgentInput:
    source = spec.source
    if isinstance(source, ListSourceSpec):
        return agents.from_file(
            spec.resolve(source.path), key=spec.key, records_per_second=source.records_per_second
        )
    assert isinstance(source, KafkaSourceSpec)
    return agents.from_kafka(
        source.topic,
        bootstrap_servers=source.bootstrap_servers,
        key=spec.key,
        group_id=source.group_id,
        starting_offsets=source.starting_offsets,
        bounded=source.bounded,
    )


OutputTransform = Callable[[DataStream], DataStream]


def build(
    spec: JobSpec, env: StreamExecutionEnvironment, before_sink: OutputTransform | None = None
) -> None:
    """Add the spec's pipeline (source -> agent -> sink) to ``env``.

    ``before_sink`` may transform the outputs on their way to the sink (the demo uses it to
    inject a failure).
    """
    agents = AgentsExecutionEnvironment(env, options=spec.operator, store=spec.store)
    outputs = _input(spec, agents).apply(spec.plan()).to_datastream()
    if before_sink is not None:
        outputs = before_sink(outputs)
    sink = spec.sink
    if sink.kind == "stdout":
        outputs.print()
    elif sink.kind == "file":
        folder = spec.resolve(sink.path).resolve()
        file_sink = FileSink.for_row_format(str(folder), Encoder.simple_string_encoder()).build()
        outputs.map(lambda s: s, output_type=Types.STRING()).sink_to(file_sink)
    else:
        agents.to_kafka(outputs, sink.topic, bootstrap_servers=sink.bootstrap_servers)


def run(spec: JobSpec) -> None:
    """Run the job on the local mini-cluster until its input ends (or forever, for Kafka)."""
    env = environment(spec)
    build(spec, env)
    env.execute(spec.name)


def submit_command(job_file: str | Path, jobmanager: str, *, detached: bool = False) -> list[str]:
    """The `flink run -py` command line submitting ``job_file`` to a standalone cluster.

    The package's folder and the job's folder are shipped with ``-pyfs`` so a cluster whose
    Python lacks them can import the agent's actions.
    """
    import pyflink

    flink = Path(pyflink.__file__).parent / "bin" / "flink"
    job_path = Path(job_file).resolve()
    package_root = Path(flink_agents.__file__).resolve().parents[1]
    command = [str(flink), "run", "-m", jobmanager]
    if detached:
        command.append("-d")
    command += [
        "-pyfs",
        f"{package_root / 'flink_agents'},{job_path.parent}",
        "-pyexec",
        os.environ.get("FLINK_AGENTS_CLUSTER_PYTHON", sys.executable),
        "-py",
        str(Path(__file__).resolve()),
        str(job_path),
    ]
    return command


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m flink_agents.flink.job_runner JOB.yaml", file=sys.stderr)
        return 2
    run(load_job(args[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
