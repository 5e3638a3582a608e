"""The console's pages over a real event log and outputs (tests/console/samples.py), served
in-process by Starlette's test client; and the token a decision needs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from flink_agents.console import build_app
from flink_agents.runtime import run_local
from tests.console.samples import FAILOVER_KEY, Sample, refunds_sample

TOKEN = "console-token-for-tests"


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Sample:
    return refunds_sample(tmp_path_factory.mktemp("console"))


@pytest.fixture
def client(sample: Sample) -> TestClient:
    sample.decisions.unlink(missing_ok=True)
    return TestClient(build_app(sample.sources(), TOKEN))


def test_the_runs_page_lists_every_run_with_its_state(client: TestClient) -> None:
    page = client.get("/runs")
    assert page.status_code == 200
    assert page.text.count('<tr class="run">') == 3
    assert page.text.count('class="badge s-waiting">waiting') == 2
    assert 'class="badge s-finished">finished' in page.text
    assert 'class="badge replayed"' in page.text  # the failed-over run only
    assert page.text.count('class="badge replayed"') == 1


def test_runs_are_filtered_by_state_and_searched_by_key(client: TestClient) -> None:
    assert client.get("/runs", params={"state": "waiting"}).text.count('<tr class="run">') == 2
    replayed = client.get("/runs", params={"state": "replayed"}).text
    assert replayed.count('<tr class="run">') == 1 and FAILOVER_KEY in replayed
    found = client.get("/runs", params={"key": "o-2"}).text
    assert found.count('<tr class="run">') == 1 and "o-2" in found
    assert client.get("/runs", params={"key": "nope"}).text.count('<tr class="run">') == 0


def test_the_trace_shows_both_executions_and_marks_the_replayed_call(client: TestClient) -> None:
    page = client.get("/trace", params={"agent": "refunds", "key": f'"{FAILOVER_KEY}"', "seq": 0})
    assert page.status_code == 200
    assert 'id="execution-1"' in page.text and 'id="execution-2"' in page.text
    assert "cut off: no end record, executed again" in page.text
    outcomes = [part.split('"')[0] for part in page.text.split('data-outcome="')[1:]]
    assert outcomes == ["live", "replayed"]
    # The arguments are shown, the secret-named field is not.
    assert "sk-not-to-be-shown" not in page.text and "&lt;redacted&gt;" in page.text


def test_a_paused_run_s_trace_shows_its_model_call(client: TestClient) -> None:
    page = client.get("/trace", params={"agent": "refunds", "key": '"o-1"', "seq": 0})
    assert page.status_code == 200
    assert 'data-outcome="live"' in page.text and "scripted-1" in page.text
    assert (
        client.get("/trace", params={"agent": "refunds", "key": '"x"', "seq": 0}).status_code == 404
    )


def test_the_waiting_page_lists_each_open_wait_with_its_tool_and_arguments(
    client: TestClient, sample: Sample
) -> None:
    page = client.get("/waits").text
    for result in sample.paused:
        assert result.paused is not None
        assert result.paused.wait_id in page
    assert page.count("tool issue_refund") == 2
    assert "&#34;amount&#34;:2500" in page or '"amount":2500' in page


def decision_form(sample: Sample, verdict: str, **more: str) -> dict[str, str]:
    paused = sample.paused[0].paused
    assert paused is not None
    return {
        "wait_id": paused.wait_id,
        "key": '"o-1"',
        "tool": "issue_refund",
        "verdict": verdict,
        "by": "ann",
        **more,
    }


def test_a_decision_without_the_token_is_refused(client: TestClient, sample: Sample) -> None:
    for token in ({}, {"token": "wrong"}):
        answer = client.post("/waits/decide", data=decision_form(sample, "approve", **token))
        assert answer.status_code == 403
        assert "refused: a decision needs the console&#39;s token" in answer.text
    assert not sample.decisions.exists()


def test_a_console_without_a_token_decides_nothing(sample: Sample) -> None:
    client = TestClient(build_app(sample.sources()))
    assert "Deciding is off" in client.get("/waits").text
    answer = client.post("/waits/decide", data=decision_form(sample, "approve", token=""))
    assert answer.status_code == 403
    assert not sample.decisions.exists()


def test_an_approval_with_the_token_is_written_and_resumes_the_run(
    client: TestClient, sample: Sample
) -> None:
    answer = client.post(
        "/waits/decide", data=decision_form(sample, "approve", token=TOKEN), follow_redirects=False
    )
    assert answer.status_code == 303
    [record] = [json.loads(line) for line in sample.decisions.read_text().splitlines()]
    assert record["verdict"] == "approve" and record["by"] == "ann" and record["order"] == "o-1"
    from examples.refunds import build_agent
    from flink_agents.durable.store import StoreConfig
    from flink_agents.runtime import RuntimeSettings

    settings = RuntimeSettings(store=StoreConfig(kind="memory"))
    [result] = run_local(
        build_agent(), [{"order": "o-1"}], key="order", settings=settings, decisions=[record]
    )
    assert result.output_values == ["refunded 2500 on o-1"]


def test_an_edit_is_checked_against_the_tool_s_schema(client: TestClient, sample: Sample) -> None:
    bad = decision_form(sample, "edit", token=TOKEN, arguments='{"order": "o-1", "amount": "lots"}')
    answer = client.post("/waits/decide", data=bad)
    assert answer.status_code == 400
    assert "the arguments do not fit tool &#39;issue_refund&#39;" in answer.text
    assert not sample.decisions.exists()
    good = decision_form(sample, "edit", token=TOKEN, arguments='{"order": "o-1", "amount": 100}')
    assert client.post("/waits/decide", data=good).status_code == 200  # redirected to the list
    [record] = [json.loads(line) for line in sample.decisions.read_text().splitlines()]
    assert record["verdict"] == "edit" and record["arguments"] == {"order": "o-1", "amount": 100}


def test_a_rejection_carries_its_message(client: TestClient, sample: Sample) -> None:
    form = decision_form(sample, "reject", token=TOKEN, message="over the limit")
    assert client.post("/waits/decide", data=form).status_code == 200
    [record] = [json.loads(line) for line in sample.decisions.read_text().splitlines()]
    assert record["verdict"] == "reject" and record["message"] == "over the limit"


def test_the_health_page_draws_rates_from_the_event_log(client: TestClient) -> None:
    page = client.get("/health").text
    # The scripted model reports no tokens: no tokens chart.
    assert page.count('<svg class="chart"') == 2
    assert "runs/s" in page and "calls/s" in page and "tokens/s" not in page
    assert "No Flink REST API" in page


def test_the_health_page_says_when_flink_does_not_answer(sample: Sample) -> None:
    client = TestClient(build_app(sample.sources(flink_rest="http://127.0.0.1:9")))
    page = client.get("/health")
    assert page.status_code == 200 and "Flink&#39;s REST API at http://127.0.0.1:9" in page.text


def test_the_store_page_asks_for_a_store_when_none_is_given(client: TestClient) -> None:
    assert "No store: start the console with" in client.get("/store", params={"key": "o-1"}).text


def test_pages_say_which_option_gives_a_missing_source(tmp_path: Path) -> None:
    from flink_agents.console import ConsoleSources

    client = TestClient(build_app(ConsoleSources()))
    assert "No event log" in client.get("/runs").text
    assert "No job outputs" in client.get("/waits").text
