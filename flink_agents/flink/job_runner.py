"""Build and run a job spec: on the local mini-cluster, or submitted to a standalone cluster.

`python -m flink_agents.flink.job_runner JOB.yaml [IMPORT_ROOT...] [--parallelism N]
[--from-savepoint]` is also the entry point `flink run -py` executes on a cluster (see
:func:`submit_command`). Import roots are folders the agent's ``module:attr`` references are
imported from, in the driver and in the Python workers.
"""

from __future__ import annotations

import os
import sys

# `flink run -py .../job_runner.py` runs this file as a script, so Python puts its folder first on
# sys.path, where operator.py would shadow the standard library's `operator` (argparse imports it
# below). An editable install hides this: its path hooks import the standard one at start-up.
if sys.path and os.path.realpath(sys.path[0]) == os.path.dirname(os.path.realpath(__file__)):
    sys.path.remove(sys.path[0])

import argparse
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pyflink.common import Configuration, Encoder
from pyflink.datastream import DataStream, StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import FileSink

import flink_agents
from flink_agents.flink.environment import (
    AgentInput,
    AgentsExecutionEnvironment,
    ExactlyOnce,
    as_json_text,
)
from flink_agents.flink.job import (
    DeadLetterSpec,
    JobSpec,
    KafkaSinkSpec,
    KafkaSourceSpec,
    ListSourceSpec,
    SinkSpec,
    SourceSpec,
    load_job,
)
from flink_agents.flink.sql_job import create_tables, sql_input, sql_sink
from flink_agents.flink.sql_spec import SqlSinkSpec, SqlSourceSpec
from flink_agents.runtime.json_records import is_error_record
from flink_agents.runtime.typed_outputs import JsonOutputs, JsonSchemaOutputType, OutputType


def environment(
    spec: JobSpec, import_roots: Sequence[str] = (), *, extra: Mapping[str, str] | None = None
) -> StreamExecutionEnvironment:
    """A StreamExecutionEnvironment configured from the spec (checkpoints, restarts, mode).

    ``import_roots`` go first on the Python workers' path (``python.pythonpath``); ``extra``
    settings are added (the status line's REST port of a local run).
    """
    settings = {**spec.flink_config(), **(extra or {})}
    if import_roots:
        settings["python.pythonpath"] = os.pathsep.join(
            [*import_roots, settings["python.pythonpath"]]
        )
    config = Configuration()
    for name, value in settings.items():
        config.set_string(name, value)
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(spec.parallelism)
    env.set_max_parallelism(spec.max_parallelism)
    return env


def exactly_once(spec: JobSpec) -> ExactlyOnce | None:
    """The exactly-once settings of the spec's Kafka sink, if it asks for exactly-once."""
    sink = spec.sink
    if not isinstance(sink, KafkaSinkSpec) or sink.delivery != "exactly-once":
        return None
    return ExactlyOnce(spec.transactional_id_prefix(), sink.transaction_timeout_ms)


def _input(
    spec: JobSpec, agents: AgentsExecutionEnvironment, source: SourceSpec | None = None
) -> AgentInput:
    """The input ``source`` names (default: the spec's source), keyed by the spec's key."""
    if source is None:
        if isinstance(spec.source, SqlSourceSpec):
            return sql_input(agents, spec.source, spec.key)
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
    """Add the spec's pipeline (source -> agent(s) -> sink) to ``env``.

    ``before_sink`` may transform the outputs (JSON text) on their way to the sink, into a stream
    of strings again (the demo uses it to inject a failure).
    """
    agents = AgentsExecutionEnvironment(env, settings=spec.settings)
    create_tables(agents, spec.tables)
    agent_input = _input(spec, agents)
    if spec.decisions is not None:  # decisions and events for waits (docs/waits.md)
        agent_input.with_decisions(_input(spec, agents, spec.decisions))
    errors: DataStream | None = None
    if spec.typed:
        outputs, errors = _typed_stages(spec, agent_input)
    else:
        outputs = agent_input.apply(spec.plan()).to_envelopes()
        if spec.dead_letter is not None:
            # Only for a sink that reads it: Flink runs an operator no sink reads all the same,
            # and each Python operator costs every attempt an embedded interpreter
            # (docs/reliability.md, "What the Python blocks are").
            errors = outputs.filter(is_error_record).name("error records")
    if before_sink is not None:
        outputs = before_sink(outputs)
    _sink(spec, agents, outputs, spec.sink, exactly_once(spec))
    if errors is None:  # envelopes without a dead-letter sink
        return
    dead_letter = spec.dead_letter
    if dead_letter is None:  # a typed job's dead letters, printed when no sink takes them
        errors.print("dead letter")
        return
    if isinstance(dead_letter, DeadLetterSpec):
        dead_letter = KafkaSinkSpec(
            kind="kafka", topic=dead_letter.topic, bootstrap_servers=dead_letter.bootstrap_servers
        )
    _sink(spec, agents, errors, dead_letter, None)


def _typed_stages(spec: JobSpec, first: AgentInput) -> tuple[DataStream, DataStream]:
    """Run the spec's agent and its ``then`` stages; the last one's answers (JSON text) and
    every stage's dead letters."""
    stage = first.apply(spec.plan(), output_check=_schema(spec.output_schema))
    dead_letters = stage.dead_letters()
    for next_stage in spec.then:
        plan = spec.stage_plan(next_stage.agent, next_stage.agent_name)
        stage = stage.then(next_stage.key, every=next_stage.every).apply(
            plan, output_check=_schema(next_stage.output_schema)
        )
        dead_letters = dead_letters.union(stage.dead_letters())
    return as_json_text(stage.answers()), dead_letters


