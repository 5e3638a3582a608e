"""The console in a headless chromium against real jobs on the mini-cluster, with the Kafka
store and the event log:

- the support desk (jobs/support_desk.yaml) after an injected failover: the trace page
  of each ticket shows every call ``flink-agents trace`` shows, the replayed ones marked;
- the refunds agent (examples/refunds.py) paused for approval: an approval without the token is
  refused, one clicked with it reaches the waiting run through the decisions topic, and the run
  finishes.
"""

from __future__ import annotations

import json
import re
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from pyflink.common import Configuration, Types
from pyflink.datastream import MapFunction, StreamExecutionEnvironment

from examples.refunds import build_agent
from flink_agents.console import ConsoleSources, build_app
from flink_agents.durable.store import StoreConfig
from flink_agents.flink import AgentsExecutionEnvironment
from flink_agents.flink.job_status import free_local_port, local_rest_settings, local_rest_url
from flink_agents.observability import EventLogConfig
from flink_agents.runtime import RuntimeSettings
from tests.console.conftest import Served, message_says, screenshot
from tests.flink.conftest import filesystem_checkpoints
from tests.flink.support_desk_run import SupportDeskRun
from tests.flink.test_support_desk_observed import flink_agents, parse_trace

# selenium is in the test extra; without it these are skipped like without chromium.
By = pytest.importorskip("selenium.webdriver.common.by").By

pytestmark = [pytest.mark.flink, pytest.mark.kafka, pytest.mark.browser]

TOKEN = "job-token"


def test_the_trace_page_shows_every_call_of_a_ticket_as_flink_agents_trace_does(
    support_desk: SupportDeskRun, kafka_bootstrap: str, browser: Any
) -> None:
    shown = flink_agents("trace", str(support_desk.event_log))
    runs, calls = parse_trace(shown.stdout)
    replayed = {call.run for call in calls if call.outcome == "replayed"}
    assert replayed, "the failover replayed no call"
    sources = ConsoleSources(
        event_log=str(support_desk.event_log),
        store_topic=support_desk.store_topic,
        bootstrap_servers=kafka_bootstrap,
    )
    with Served(build_app(sources)) as server:
        browser.get(server.url + "/runs?state=replayed")
        listed = browser.find_elements(By.CSS_SELECTOR, "tr.run")
        assert len(listed) >= 1
        screenshot(browser, "runs-after-failover")
        checked = sorted({(run.key, run.seq) for run in runs})
        for key, seq in checked:
            browser.get(f"{server.url}/trace?agent=support_desk&key={key}&seq={seq}")
            on_page = [
                (
                    int(column.get_attribute("id").rpartition("-")[2]),
                    div.get_attribute("data-call"),
                    div.get_attribute("data-outcome"),
                )
                for column in browser.find_elements(By.CSS_SELECTOR, "section.execution")
                for div in column.find_elements(By.CSS_SELECTOR, "div.call")
            ]
            in_trace = [
                (call.run.execution, call.place[4], call.outcome)
                for call in calls
                if (call.run.key, call.run.seq) == (key, seq)
            ]
            assert on_page == in_trace, (key, seq)
        last = max(replayed, key=lambda run: run.execution)
        key, seq = last.key, last.seq
        browser.get(f"{server.url}/trace?agent=support_desk&key={key}&seq={seq}")
        screenshot(browser, "trace-after-failover")
        customer = json.loads(key)
        browser.get(f"{server.url}/store?key={customer}")
        assert browser.find_elements(By.CSS_SELECTOR, "tr.state")
        screenshot(browser, "store")
        browser.get(server.url + "/health")
        assert len(browser.find_elements(By.CSS_SELECTOR, "svg.chart")) == 3


class AppendLine(MapFunction):
    """Appends each record (a JSON line) to a file, and passes it on."""

    def __init__(self, path: str) -> None:
        self.path = path

    def map(self, value: str) -> str:
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(value + "\n")
        return value


def _checkpointed(browser: Any) -> bool:
    """Whether the health page, loaded again, shows a completed checkpoint of the job."""
    browser.refresh()
    row = browser.find_element(By.CSS_SELECTOR, "tr.job").text
    return re.search(r"\b[1-9][0-9]* completed", row) is not None


