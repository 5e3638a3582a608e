"""The e2e tests use the same service fixtures as tests/: the real broker and the real cluster.

tests/conftest.py only applies below tests/, so its fixtures are imported here (pytest picks up
fixture functions found in a conftest's namespace). Nothing is redefined: a service that is not
reachable still fails the test with the command that starts it.
"""

from tests.conftest import flink_cluster, kafka_bootstrap

__all__ = ["flink_cluster", "kafka_bootstrap"]
