"""Run workload (1) on Apache flink-agents 0.2.0 for a list of settings; print JSON lines.

Started by ``bench/peer.py`` with the peer's own interpreter (``.cache/peers/...``), never with
the project's venv: both packages are called ``flink_agents``. The project root goes to the
*end* of ``sys.path`` so that ``bench.flink_job`` (framework-free) is found while
``flink_agents`` stays the installed peer.

    python fa_peer_run.py '[{"latency": 0.05, "keys": 100, "inputs": 500, "threads": 0}]'
"""

from __future__ import annotations

import json
import os
import site
import sys
from pathlib import Path

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


def pipeline(latency: float, threads: int):
    """The peer's documented DataStream integration; ``threads`` 0 keeps its default pool."""

    def build(env: StreamExecutionEnvironment, stamped: DataStream) -> DataStream:
        agents = AgentsExecutionEnvironment.get_execution_environment(env)
        if threads:
            agents.get_config().set(AgentExecutionOptions.NUM_ASYNC_THREADS, threads)
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


def configure(work: Path) -> dict[str, str]:
    return {
        "python.executable": sys.executable,
        "python.client.executable": sys.executable,
        "execution.checkpointing.interval": "1000 ms",
        "execution.checkpointing.dir": (work / "ckpt").as_uri(),
        "restart-strategy.type": "none",
        "python.execution-mode": "thread",
        # Thread mode's interpreter sees only this path; the repo last, so flink_agents is the peer.
        "python.pythonpath": os.pathsep.join([*site.getsitepackages(), str(HERE), str(REPO)]),
    }


def main() -> None:
    for case in json.loads(sys.argv[1]):
        output = run_job(
            "peer-flink-agents",
            pipeline(case["latency"], case["threads"]),
            inputs=case["inputs"],
            keys=case["keys"],
            configure=configure,
        )
        stats = output.stats()
        print(json.dumps({**case, **stats.__dict__, "wall_s": output.wall_s}), flush=True)


if __name__ == "__main__":
    main()
