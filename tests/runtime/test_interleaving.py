import subprocess
import sys
from pathlib import Path

from flink_agents.providers.scripted import ScriptedChatModelConnection
from flink_agents.runtime import run_local
from tests.sample_agents import react_agent

ANSWER = [{"content": '{"city": "$input", "total": 1}'}]


def test_fifty_keys_interleave_on_one_loop():
    ScriptedChatModelConnection.reset_stats("interleave")
    agent = react_agent(ANSWER, latency=0.05, name="interleave")
    results = run_local(agent, [{"id": i, "city": f"c{i}"} for i in range(50)], key="id")
    stats = ScriptedChatModelConnection.stats("interleave")
    assert stats.total == 50
    assert stats.max_in_flight > 1
    assert stats.in_flight == 0
    assert [r.output_values for r in results] == [
        [{"city": f"c{i}", "total": 1}] for i in range(50)
    ]


def test_in_flight_window_bounds_concurrent_runs():
    ScriptedChatModelConnection.reset_stats("window")
    agent = react_agent(ANSWER, latency=0.01, name="window")
    run_local(agent, [{"id": i, "city": f"c{i}"} for i in range(20)], key="id", max_in_flight=3)
    stats = ScriptedChatModelConnection.stats("window")
    assert stats.total == 20
    assert 1 < stats.max_in_flight <= 3


def test_one_key_never_runs_twice_at_once():
    ScriptedChatModelConnection.reset_stats("one-key")
    agent = react_agent(ANSWER, latency=0.01, name="one-key")
    results = run_local(agent, [{"id": "same", "city": "c"} for _ in range(5)], key="id")
    assert ScriptedChatModelConnection.stats("one-key").max_in_flight == 1
    assert [r.run_id.seq for r in results] == [0, 1, 2, 3, 4]


def test_engine_plan_and_api_import_no_pyflink():
    code = (
        "import flink_agents.runtime, flink_agents.plan, flink_agents.api; import sys; "
        "assert not any(m.startswith('pyflink') for m in sys.modules)"
    )
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
