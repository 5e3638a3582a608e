"""Job specs: validation with file:line errors, Flink 2.x settings, a mini-cluster run."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from flink_agents.durable.store import StoreConfig, kafka
from flink_agents.flink.job import load_job, user_cache_dir
from flink_agents.observability import EventLogConfig
from flink_agents.plan.yaml.loader import YamlAgentError
from flink_agents.runtime import OperatorOptions, RuntimeSettings

REPO = Path(__file__).resolve().parents[2]


def test_example_job_loads_and_compiles_its_agent() -> None:
    spec = load_job(REPO / "jobs" / "weather.yaml")
    assert spec.key == "city"
    assert spec.plan().name == "weather_react"
    config = spec.flink_config()
    assert config["execution.checkpointing.interval"] == "1000 ms"
    assert config["restart-strategy.type"] == "fixed-delay"
    assert config["execution.checkpointing.dir"].startswith("file:///")


def test_a_job_specs_runtime_keys_are_its_runtime_settings(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(
        "name: x\nagent: a.yaml\nsource: {kind: list, path: in.jsonl}\nkey: k\n"
        "operator: {max_in_flight: 7}\nstore: {kind: memory, mismatch_policy: warn}\n"
        "event_log: {path: logs/events.jsonl}\nmax_concurrent_calls: {conn: 2}\n"
    )
    spec = load_job(job)
    assert spec.settings == RuntimeSettings(
        operator=OperatorOptions(max_in_flight=7),
        store=StoreConfig(kind="memory", mismatch_policy="warn"),
        event_log=EventLogConfig(path=str(tmp_path.resolve() / "logs" / "events.jsonl")),
        max_concurrent_calls={"conn": 2},
    )
    assert load_job(REPO / "jobs" / "support_desk.yaml").settings.store is not None


def test_the_user_cache_folder_follows_xdg_cache_home_when_it_is_absolute() -> None:
    assert user_cache_dir({"XDG_CACHE_HOME": "/var/cache/me"}) == Path("/var/cache/me/flink-agents")
    home_cache = Path.home() / ".cache" / "flink-agents"
    assert user_cache_dir({"XDG_CACHE_HOME": "relative/cache"}) == home_cache  # ignored
    assert user_cache_dir({}) == home_cache


def test_a_bad_field_is_named_with_file_and_line(tmp_path: Path) -> None:
    job = tmp_path / "bad.yaml"
    job.write_text("name: x\nagent: a.yaml\nsource:\n  kind: list\nkey: k\nparallelism: zero\n")
    with pytest.raises(YamlAgentError) as error:
        load_job(job)
    message = str(error.value)
    assert f"{job}:6:" in message and "parallelism" in message
    assert "source.list.path" in message or "source.path" in message


def test_an_unknown_source_kind_is_rejected(tmp_path: Path) -> None:
    job = tmp_path / "bad.yaml"
    job.write_text("name: x\nagent: a.yaml\nsource:\n  kind: s3\nkey: k\n")
    with pytest.raises(YamlAgentError, match="source"):
        load_job(job)


def test_an_agents_file_given_as_a_job_spec_says_so_with_the_command_that_runs_it() -> None:
    agents = REPO / "examples" / "weather.yaml"
    with pytest.raises(YamlAgentError) as error:
        load_job(agents)
    assert str(error.value) == (
        f"{agents}:3:3: agents: this is an agents file, not a job spec: run its agent with "
        f"`flink-agents run --local {agents} --input IN.jsonl --key FIELD`, or name it in a job "
        f"spec (agent: {agents})"
    )


@pytest.mark.flink
def test_file_sink_job_runs_on_the_mini_cluster(tmp_path: Path, fresh_flink_env) -> None:
    from flink_agents.flink.job_runner import build

    out = tmp_path / "out"
    job = tmp_path / "job.yaml"
    job.write_text(
        f"name: weather-file\nagent: {REPO}/examples/weather.yaml\n"
        f"source: {{kind: list, path: {REPO}/jobs/data/cities.jsonl}}\n"
        f"key: city\nsink: {{kind: file, path: {out}}}\n"
    )
    build(load_job(job), fresh_flink_env)
    fresh_flink_env.execute("weather-file")

    lines = [
        json.loads(line)
        for part in out.rglob("*")
        if part.is_file()
        for line in part.read_text().splitlines()
    ]
    assert sorted((line["key"], line["seq"]) for line in lines) == sorted(
        [("Berlin", 0), ("Berlin", 1), ("Lisbon", 0), ("Lisbon", 1), ("Oslo", 0), ("Reykjavik", 0)]
    )
    assert all(line["output"]["city"] == line["key"] for line in lines)


@pytest.mark.flink
@pytest.mark.parametrize(
    ("dead_letter", "error_filters"), [("", 0), ("dead_letter: {kind: file, path: dead}\n", 1)]
)
def test_an_envelope_job_filters_its_error_records_only_for_a_dead_letter_sink(
    tmp_path: Path, fresh_flink_env, dead_letter: str, error_filters: int
) -> None:
    # Flink runs an operator no sink reads all the same, and a Python one costs each attempt
    # an embedded interpreter that pemja never wholly frees (docs/reliability.md).
    from flink_agents.flink.job_runner import build

    job = tmp_path / "job.yaml"
    job.write_text(
        f"name: weather\nagent: {REPO}/examples/weather.yaml\n"
        f"source: {{kind: list, path: {REPO}/jobs/data/cities.jsonl}}\nkey: city\n{dead_letter}"
    )
    build(load_job(job), fresh_flink_env)

    operators = [node["type"] for node in json.loads(fresh_flink_env.get_execution_plan())["nodes"]]
    assert sum("error records" in operator for operator in operators) == error_filters


def kafka_sink_job(tmp_path: Path, sink: str, extra: str = "") -> Path:
    job = tmp_path / "eos.yaml"
    job.write_text(
        "name: eos-job\nagent: a.yaml\nsource: {kind: list, path: in.jsonl}\nkey: k\n"
        f"sink: {{kind: kafka, topic: out{sink}}}\n{extra}"
    )
    return job


def test_the_kafka_sink_is_at_least_once_unless_exactly_once_is_asked(tmp_path: Path) -> None:
    spec = load_job(kafka_sink_job(tmp_path, ""))
    assert spec.sink.kind == "kafka" and spec.sink.delivery == "at-least-once"

    spec = load_job(kafka_sink_job(tmp_path, ", delivery: exactly-once"))
    assert spec.sink.kind == "kafka" and spec.sink.delivery == "exactly-once"
    assert spec.transactional_id_prefix() == "flink-agents-eos-job"  # stable across restarts
    spec = load_job(
        kafka_sink_job(tmp_path, ", delivery: exactly-once, transactional_id_prefix: mine")
    )
    assert spec.transactional_id_prefix() == "mine"


def test_tolerable_failed_checkpoints_reach_flink_and_must_not_be_negative(
    tmp_path: Path,
) -> None:
    # Unset: the first failed checkpoint fails the job over, as Flink's own default.
    config = load_job(kafka_sink_job(tmp_path, "")).flink_config()
    assert config["execution.checkpointing.tolerable-failed-checkpoints"] == "0"
    job = kafka_sink_job(tmp_path, "", "checkpointing: {tolerable_failed_checkpoints: 5}\n")
    config = load_job(job).flink_config()
    assert config["execution.checkpointing.tolerable-failed-checkpoints"] == "5"
    job = kafka_sink_job(tmp_path, "", "checkpointing: {tolerable_failed_checkpoints: -1}\n")
    with pytest.raises(YamlAgentError, match="tolerable_failed_checkpoints"):
        load_job(job)


def test_exactly_once_without_checkpointing_is_refused_with_the_reason(tmp_path: Path) -> None:
    job = kafka_sink_job(tmp_path, ", delivery: exactly-once", "checkpointing: {enabled: false}\n")
    with pytest.raises(YamlAgentError, match="exactly-once needs checkpointing: its transactions"):
        load_job(job)
    # At least once needs no checkpoint; the Flink settings then name no interval.
    spec = load_job(kafka_sink_job(tmp_path, "", "checkpointing: {enabled: false}\n"))
    assert "execution.checkpointing.interval" not in spec.flink_config()


def test_process_mode_is_refused_with_the_reason_unless_the_spec_accepts_its_cost(
    tmp_path: Path,
) -> None:
    job = tmp_path / "process.yaml"
    spec_text = "name: p\nagent: a.yaml\nsource: {kind: list, path: in.jsonl}\nkey: k\n"
    job.write_text(spec_text + "execution_mode: process\n")
    with pytest.raises(YamlAgentError) as error:
        load_job(job)
    message = str(error.value)
    assert "execution_mode: process is refused" in message
    assert "bundle per element" in message and "a fifth of thread mode" in message  # why
    assert "Use execution_mode: thread" in message  # what instead
    assert "accept_slow_process_mode: true" in message  # the explicit opt-in

    job.write_text(spec_text + "execution_mode: process\naccept_slow_process_mode: true\n")
    config = load_job(job).flink_config()
    assert config["python.execution-mode"] == "process"
    assert config["python.fn-execution.bundle.size"] == "1"  # the restore fix stays

    job.write_text(spec_text)
    config = load_job(job).flink_config()
    assert config["python.execution-mode"] == "thread"
    assert config["python.fn-execution.bundle.size"] == "100"


def test_a_transaction_timeout_must_outlive_a_checkpoint_and_fit_the_broker(
    tmp_path: Path,
) -> None:
    short = kafka_sink_job(
        tmp_path,
        ", delivery: exactly-once, transaction_timeout_ms: 5000",
        "checkpointing: {interval_ms: 5000}\n",
    )
    with pytest.raises(YamlAgentError, match=r"transaction_timeout_ms \(5000\) must exceed"):
        load_job(short)
    too_long = kafka_sink_job(tmp_path, ", delivery: exactly-once, transaction_timeout_ms: 900001")
    with pytest.raises(YamlAgentError, match="transaction_timeout_ms"):
        load_job(too_long)


@pytest.mark.flink
def test_the_python_api_refuses_exactly_once_on_an_environment_without_checkpoints(
    make_flink_env,
) -> None:
    from pyflink.common import Types

    from flink_agents.flink import AgentsExecutionEnvironment, ExactlyOnce

    def add_sink(env) -> None:
        stream = env.from_collection(["{}"], type_info=Types.STRING())
        AgentsExecutionEnvironment(env).to_kafka(
            stream, "out", bootstrap_servers="x:1", exactly_once=ExactlyOnce("test-prefix")
        )

    with pytest.raises(ValueError, match="needs checkpointing"):
        add_sink(make_flink_env())
    add_sink(make_flink_env(**{"execution.checkpointing.interval": "1000 ms"}))  # accepted


def test_max_parallelism_is_set_explicitly_and_bounds_the_parallelism(tmp_path: Path) -> None:
    spec = load_job(kafka_sink_job(tmp_path, ""))
    assert spec.flink_config()["pipeline.max-parallelism"] == "128"
    with pytest.raises(YamlAgentError, match="parallelism 5 is above max_parallelism 4"):
        load_job(kafka_sink_job(tmp_path, "", "parallelism: 5\nmax_parallelism: 4\n"))


def test_an_unknown_store_field_is_named_with_file_and_line(tmp_path: Path) -> None:
    job = tmp_path / "bad.yaml"
    job.write_text(
        "name: x\nagent: a.yaml\nsource: {kind: list, path: in.jsonl}\nkey: k\n"
        "store:\n  kind: kafka\n  bootstrap_servers: 127.0.0.1:9092\n  retention: 60000\n"
    )
    with pytest.raises(YamlAgentError) as error:
        load_job(job)
    assert f"{job}:8:" in str(error.value) and "store.retention: unknown field" in str(error.value)


def test_store_settings_out_of_librdkafka_range_are_refused(tmp_path: Path) -> None:
    job = tmp_path / "bad.yaml"
    job.write_text(
        "name: x\nagent: a.yaml\nsource: {kind: list, path: in.jsonl}\nkey: k\n"
        "store:\n  kind: kafka\n  bootstrap_servers: 127.0.0.1:9092\n  linger_ms: 900001\n"
        "  compression_type: brotli\n"
    )
    with pytest.raises(YamlAgentError) as error:
        load_job(job)
    message = str(error.value)
    assert f"{job}:8:" in message and "store.linger_ms" in message
    assert f"{job}:9:" in message and "store.compression_type" in message


@pytest.mark.kafka
def test_store_settings_of_a_job_spec_reach_the_producer_and_the_topic(
    tmp_path: Path, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    producer_configs: list[dict[str, object]] = []

    def recording_producer(config: dict[str, object]) -> Producer:
        producer_configs.append(config)
        return Producer(config)

    topic = f"test-job-store-{uuid.uuid4().hex[:12]}"
    job = tmp_path / "job.yaml"
    job.write_text(
        "name: x\nagent: a.yaml\nsource: {kind: list, path: in.jsonl}\nkey: k\n"
        f"store:\n  kind: kafka\n  bootstrap_servers: {kafka_bootstrap}\n  topic: {topic}\n"
        "  partitions: 2\n  retention_ms: 3600000\n  linger_ms: 20\n  compression_type: lz4\n"
    )
    spec = load_job(job)
    assert spec.store is not None
    monkeypatch.setattr(kafka, "Producer", recording_producer)
    store = spec.store.build()
    store.close()

    [producer_config] = producer_configs
    assert producer_config["linger.ms"] == 20
    assert producer_config["compression.type"] == "lz4"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    topic_config = admin.describe_configs([resource])[resource].result(timeout=30)
    assert topic_config["retention.ms"].value == "3600000"
    assert topic_config["cleanup.policy"].value == "compact,delete"


def test_a_job_with_an_output_schema_or_stages_is_typed_and_loads_every_stages_plan(
    tmp_path: Path,
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(
        "name: chain\nagent: tests.flink.review_pipeline:REVIEW_ANALYSIS\nkey: review_id\n"
        "then:\n  - {agent: tests.flink.review_pipeline:PRODUCT_NOTES, key: product}\n"
        "source: {kind: list, path: in.jsonl}\n"
        "dead_letter: {kind: file, path: dead}\n"
    )
    spec = load_job(job)
    assert spec.typed
    (stage,) = spec.then
    assert spec.stage_plan(stage.agent, stage.agent_name).name == "product_notes"
    assert spec.output_paths()["dead_letter.path"] == (tmp_path / "dead").resolve()
    job.write_text(
        "name: one\nagent: tests.flink.review_pipeline:REVIEW_ANALYSIS\nkey: review_id\n"
        "source: {kind: list, path: in.jsonl}\n"
        "dead_letter: {topic: errors}\n"
    )
    assert not load_job(job).typed  # envelopes, errors copied to the topic as before


def test_an_output_schema_that_is_not_json_schema_is_named_with_file_and_line(
    tmp_path: Path,
) -> None:
    job = tmp_path / "bad.yaml"
    job.write_text(
        "name: x\nagent: a.yaml\nkey: k\nsource: {kind: list, path: in.jsonl}\n"
        "then:\n  - agent: b.yaml\n    key: product\n    output_schema: {type: 7}\n"
    )
    with pytest.raises(YamlAgentError, match="not a JSON Schema") as error:
        load_job(job)
    assert f"{job}:8:" in str(error.value) and "output_schema" in str(error.value)


def test_the_product_suggestions_job_hands_its_summary_stage_lists_of_three() -> None:
    spec = load_job(REPO / "jobs" / "product_suggestions.yaml")
    assert [(stage.key, stage.every) for stage in spec.then] == [("product", 3), ("product", None)]
    assert [spec.stage_plan(s.agent, s.agent_name).name for s in spec.then] == [
        "product_summary",
        "product_suggestions",
    ]


def test_a_stage_that_aggregates_needs_at_least_one_answer_per_list(tmp_path: Path) -> None:
    job = tmp_path / "bad.yaml"
    job.write_text(
        "name: x\nagent: a.yaml\nkey: k\nsource: {kind: list, path: in.jsonl}\n"
        "then:\n  - agent: b.yaml\n    key: product\n    every: 0\n"
    )
    with pytest.raises(YamlAgentError, match="greater than or equal to 1") as error:
        load_job(job)
    assert f"{job}:8:" in str(error.value) and "every" in str(error.value)