def _schema(schema: dict[str, Any] | None) -> OutputType:
    return JsonOutputs() if schema is None else JsonSchemaOutputType(schema)


def _sink(
    spec: JobSpec,
    agents: AgentsExecutionEnvironment,
    outputs: DataStream,
    sink: SinkSpec | SqlSinkSpec,
    exactly: ExactlyOnce | None,
) -> None:
    """Write ``outputs`` (JSON text) to ``sink``."""
    if isinstance(sink, SqlSinkSpec):
        sql_sink(agents, outputs, sink)
    elif sink.kind == "stdout":
        outputs.print()
    elif sink.kind == "file":
        folder = spec.resolve(sink.path).resolve()
        file_sink = FileSink.for_row_format(str(folder), Encoder.simple_string_encoder()).build()
        outputs.sink_to(file_sink).uid(agents.uid(f"sink:file:{folder}"))
    else:
        agents.to_kafka(
            outputs, sink.topic, bootstrap_servers=sink.bootstrap_servers, exactly_once=exactly
        )


def run(spec: JobSpec, import_roots: Sequence[str] = ()) -> None:
    """Run the job until its input ends (or forever, for Kafka): on the local mini-cluster, or
    on a cluster when `flink run` executes this module."""
    env = environment(spec, import_roots)
    build(spec, env)
    env.execute(spec.name)


def submit_command(
    job_file: str | Path,
    jobmanager: str,
    *,
    detached: bool = False,
    from_savepoint: str | None = None,
    parallelism: int | None = None,
) -> list[str]:
    """The `flink run -py` command line submitting ``job_file`` to a standalone cluster.

    The package's folder and the job's folder are shipped with ``-pyfs`` so a cluster whose
    Python lacks them can import the agent's actions. The current directory is the job's import
    root, as for every CLI command (``examples.weather:get_temperature`` from the repository
    root): the driver and the workers import from it, so they must see it (one machine, or a
    shared file system). Both interpreters are named: `flink` would otherwise start the driver
    with whatever ``python`` comes first on PATH.

    ``from_savepoint`` starts the job from that savepoint (or retained checkpoint) and tells the
    operator so (``started_from_savepoint``); ``parallelism`` overrides the spec's (a savepoint
    restores at any parallelism up to the spec's ``max_parallelism``).
    """
    import pyflink

    flink = Path(pyflink.__file__).parent / "bin" / "flink"
    job_path = Path(job_file).resolve()
    command = [str(flink), "run", "-m", jobmanager]
    if detached:
        command.append("-d")
    if from_savepoint is not None:
        command += ["-s", from_savepoint]
    command += [
        "-pyfs",
        ",".join(str(folder) for folder in shipped_folders(job_path)),
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
    if from_savepoint is not None:
        command.append("--from-savepoint")
    if parallelism is not None:
        command += ["--parallelism", str(parallelism)]
    return command


def shipped_folders(job_file: str | Path) -> list[Path]:
    """The folders :func:`submit_command` ships with ``-pyfs``: the package's and the job's."""
    package = Path(flink_agents.__file__).resolve().parent
    return [package, Path(job_file).resolve().parent]


def shipped_outputs(spec: JobSpec, job_file: str | Path) -> list[str]:
    """Warnings for what the job writes inside a folder :func:`submit_command` ships: every
    later submit would upload it to the cluster again (and put it on the workers' path)."""
    return [
        f"{setting} {path} is inside {folder}, which submit ships to the cluster (-pyfs): "
        f"every later submit uploads it again; set {setting} outside that folder"
        for setting, path in spec.output_paths().items()
        for folder in shipped_folders(job_file)
        if path.is_relative_to(folder)
    ]


def with_overrides(spec: JobSpec, *, parallelism: int | None, from_savepoint: bool) -> JobSpec:
    """``spec`` with the submit command's overrides: another parallelism, a savepoint start.

    Raises ``ValueError`` for a parallelism above the spec's ``max_parallelism``.
    """
    updates: dict[str, object] = {}
    if parallelism is not None:
        if not 1 <= parallelism <= spec.max_parallelism:
            raise ValueError(
                f"parallelism {parallelism} is outside 1..max_parallelism "
                f"({spec.max_parallelism}) of job {spec.name!r}"
            )
        updates["parallelism"] = parallelism
    if from_savepoint:
        updates["operator"] = spec.operator.model_copy(update={"started_from_savepoint": True})
    overridden = spec.model_copy(update=updates)
    overridden._base_dir = spec.base_dir
    return overridden


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m flink_agents.flink.job_runner")
    parser.add_argument("job", help="a job spec (jobs/*.yaml)")
    parser.add_argument("import_roots", nargs="*", help="folders module:attr is imported from")
    parser.add_argument("--parallelism", type=int, help="instead of the spec's")
    parser.add_argument(
        "--from-savepoint",
        action="store_true",
        help="the job starts from a savepoint (`flink run -s`): restore the action-state store",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(sys.argv[1:] if argv is None else argv)
    import_roots: list[str] = args.import_roots
    sys.path[:0] = [root for root in import_roots if root not in sys.path]
    spec = with_overrides(
        load_job(args.job), parallelism=args.parallelism, from_savepoint=args.from_savepoint
    )
    run(spec, import_roots)
    return 0


if __name__ == "__main__":
    sys.exit(main())
