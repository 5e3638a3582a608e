"""Job specs (``jobs/*.yaml``): which agent, which input, which output, and how Flink runs it.

A job spec is validated like an agent file: an error names the file, the line and the field.
Relative paths inside a spec are relative to the spec's own folder. The JSON Schema is
published in ``flink_agents/schemas/job.schema.json`` (``python -m scripts.regenerate``).
"""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from flink_agents.flink.sql_spec import (
    CreateStatement,
    SqlSinkSpec,
    SqlSourceSpec,
    check_sql_tables,
)
from flink_agents.observability import EventLogConfig
from flink_agents.plan.models import AgentPlan
from flink_agents.plan.sources import load_plan
from flink_agents.plan.yaml.loader import load_yaml_model
from flink_agents.runtime.settings import RuntimeSettings
from flink_agents.runtime.typed_outputs import JsonSchemaOutputType

PROCESS_MODE_BUNDLE_SIZE = "1"
"""``python.fn-execution.bundle.size`` for process mode. PyFlink 2.2 registers the timers a
bundle sets through the task's mailbox; the bundle a checkpoint flushes before its barrier has
them registered only after the snapshot, so that checkpoint holds the keys' pending inputs but
no timer to visit them again. One element per bundle leaves no bundle open at a barrier."""


SLOW_PROCESS_MODE = (
    "execution_mode: process is refused: process mode must close a Python bundle per element "
    "(python.fn-execution.bundle.size 1), or a restore from a checkpoint loses the timers of the "
    "last bundle and with them those keys' inputs; each bundle is a round trip to the Python "
    "worker, which held the agent operator to about a fifth of thread mode's runs/s "
    "(docs/flink-runtime.md, 'Process mode'). Use execution_mode: thread (the default), or set "
    "accept_slow_process_mode: true to run process mode at that cost"
)
"""Why a job spec refuses process mode unless it opts in, and what to use instead."""


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ListSourceSpec(_Spec):
    """A bounded input: a JSON-lines file, one record per line."""

    kind: Literal["list"]
    path: str = Field(description="JSON-lines file, relative to the job spec.")
    records_per_second: float | None = Field(
        default=None, gt=0, description="Let the records arrive at this rate, like a live stream."
    )


class KafkaSourceSpec(_Spec):
    """Records (JSON text values) of a Kafka topic."""

    kind: Literal["kafka"]
    topic: str
    bootstrap_servers: str = "127.0.0.1:9092"
    group_id: str = "flink-agents"
    starting_offsets: Literal["earliest", "latest"] = "earliest"
    bounded: bool = Field(
        default=False, description="Stop at the topic's end offsets when the job starts."
    )


class StdoutSinkSpec(_Spec):
    kind: Literal["stdout"]


class FileSinkSpec(_Spec):
    """Part files of JSON lines in a folder (finalized at checkpoints and at the end)."""

    kind: Literal["file"]
    path: str = Field(description="Output folder, relative to the job spec.")


BROKER_MAX_TRANSACTION_TIMEOUT_MS = 900_000
"""The broker's default ``transaction.max.timeout.ms`` (15 min; scripts/kafka.sh keeps it): a
producer asking for a longer transaction timeout is refused when it starts."""

Delivery = Literal["at-least-once", "exactly-once"]


class KafkaSinkSpec(_Spec):
    """Outputs as records of a Kafka topic.

    ``at-least-once`` (the default): outputs are written as they come; after a failover an output
    emitted since the last checkpoint may be written again. ``exactly-once``: outputs are written
    in a Kafka transaction committed when the checkpoint completes, so a ``read_committed``
    consumer sees each output once, one checkpoint interval later (docs/reliability.md).
    """

    kind: Literal["kafka"]
    topic: str
    bootstrap_servers: str = "127.0.0.1:9092"
    delivery: Delivery = Field(
        default="at-least-once",
        description="exactly-once: transactions committed at checkpoints (read them with "
        "isolation.level=read_committed); outputs become visible one checkpoint later.",
    )
    transactional_id_prefix: str | None = Field(
        default=None,
        min_length=1,
        description="exactly-once: prefix of the sink's transactional ids (default: flink-agents-"
        "<job name>). Keep it stable across restarts and unique among jobs on the cluster.",
    )
    transaction_timeout_ms: int = Field(
        default=600_000,
        gt=0,
        le=BROKER_MAX_TRANSACTION_TIMEOUT_MS,
        description="exactly-once: how long the broker keeps a transaction open before aborting "
        "it; above the checkpoint interval (plus restart time), at most the broker's "
        "transaction.max.timeout.ms (15 min by default).",
    )


