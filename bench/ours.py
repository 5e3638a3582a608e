"""Our keyed agent operator as a benchmark pipeline."""

from __future__ import annotations

from pyflink.datastream import DataStream, StreamExecutionEnvironment

from bench.flink_job import Pipeline
from bench.workloads import WORKLOADS
from flink_agents.durable.store.store_config import StoreConfig
from flink_agents.flink import AgentsExecutionEnvironment, OperatorOptions


def agent_pipeline(
    workload: str, latency: float, max_in_flight: int, store: StoreConfig | None = None
) -> Pipeline:
    """Inputs keyed by ``k`` through ``workload``'s agent on the keyed operator."""

    def build(env: StreamExecutionEnvironment, stamped: DataStream) -> DataStream:
        agents = AgentsExecutionEnvironment(
            env, options=OperatorOptions(max_in_flight=max_in_flight), store=store
        )
        agent = WORKLOADS[workload](latency)
        return agents.from_datastream(stamped, key="k").apply(agent).to_datastream()

    return build