def _topic(bootstrap: str, name: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, 1, 1)]).values():
        future.result(10)
    return name


def _wait_for(check: Any, what: str, timeout_s: float = 90) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.25)
    raise AssertionError(f"{what}: not within {timeout_s:g} s")


def test_an_approval_clicked_on_the_page_resumes_the_waiting_run_which_finishes(
    flink_env: Any, kafka_bootstrap: str, browser: Any, tmp_path: Path
) -> None:
    run_id = uuid.uuid4().hex[:12]
    decisions = _topic(kafka_bootstrap, f"test-console-decisions-{run_id}")
    event_log, outputs = tmp_path / "events.jsonl", tmp_path / "outputs.jsonl"
    settings = RuntimeSettings(
        store=StoreConfig(
            kind="kafka", bootstrap_servers=kafka_bootstrap, topic=f"test-console-store-{run_id}"
        ),
        event_log=EventLogConfig(path=str(event_log)),
    )
    # An environment of its own: its REST API on a port the console is told, checkpoints on.
    port = free_local_port()
    config = Configuration()
    for name, value in {
        **local_rest_settings(port),
        **filesystem_checkpoints(tmp_path / "checkpoints", "1 s"),
        "python.executable": sys.executable,
        "python.client.executable": sys.executable,
    }.items():
        config.set_string(name, value)
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(1)
    agents = AgentsExecutionEnvironment(env, settings=settings)
    job_input = agents.from_list([{"order": "o-1"}], key="order").with_decisions(
        agents.from_kafka(decisions, bootstrap_servers=kafka_bootstrap, key="order")
    )
    stream = job_input.apply(build_agent()).to_datastream()
    # Each output line is appended to the file the console reads, as a file sink would.
    stream.map(AppendLine(str(outputs)), output_type=Types.STRING()).print()
    job = env.execute_async("console-refunds")
    sources = ConsoleSources(
        event_log=str(event_log),
        outputs=str(outputs),
        decisions_topic=decisions,
        bootstrap_servers=kafka_bootstrap,
        flink_rest=local_rest_url(port),
        key_field="order",
        agent="examples.refunds:build_agent",
    )
    with Served(build_app(sources, TOKEN)) as server:
        _wait_for(lambda: outputs.exists() and "waiting" in outputs.read_text(), "the wait")
        browser.get(server.url + "/waits")
        [wait] = browser.find_elements(By.CSS_SELECTOR, "section.wait")
        assert "tool issue_refund" in wait.text
        screenshot(browser, "waits")
        wait.find_element(By.NAME, "by").send_keys("ann")
        wait.find_element(By.CSS_SELECTOR, "button[value=approve]").click()
        message_says(browser, "needs the console's token")
        [wait] = browser.find_elements(By.CSS_SELECTOR, "section.wait")
        wait.find_element(By.NAME, "by").send_keys("ann")
        wait.find_element(By.NAME, "token").send_keys(TOKEN)
        wait.find_element(By.CSS_SELECTOR, "button[value=approve]").click()
        message_says(browser, "approve of wait")
        try:
            _wait_for(lambda: '"output"' in outputs.read_text(), "the run's answer")
            browser.get(server.url + "/health")
            assert len(browser.find_elements(By.CSS_SELECTOR, "svg.chart")) == 2  # no tokens
            [flink_job] = browser.find_elements(By.CSS_SELECTOR, "tr.job")
            assert "console-refunds" in flink_job.text and "RUNNING" in flink_job.text
            _wait_for(lambda: _checkpointed(browser), "a completed checkpoint on the page")
            screenshot(browser, "health")
        finally:
            job.cancel().result()
        [_, answer] = [json.loads(line) for line in outputs.read_text().splitlines()]
        assert answer["output"] == "refunded 2500 on o-1"
        browser.get(server.url + "/runs")
        assert "finished" in browser.find_element(By.CSS_SELECTOR, "tr.run").text
        browser.get(server.url + "/waits")
        assert not browser.find_elements(By.CSS_SELECTOR, "section.wait")
