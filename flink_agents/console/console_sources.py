"""Where the console reads and writes: the event log, the store topic, Flink's REST API, the
job's outputs (its ``waiting`` records) and decisions input -- given one by one, or taken from a
job spec.

Every read goes through the reader the command line uses for the same thing (``trace``'s
:func:`~flink_agents.observability.parse_record` / ``read_topic``, ``store inspect``'s
:func:`~flink_agents.durable.store.inspect.open_store`, ``waits``'
:func:`~flink_agents.cli.wait_records_io.open_waits` and its topic reader); this module only
keeps the last answer so that a page does not read a whole log again when nothing was added.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flink_agents.observability import KafkaEventLogConfig, LogRecord, parse_record

if TYPE_CHECKING:
    from flink_agents.flink.job import JobSpec
    from flink_agents.plan import AgentPlan

TOPIC_REFRESH_S = 2.0
"""A topic is read again from its start at most this often (a page load in between reuses the
last read)."""
_SUBTASK = "{subtask}"


@dataclass(frozen=True)
class ConsoleSources:
    """What the console shows and where a decision goes; a missing one leaves its page saying
    which option gives it."""

    event_log: str | None = None
    """An event log file (``{subtask}`` in it: every subtask's file)."""
    event_log_topic: str | None = None
    store_topic: str | None = None
    bootstrap_servers: str = "127.0.0.1:9092"
    secret_env: str = "FLINK_AGENTS_STORE_SECRET"
    flink_rest: str | None = None
    outputs: str | None = None
    """The job's outputs: a JSON lines file, or a file sink's folder of part files."""
    outputs_topic: str | None = None
    decisions_topic: str | None = None
    decisions_file: str | None = None
    key_field: str | None = None
    """The job's key field: a decision record names its run's key under it."""
    agent: str | None = None
    """The agent (plan, YAML file or ``module:attr``): its tools' schemas check an edit."""
    agent_name: str | None = None

    @classmethod
    def from_job(
        cls, spec: JobSpec, default_servers: str = "127.0.0.1:9092", **given: Any
    ) -> ConsoleSources:
        """The sources a job spec names (its event log, Kafka store, sink and decisions
        input); ``given`` (options not None) override them; ``default_servers``: the Kafka brokers
        when the spec's store names none."""
        from flink_agents.flink.job import FileSinkSpec, KafkaSinkSpec, KafkaSourceSpec

        found: dict[str, Any] = {"key_field": spec.key, "agent_name": spec.agent_name}
        found["bootstrap_servers"] = default_servers
        found["agent"] = spec.agent if ":" in spec.agent else str(spec.resolve(spec.agent))
        log = spec.event_log_config()
        if log is not None:
            found["event_log"] = log.path
            if log.kafka is not None:
                found["event_log_topic"] = log.kafka.topic
        store = spec.store
        if store is not None and store.kind == "kafka":
            found["store_topic"] = store.topic
            found["secret_env"] = store.secret_env
            servers = store.bootstrap_servers
            if servers:
                found["bootstrap_servers"] = (
                    servers if isinstance(servers, str) else ",".join(servers)
                )
        if isinstance(spec.sink, FileSinkSpec):
            found["outputs"] = str(spec.resolve(spec.sink.path))
        elif isinstance(spec.sink, KafkaSinkSpec):
            found["outputs_topic"] = spec.sink.topic
        decisions = spec.decisions
        if isinstance(decisions, KafkaSourceSpec):
            found["decisions_topic"] = decisions.topic
        elif decisions is not None:
            found["decisions_file"] = str(spec.resolve(decisions.path))
        found.update({name: value for name, value in given.items() if value is not None})
        return cls(**found)

    def plan(self) -> AgentPlan | None:
        """The agent's plan, when the console was told the agent."""
        if self.agent is None:
            return None
        from flink_agents.plan.sources import load_plan

        return load_plan(self.agent, self.agent_name)


@dataclass
class _FileTail:
    offset: int = 0
    records: list[LogRecord] = field(default_factory=list)


class RecordFeed:
    """The event log's records, kept between page loads.

    A file is append-only: only what was added since the last load is parsed (the reader of
    ``flink-agents trace`` parses it). A topic is read again from its start, at most every
    :data:`TOPIC_REFRESH_S`.
    """

    def __init__(self, sources: ConsoleSources) -> None:
        self._sources = sources
        self._lock = threading.Lock()
        self._files: dict[Path, _FileTail] = {}
        self._topic: list[LogRecord] = []
        self._topic_read_at = -TOPIC_REFRESH_S
        self.version = 0
        """Grows whenever a load found new records: what was computed from them is stale."""

    @property
    def configured(self) -> bool:
        return self._sources.event_log is not None or self._sources.event_log_topic is not None

    def records(self) -> list[LogRecord]:
        """Every record of the event log's files (in file order), then of its topic."""
        with self._lock:
            found: list[LogRecord] = []
            for path in self._paths():
                found.extend(self._file_records(path))
            if self._sources.event_log_topic is not None:
                found.extend(self._topic_records())
            return found

    def _paths(self) -> list[Path]:
        pattern = self._sources.event_log
        if pattern is None:
            return []
        if _SUBTASK not in pattern:
            return [Path(pattern)]
        path = Path(pattern)
        return sorted(path.parent.glob(path.name.replace(_SUBTASK, "*")))

    def _file_records(self, path: Path) -> list[LogRecord]:
        tail = self._files.setdefault(path, _FileTail())
        size = path.stat().st_size if path.exists() else 0
        if size < tail.offset:  # the file was replaced: read it again
            tail.offset, tail.records = 0, []
        if size > tail.offset:
            with path.open("rb") as log:
                log.seek(tail.offset)
                added = log.read(size - tail.offset)
            complete = added[: added.rfind(b"\n") + 1]  # a line being written waits
            if complete:
                tail.records.extend(_parsed(complete, path))
                tail.offset += len(complete)
                self.version += 1
        return tail.records

    def _topic_records(self) -> list[LogRecord]:
        now = time.monotonic()
        if now - self._topic_read_at >= TOPIC_REFRESH_S:
            from flink_agents.observability.sinks.kafka_log import read_topic

            topic = self._sources.event_log_topic
            assert topic is not None
            config = KafkaEventLogConfig(
                topic=topic, bootstrap_servers=self._sources.bootstrap_servers
            )
            records = list(read_topic(config))
            if len(records) != len(self._topic):
                self.version += 1
            self._topic, self._topic_read_at = records, now
        return self._topic


def _parsed(lines: bytes, path: Path) -> Iterator[LogRecord]:
    """The records of whole lines of an event log file, parsed as ``trace`` parses them."""
    for line in lines.splitlines():
        if line.strip():
            yield parse_record(line, str(path))


def output_lines(sources: ConsoleSources) -> Iterator[str]:
    """The job's output records as JSON lines: of a file, of a file sink's folder (its part
    files in name order), or of the output topic (``waits list``'s reader)."""
    if sources.outputs_topic is not None:
        from flink_agents.cli.json_topic import read

        yield from read(sources.bootstrap_servers, sources.outputs_topic)
        return
    if sources.outputs is None:
        return
    place = Path(sources.outputs)
    files = sorted(p for p in place.rglob("*") if p.is_file()) if place.is_dir() else [place]
    for path in files:
        with path.open(encoding="utf-8", errors="replace") as lines:
            yield from lines