class DeadLetterSpec(_Spec):
    """A Kafka topic that also receives every error record: a run that failed under the agent's
    ``emit`` error policy (a poison input: its action fails on every attempt) and an input that
    could not be read. They stay in the job's outputs too (a job with typed outputs writes dead
    letters here instead, see docs/pipelines.md)."""

    topic: str
    bootstrap_servers: str = "127.0.0.1:9092"


SourceSpec = Annotated[ListSourceSpec | KafkaSourceSpec, Field(discriminator="kind")]
SinkSpec = Annotated[StdoutSinkSpec | FileSinkSpec | KafkaSinkSpec, Field(discriminator="kind")]
JobSourceSpec = Annotated[
    ListSourceSpec | KafkaSourceSpec | SqlSourceSpec, Field(discriminator="kind")
]
"""A job's source: a SourceSpec, or rows of a SQL table (flink/sql_spec.py)."""
JobSinkSpec = Annotated[
    StdoutSinkSpec | FileSinkSpec | KafkaSinkSpec | SqlSinkSpec, Field(discriminator="kind")
]
"""A job's sink: a SinkSpec, or rows of a SQL table (flink/sql_spec.py)."""


def _json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` if it is a JSON Schema (so a bad one is named with the spec's file and line)."""
    try:
        JsonSchemaOutputType(schema)
    except Exception as exc:  # jsonschema's SchemaError: pydantic reports ValueErrors
        raise ValueError(f"not a JSON Schema: {str(exc).splitlines()[0]}") from None
    return schema


OutputSchema = Annotated[dict[str, Any], AfterValidator(_json_schema)]


class StageSpec(_Spec):
    """A next agent of the job, fed with the answers of the one before it (docs/pipelines.md)."""

    agent: str = Field(
        description="A YAML agents file or plan JSON (relative to the job spec), or module:attr."
    )
    agent_name: str | None = Field(default=None, description="Which agent of a YAML file.")
    key: str = Field(description="Field of each answer of the stage before that keys its runs.")
    every: int | None = Field(
        default=None,
        ge=1,
        description="Run once per list of this many answers of one key (in the order they "
        "came; at a bounded input's end, each key's last, shorter list) rather than per answer.",
    )
    output_schema: OutputSchema | None = Field(
        default=None,
        description="JSON Schema of this stage's outputs: one that does not fit is a dead letter.",
    )


class CheckpointingSpec(_Spec):
    enabled: bool = Field(
        default=True,
        description="Without checkpoints a failure restarts the job from scratch, and an "
        "exactly-once sink cannot commit.",
    )
    interval_ms: int = Field(default=1000, ge=10)
    dir: str | None = Field(
        default=None,
        description="Checkpoint folder, relative to the job spec (default: "
        "$XDG_CACHE_HOME/flink-agents/checkpoints/<job name>, XDG_CACHE_HOME defaulting to "
        "~/.cache: outside the job's folder, which submit ships to the cluster).",
    )
    tolerable_failed_checkpoints: int = Field(
        default=0,
        ge=0,
        description="Checkpoints that may fail in a row before the job fails over (Flink's "
        "execution.checkpointing.tolerable-failed-checkpoints). 0: the first failed checkpoint "
        "restarts the job from the last completed one.",
    )


class RestartStrategySpec(_Spec):
    """How Flink restarts the job after a failure.

    The default allows a minute of attempts: after a TaskManager is lost, restart attempts fail
    at once until a new TaskManager offers a slot (seen here: 2-6 such attempts).
    """

    type: Literal["fixed-delay", "exponential-delay", "none"] = "fixed-delay"
    attempts: int = Field(default=30, ge=0)
    delay_ms: int = Field(default=2000, ge=0)


class JobSpec(RuntimeSettings):
    """One agent job: the runtime's settings (operator, store, event_log, max_concurrent_calls;
    keys at the spec's top level like the rest) plus which agent runs, on what input, to what
    output, and how Flink runs it."""

    name: str = Field(min_length=1)
    agent: str = Field(
        description="A YAML agents file or plan JSON (relative to the job spec), or module:attr."
    )
    agent_name: str | None = Field(default=None, description="Which agent of a YAML file.")
    tables: list[CreateStatement] = Field(
        default_factory=list,
        description="CREATE TABLE / CREATE VIEW statements run before the job is built, for "
        "a source or sink of kind sql (docs/yaml.md, 'SQL tables').",
    )
    source: JobSourceSpec
    key: str = Field(description="Field of each input record that keys its runs.")
    decisions: SourceSpec | None = Field(
        default=None,
        description="Where decisions and events for the runs' waits come from, keyed by the "
        "same key field (docs/waits.md).",
    )
    output_schema: OutputSchema | None = Field(
        default=None,
        description="JSON Schema of the agent's outputs. With it (or with `then`) the sink gets "
        "the answers as JSON records and failures go to dead_letter, not the envelopes.",
    )
    then: list[StageSpec] = Field(
        default_factory=list,
        description="Agents chained after this one, each fed with the answers of the one "
        "before, keyed by its own key field; the sink gets the last one's answers.",
    )
    sink: JobSinkSpec = Field(default_factory=lambda: StdoutSinkSpec(kind="stdout"))
    dead_letter: DeadLetterSpec | SinkSpec | None = Field(
        default=None,
        description="Envelope outputs: also write error records to this Kafka topic. Typed "
        "outputs: where dead letters go (a sink; default: stdout, prefixed 'dead letter').",
    )
    parallelism: int = Field(default=1, ge=1)
    max_parallelism: int = Field(
        default=128,
        ge=1,
        le=32768,
        description="Key groups of the job's keyed state: fixed for the job's life, so a "
        "savepoint can be restored at another parallelism (up to this).",
    )
    execution_mode: Literal["thread", "process"] = Field(
        default="thread",
        description="PyFlink's Python execution mode. Process mode is refused unless "
        "accept_slow_process_mode is set: it must close a bundle per element, which held it to "
        "about a fifth of thread mode's runs/s (docs/flink-runtime.md, 'Process mode').",
    )
    accept_slow_process_mode: bool = Field(
        default=False,
        description="Run execution_mode: process anyway, at about a fifth of thread mode's "
        "throughput (for a Python that cannot be embedded in the JVM, or UDFs that need their "
        "own process).",
    )
    checkpointing: CheckpointingSpec = Field(default_factory=CheckpointingSpec)
    restart_strategy: RestartStrategySpec = Field(default_factory=RestartStrategySpec)

    _base_dir: Path = PrivateAttr(default=Path("."))

    @model_validator(mode="after")
    def _check_settings_fit_together(self) -> JobSpec:
        check_sql_tables(self.tables, self.source, self.sink, typed=self.typed)
        if self.execution_mode == "process" and not self.accept_slow_process_mode:
            raise ValueError(SLOW_PROCESS_MODE)
        if self.parallelism > self.max_parallelism:
            raise ValueError(
                f"parallelism {self.parallelism} is above max_parallelism {self.max_parallelism}"
            )
        sink = self.sink
        if isinstance(sink, KafkaSinkSpec) and sink.delivery == "exactly-once":
            checkpointing = self.checkpointing
            if not checkpointing.enabled:
                raise ValueError(
                    "sink.delivery exactly-once needs checkpointing: its transactions are "
                    "committed when a checkpoint completes, so without checkpoints no output "
                    "would ever be visible (enable checkpointing, or use at-least-once)"
                )
            if sink.transaction_timeout_ms <= checkpointing.interval_ms:
                raise ValueError(
                    f"sink.transaction_timeout_ms ({sink.transaction_timeout_ms}) must exceed "
                    f"checkpointing.interval_ms ({checkpointing.interval_ms}): a transaction "
                    "stays open from one checkpoint to the next, and the broker aborts it (its "
                    "outputs lost) once the timeout passes"
                )
        return self

    def transactional_id_prefix(self) -> str:
        """The exactly-once Kafka sink's transactional id prefix: the spec's, or the job's name."""
        sink = self.sink
        if isinstance(sink, KafkaSinkSpec) and sink.transactional_id_prefix:
            return sink.transactional_id_prefix
        return f"flink-agents-{self.name}"

    @property
    def base_dir(self) -> Path:
        """The spec's folder: relative paths in the spec start here."""
        return self._base_dir

    def resolve(self, path: str) -> Path:
        """A path of the spec, relative to the spec's folder."""
        candidate = Path(path)
        return candidate if candidate.is_absolute() else self._base_dir / candidate

    def plan(self) -> AgentPlan:
        """The agent's plan (compiled from YAML or Python, or read from plan JSON)."""
        return self.stage_plan(self.agent, self.agent_name)

    def stage_plan(self, agent: str, agent_name: str | None) -> AgentPlan:
        """The plan of ``agent`` (the spec's or a stage's), with the spec's call caps."""
        if not _is_reference(agent):
            agent = str(self.resolve(agent))
        return self.capped(load_plan(agent, agent_name))

    @property
    def typed(self) -> bool:
        """Whether the sink gets typed answers (``output_schema`` or ``then`` is set) rather
        than the envelopes."""
        return self.output_schema is not None or bool(self.then)

    @property
    def settings(self) -> RuntimeSettings:
        """The runtime's settings of this job, the event log's file path resolved against the
        spec's folder: what the job's operator is built from."""
        return RuntimeSettings(
            operator=self.operator,
            store=self.store,
            event_log=self.event_log,
            max_concurrent_calls=self.max_concurrent_calls,
        ).resolved(self._base_dir)

    def event_log_config(self) -> EventLogConfig | None:
        """The event log with its file's path resolved against the spec's folder."""
        return self.settings.event_log

    def checkpoint_dir(self, environ: Mapping[str, str] | None = None) -> Path:
        """Where checkpoints go: ``checkpointing.dir``, else the user's cache folder (never the
        spec's folder, nor the current one, which may be it: ``flink-agents submit`` ships the
        spec's folder to the cluster, checkpoints included)."""
        if self.checkpointing.dir:
            return self.resolve(self.checkpointing.dir).resolve()
        return user_cache_dir(environ) / "checkpoints" / self.name

    def output_paths(self) -> dict[str, Path]:
        """What the job writes on this machine, by setting: the checkpoint folder, the event
        log's file (``{subtask}`` left in) and a file sink's folder."""
        found = {"checkpointing.dir": self.checkpoint_dir()}
        log = self.event_log_config()
        if log is not None and log.path is not None:
            found["event_log.path"] = Path(log.path)
        if isinstance(self.sink, FileSinkSpec):
            found["sink.path"] = self.resolve(self.sink.path).resolve()
        if isinstance(self.dead_letter, FileSinkSpec):
            found["dead_letter.path"] = self.resolve(self.dead_letter.path).resolve()
        return found

    def flink_config(self) -> dict[str, str]:
        """Flink 2.x configuration for this job (the 1.x key names are deprecated)."""
        config = {
            "parallelism.default": str(self.parallelism),
            "pipeline.max-parallelism": str(self.max_parallelism),
            "python.execution-mode": self.execution_mode,
            **python_settings(),
            "execution.checkpointing.storage": "filesystem",
            "execution.checkpointing.dir": self.checkpoint_dir().as_uri(),
            "state.backend.type": "hashmap",
            # Small bundles: outputs leave the Python worker promptly (defaults are 100k / 1 s).
            # Process mode: one element per bundle, or a checkpoint misses the timers registered
            # in the bundle it flushes, and a restore loses those keys' inputs (see
            # docs/flink-runtime.md, "Pitfalls").
            "python.fn-execution.bundle.size": PROCESS_MODE_BUNDLE_SIZE
            if self.execution_mode == "process"
            else "100",
            "python.fn-execution.bundle.time": "100",
        }
        if self.checkpointing.enabled:
            config["execution.checkpointing.interval"] = f"{self.checkpointing.interval_ms} ms"
            config["execution.checkpointing.tolerable-failed-checkpoints"] = str(
                self.checkpointing.tolerable_failed_checkpoints
            )
        restart = self.restart_strategy
        config["restart-strategy.type"] = restart.type
        if restart.type == "fixed-delay":
            config["restart-strategy.fixed-delay.attempts"] = str(restart.attempts)
            config["restart-strategy.fixed-delay.delay"] = f"{restart.delay_ms} ms"
        elif restart.type == "exponential-delay":
            config["restart-strategy.exponential-delay.attempts-before-reset-backoff"] = str(
                restart.attempts
            )
            config["restart-strategy.exponential-delay.initial-backoff"] = f"{restart.delay_ms} ms"
        return config


def python_settings() -> dict[str, str]:
    """The Python a job's workers and client run: this interpreter (the venv with
    ``apache-flink`` and this package; else the workers run whatever ``python`` is on ``PATH``,
    without PyFlink), with its import roots on the workers' path (thread mode, pemja, does not
    see the venv otherwise: "No module named 'pemja'")."""
    return {
        "python.executable": sys.executable,
        "python.client.executable": sys.executable,
        "python.pythonpath": os.pathsep.join(_import_roots()),
    }


def _import_roots() -> list[str]:
    """site-packages and this package's root (an editable install lives outside site-packages)."""
    package_root = str(Path(__file__).resolve().parents[2])
    return [sysconfig.get_paths()["purelib"], package_root]


def _is_reference(agent: str) -> bool:
    return ":" in agent and not agent.endswith((".yaml", ".yml", ".json"))


def user_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The user's cache folder for flink-agents: ``$XDG_CACHE_HOME/flink-agents``, with
    ``~/.cache`` when that is unset or not absolute (the XDG base directory rules)."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CACHE_HOME", "")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".cache"
    return root / "flink-agents"


def load_job(path: str | Path) -> JobSpec:
    """Read and validate a job spec; raises ``YamlAgentError`` with file, line and field."""
    spec = load_yaml_model(path, JobSpec)
    spec._base_dir = Path(path).resolve().parent
    return spec
