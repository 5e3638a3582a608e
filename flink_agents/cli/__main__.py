"""``python -m flink_agents.cli``: the ``flink-agents`` command."""

import sys

from flink_agents.cli import main

sys.exit(main())
