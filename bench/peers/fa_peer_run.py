"""Run workload (1) on Apache flink-agents for a list of settings; print JSON lines.

Started by ``bench/peer.py`` with the peer's own interpreter (``.cache/peers/...``), never with
the project's venv: both packages are called ``flink_agents``. The project root goes to the
*end* of ``sys.path`` so that ``bench.flink_job`` (framework-free) is found while
``flink_agents`` stays the installed peer.

    python fa_peer_run.py '[{"latency": 0.05, "keys": 100, "inputs": 500, "threads": 0}]'

A case with ``"store": {"bootstrap": ..., "topic": ..., "partitions": ...}`` runs with the
peer's Kafka action-state store on (``actionStateStoreBackend: kafka``): the peer then writes
each action's state to that topic (and flushes the producer) before going on.
"""

from __future__ import annotations

import json
import os
import site
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.append(str(REPO))

from fa_peer_agent import OneCallAgent, connection  # noqa: E402
from flink_agents.api.core_options import AgentExecutionOptions  # noqa: E402
from flink_agents.api.execution_environment import AgentsExecutionEnvironment  # noqa: E402
from flink_agents.api.resource import ResourceType  # noqa: E402
from pyflink.common import Types  # noqa: E402
from pyflink.datastream import DataStream, StreamExecutionEnvironment  # noqa: E402

from bench.flink_job import run_job  # noqa: E402

# The peer's option keys (its Java AgentConfigOptions; 0.2.0 has no Python constants for them).
STORE_OPTIONS = {
    "backend": "actionStateStoreBackend",
    "bootstrap": "kafkaBootstrapServers",
    "topic": "kafkaActionStateTopic",
    "partitions": "kafkaActionStateTopicNumPartitions",
}


def pipeline(latency: float, threads: int, store: dict[str, Any] | None):
    """The peer's documented DataStream integration; ``threads`` 0 keeps its default pool,
    ``store`` None keeps its action-state store off (its default)."""

    def build(env: StreamExecutionEnvironment, stamped: DataStream) -> DataStream:
        agents = AgentsExecutionEnvironment.get_execution_environment(env)
        config = agents.get_config()
        if threads:
            config.set(AgentExecutionOptions.NUM_ASYNC_THREADS, threads)
        if store:
            config.set_str(STORE_OPTIONS["backend"], "kafka")
            config.set_str(STORE_OPTIONS["bootstrap"], store["bootstrap"])
            config.set_str(STORE_OPTIONS["topic"], store["topic"])
            config.set_int(STORE_OPTIONS["partitions"], store["partitions"])
        agents.add_resource("sleeping", ResourceType.CHAT_MODEL_CONNECTION, connection(latency))
        # The peer's operator takes pickled Python records, not Flink strings: re-type the input.
        records = stamped.map(lambda text: text)
        outputs = (
            agents.from_datastream(input=records, key_selector=lambda text: json.loads(text)["k"])
            .apply(OneCallAgent())
            .to_datastream()
        )
        return outputs.map(str, output_type=Types.STRING())

    return build


def configure(store: bool):
    """The job's Flink configuration, with a few restarts when the peer's store is on.

    Why restarts: the peer's Kafka store lists the broker's topics when it opens and gives that
    100 ms; a cold JVM (the admin client's first connection) often takes longer, so the first
    attempt fails before any input is read, and a restart in the warm JVM opens it.
    """
    restarts = (
        {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "5",
         "restart-strategy.fixed-delay.delay": "500 ms"}
        if store else {"restart-strategy.type": "none"}
    )  # fmt: skip

    def flink_config(work: Path) -> dict[str, str]:
        return {
            "python.executable": sys.executable,
            "python.client.executable": sys.executable,
            "execution.checkpointing.interval": "1000 ms",
            "execution.checkpointing.dir": (work / "ckpt").as_uri(),
            **restarts,
            "python.execution-mode": "thread",
            # Thread mode's interpreter sees only this path; the repo last, so flink_agents is
            # the peer.
            "python.pythonpath": os.pathsep.join([*site.getsitepackages(), str(HERE), str(REPO)]),
        }

    return flink_config


def main() -> None:
    for case in json.loads(sys.argv[1]):
        output = run_job(
            "peer-flink-agents",
            pipeline(case["latency"], case["threads"], case.get("store")),
            inputs=case["inputs"],
            keys=case["keys"],
            configure=configure(bool(case.get("store"))),
        )
        stats = output.stats()
        print(json.dumps({**case, **stats.__dict__, "wall_s": output.wall_s}), flush=True)


if __name__ == "__main__":
    main()
