"""Shared fixtures: the real Kafka broker and the real Flink cluster.

Integration tests reach Kafka and Flink only through these fixtures. When a service is not
reachable the test *fails* with the command that starts it; nothing is skipped silently.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.durable.helpers import PROBE

REPO = Path(__file__).resolve().parents[1]

# Kafka stores refuse to start without a signing secret: the tests, the Python workers of the
# mini-cluster (they inherit this environment) and the standalone cluster started by
# scripts/flink-cluster.sh share the checkout's development secret unless one is given.
if not os.environ.get("FLINK_AGENTS_STORE_SECRET"):
    os.environ["FLINK_AGENTS_STORE_SECRET"] = subprocess.run(
        ["bash", str(REPO / "scripts" / "store-secret.sh")],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def _reachable(host: str, port: int, timeout: float = 2.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def kafka_bootstrap() -> str:
    """`host:port` of the running broker: FLINK_AGENTS_KAFKA, else 127.0.0.1:$KAFKA_PORT (9092)."""
    bootstrap = os.environ.get(
        "FLINK_AGENTS_KAFKA", f"127.0.0.1:{os.environ.get('KAFKA_PORT', '9092')}"
    )
    host, _, port = bootstrap.rpartition(":")
    if not _reachable(host, int(port)):
        pytest.fail(
            f"Kafka broker not reachable at {bootstrap}. Start it with `scripts/kafka.sh start` "
            f"(or `make kafka-start`); set FLINK_AGENTS_KAFKA to use another broker.",
            pytrace=False,
        )
    return bootstrap


@dataclass(frozen=True)
class FlinkCluster:
    """The standalone cluster started by scripts/flink-cluster.sh."""

    rest_url: str
    env: dict[str, str]

    @property
    def flink_bin(self) -> str:
        return str(Path(self.env["FLINK_HOME"]) / "bin" / "flink")

    def get(self, path: str) -> dict:
        with urllib.request.urlopen(self.rest_url + path, timeout=10) as response:
            return json.load(response)


def submitted_job_id(done: subprocess.CompletedProcess[str]) -> str:
    """The id of the job a ``flink run`` (or ``flink-agents submit``) that succeeded printed."""
    assert done.returncode == 0, done.stdout + done.stderr
    found = re.search(r"JobID ([0-9a-f]{32})", done.stdout)
    assert found, done.stdout
    return found.group(1)


@pytest.fixture(scope="session")
def flink_cluster() -> FlinkCluster:
    """The standalone Flink cluster (REST port FLINK_REST_PORT, default 8081)."""
    port = int(os.environ.get("FLINK_REST_PORT", "8081"))
    script = REPO / "scripts" / "flink-cluster.sh"
    if not _reachable("127.0.0.1", port):
        pytest.fail(
            f"Flink standalone cluster not reachable on 127.0.0.1:{port}. Start it with "
            f"`scripts/flink-cluster.sh start` (or `make flink-start`).",
            pytrace=False,
        )
    exported = subprocess.run(
        ["bash", str(script), "env"], check=True, capture_output=True, text=True
    ).stdout
    # Not PyFlink's loopback marker (PYFLINK_GATEWAY_DISABLED), set in this process once Python
    # functions ran here: `flink run` would inherit it.
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYFLINK_")}
    for assignment in exported.removeprefix("export ").split():
        name, _, value = assignment.partition("=")
        env[name] = value
    return FlinkCluster(rest_url=f"http://127.0.0.1:{port}", env=env)


@pytest.fixture(scope="session")
def flink_env(tmp_path_factory):
    """One local mini-cluster StreamExecutionEnvironment shared by the session's tests.

    Starting the JVM costs ~10 s; later jobs in the same process start in ~2 s.
    """
    try:
        from pyflink.common import Configuration
        from pyflink.datastream import StreamExecutionEnvironment
    except ImportError as exc:  # pragma: no cover - the package is a hard dependency
        pytest.fail(f"pyflink is not importable ({exc}); run `make install`.", pytrace=False)
    tmp = tmp_path_factory.mktemp("flink-tmp")
    os.environ.setdefault("JVM_ARGS", f"-Djava.io.tmpdir={tmp}")
    config = Configuration()
    # Python workers must use this interpreter (the venv), not whatever `python` is on PATH.
    config.set_string("python.executable", sys.executable)
    config.set_string("python.client.executable", sys.executable)
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(1)
    return env


@pytest.fixture(scope="session")
def support_desk(flink_env, kafka_bootstrap: str, tmp_path_factory):
    """One run of the example job (jobs/support_desk.yaml) on the mini-cluster with the
    Kafka store, the event log and an injected failover, shared by the tests that read what it
    left: tests/flink/test_support_desk_observed.py and the console's
    (tests/console/test_console_on_a_job.py). About a minute and a half."""
    from tests.flink.support_desk_run import run_until_replayed  # loads PyFlink: only here

    return run_until_replayed(kafka_bootstrap, tmp_path_factory)


@pytest.fixture
def fresh_probe() -> Iterator[None]:
    """The shared probe of tests/durable/helpers.py, emptied before and after the test."""
    PROBE.reset()
    yield
    PROBE.reset()


# Property-based tests (hypothesis): seeded and bounded, so `make test` runs the same examples
# every time in seconds. HYPOTHESIS_PROFILE=thorough draws many more (and new) examples.
settings.register_profile(
    "default",
    derandomize=True,
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)
settings.register_profile(
    "thorough", max_examples=2000, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


CHROMA_SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "chroma.sh"


def _chroma(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CHROMA_SCRIPT), command], env=env, capture_output=True, text=True, timeout=90
    )


@pytest.fixture(scope="session")
def chroma_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Chroma server on CHROMA_PORT (default 8000): the running one, or one started here (with
    its data in a temporary folder) and stopped afterwards."""
    port = os.environ.get("CHROMA_PORT", "8000")
    env = {
        **os.environ,
        "CHROMA_PORT": port,
        "CHROMA_BIN": str(Path(sys.executable).parent / "chroma"),
        "CHROMA_DATA_DIR": str(tmp_path_factory.mktemp("chroma-data")),
    }
    started = _chroma("status", env).returncode != 0
    if started:
        done = _chroma("start", env)
        assert done.returncode == 0, done.stderr
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        if started:
            _chroma("stop", env)
