"""The PyFlink adapter: a keyed operator that runs the engine, and the execution environment.

This is the only package that imports pyflink; the engine below it knows nothing of Flink.
"""

from flink_agents.flink.environment import AgentsExecutionEnvironment, ExactlyOnce
from flink_agents.runtime.options import OperatorOptions

__all__ = ["AgentsExecutionEnvironment", "ExactlyOnce", "OperatorOptions"]
