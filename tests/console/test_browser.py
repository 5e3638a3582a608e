"""The console in a real headless chromium (selenium): each page of a local refunds run, a
search, a trace opened from the list, an approval clicked and one refused without the token.
Each page's screenshot goes to docs/console/."""

from __future__ import annotations

import json

import pytest

from flink_agents.console import build_app
from tests.console.conftest import Served, message_says, page_holds, screenshot
from tests.console.samples import FAILOVER_KEY, refunds_sample

# selenium is in the test extra; without it these are skipped like without chromium.
By = pytest.importorskip("selenium.webdriver.common.by").By

pytestmark = pytest.mark.browser

TOKEN = "browser-token"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    sample = refunds_sample(tmp_path_factory.mktemp("console-browser"))
    with Served(build_app(sample.sources(), TOKEN)) as server:
        yield server, sample


def test_runs_search_and_a_trace_opened_from_the_list(served, browser) -> None:
    server, _ = served
    browser.get(server.url + "/")
    assert browser.title.startswith("Runs")
    assert len(browser.find_elements(By.CSS_SELECTOR, "tr.run")) == 3
    screenshot(browser, "runs")
    browser.find_element(By.ID, "key").send_keys(FAILOVER_KEY)
    browser.find_element(By.ID, "search").click()
    page_holds(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "tr.run")) == 1, "one run")
    [row] = browser.find_elements(By.CSS_SELECTOR, "tr.run")
    assert "replayed" in row.text
    row.find_element(By.CSS_SELECTOR, "a.trace").click()
    page_holds(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "div.call"), "the trace")
    calls = browser.find_elements(By.CSS_SELECTOR, "div.call")
    assert [call.get_attribute("data-outcome") for call in calls] == ["live", "replayed"]
    assert len(browser.find_elements(By.CSS_SELECTOR, "section.execution")) == 2
    screenshot(browser, "trace")


def test_health_page_draws_its_charts(served, browser) -> None:
    server, _ = served
    browser.get(server.url + "/health")
    charts = browser.find_elements(By.CSS_SELECTOR, "svg.chart")
    assert len(charts) == 2 and all(chart.size["width"] > 100 for chart in charts)


def click_decision(browser, section, verdict: str, token: str) -> None:
    section.find_element(By.NAME, "by").send_keys("ann")
    if token:
        section.find_element(By.NAME, "token").send_keys(token)
    section.find_element(By.CSS_SELECTOR, f"button[value={verdict}]").click()


def test_an_approval_clicked_without_the_token_is_refused_and_with_it_written(
    served, browser
) -> None:
    server, sample = served
    browser.get(server.url + "/waits")  # its screenshot: the real job's (test_console_on_a_job)
    first = browser.find_elements(By.CSS_SELECTOR, "section.wait")[0]
    click_decision(browser, first, "approve", "")
    message_says(browser, "refused: a decision needs the console's token")
    assert not sample.decisions.exists()
    first = browser.find_elements(By.CSS_SELECTOR, "section.wait")[0]
    click_decision(browser, first, "approve", TOKEN)
    message_says(browser, "approve of wait")
    [record] = [json.loads(line) for line in sample.decisions.read_text().splitlines()]
    assert record["verdict"] == "approve" and record["by"] == "ann"
