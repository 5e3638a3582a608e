"""Build and run a job spec: on the local mini-cluster, or submitted to a standalone cluster.

`python -m flink_agents.flink.job_runner JOB.yaml [IMPORT_ROOT...]` is also the entry point
`flink run -py` executes on a cluster (see :func:`submit_command`). Import roots are folders the
agent's ``module:attr`` references are imported from, in the driver and in the Python workers.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from pyflink.common import Configuration, Encoder, Types
from pyflink.datastream import DataStream, StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import FileSink

import flink_agents
from flink_agents.flink.environment import AgentInput, AgentsExecutionEnvironment
from flink_agents.flink.job import JobSpec, KafkaSourceSpec, ListSourceSpec, load_job
from flink_agents.runtime.records import is_error_record


def environment(spec: JobSpec, import_roots: Sequence[str] = ()) -> StreamExecutionEnvironment:
    """A StreamExecutionEnvironment configured from the spec (checkpoints, restarts, mode).

    ``import_roots`` go first on the Python workers' path (``python.pythonpath``).
    """
    settings = spec.flink_config()
    if import_roots:
        settings["python.pythonpath"] = os.pathsep.join(
            [*import_roots, settings["python.pythonpath"]]
        )
    config = Configuration()
    for name, value in settings.items():
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
    agents = AgentsExecutionEnvironment(
        env, options=spec.operator, store=spec.store, event_log=spec.event_log_config()
    )
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
    if spec.dead_letter is not None:
        errors = outputs.filter(is_error_record).name("error records")
        agents.to_kafka(
            errors, spec.dead_letter.topic, bootstrap_servers=spec.dead_letter.bootstrap_servers
        )


def run(spec: JobSpec, import_roots: Sequence[str] = ()) -> None:
    """Run the job until its input ends (or forever, for Kafka): on the local mini-cluster, or
    on a cluster when `flink run` executes this module."""
    env = environment(spec, import_roots)
    build(spec, env)
    env.execute(spec.name)


def submit_command(job_file: str | Path, jobmanager: str, *, detached: bool = False) -> list[str]:
    """The `flink run -py` command line submitting ``job_file`` to a standalone cluster.

    The package's folder and the job's folder are shipped with ``-pyfs`` so a cluster whose
    Python lacks them can import the agent's actions. The current directory is the job's import
    root, as for every CLI command (``examples.weather:get_temperature`` from the repository
    root): the driver and the workers import from it, so they must see it (one machine, or a
    shared file system). Both interpreters are named: `flink` would otherwise start the driver
    with whatever ``python`` comes first on PATH.
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
        # The client driver runs this interpreter, not whatever `python` is first on PATH.
        "-pyclientexec",
        sys.executable,
        "-pyexec",
        os.environ.get("FLINK_AGENTS_CLUSTER_PYTHON", sys.executable),
        "-py",
        str(Path(__file__).resolve()),
        str(job_path),
        os.getcwd(),
    ]
    return command


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print(
            "usage: python -m flink_agents.flink.job_runner JOB.yaml [IMPORT_ROOT...]",
            file=sys.stderr,
        )
        return 2
    job_file, *import_roots = args
    sys.path[:0] = [root for root in import_roots if root not in sys.path]
    run(load_job(job_file), import_roots)
    return 0


if __name__ == "__main__":
    sys.exit(main())
