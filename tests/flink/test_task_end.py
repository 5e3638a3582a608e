"""An engine does not outlive its task: after a cancel or a stop with a savepoint, no more calls.

PyFlink's thread mode does not call the function's ``close()`` when its task ends. Before the
engine watched its task's thread (``flink/operator.py: TaskThread``), the engine of a stopped job
went on running the task's runs: 76 model calls were measured after a stop with a savepoint
(docs/budgets.md). Here six keys each run a chain of slow HTTP calls in thread mode; the job is
stopped while they are in flight, and the witness server must then hear nothing more once the
calls already sent have been answered.
"""

from __future__ import annotations

import _thread
import gc
import os
import sys
import threading
import time
import urllib.request
import uuid
import weakref
from pathlib import Path
from typing import Any

import pytest
from pyflink.java_gateway import get_gateway

from flink_agents.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents.flink import AgentsExecutionEnvironment
from flink_agents.flink.job import python_settings
from flink_agents.flink.operator import (
    TaskThread,
    forget_ended_foreign_threads,
    forget_stale_import_paths,
    freeze_what_lives,
)
from tests.flink.conftest import produce_json, stop_with_savepoint
from tests.providers.fake_servers import FakeModelServer, ScriptedResponse

KEYS = 6
CALLS_PER_RUN = 40
CALL_S = 0.15
"""How long the witness takes to answer: a run lasts CALLS_PER_RUN x CALL_S = 6 s."""
SETTLE_S = 3.0
"""After the cancel or stop returned: long enough for the tasks to end and for the calls sent
before to be answered."""
WATCH_S = 4.0
"""How long the witness must then stay silent: an engine left running sends ~6 calls/s/key."""


def post(url: str, n: int) -> int:
    """One call to the witness (a durable call's function, run in the TaskManager)."""
    request = urllib.request.Request(url, data=str(n).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()
    return n


@action(InputEvent)
async def call_on(event: InputEvent, ctx: RunnerContext) -> None:
    """A chain of calls: each one a durable call, so an orphan engine would go on with them."""
    for n in range(CALLS_PER_RUN):
        await ctx.durable_execute_async(post, event.input["url"], n)
    ctx.send_event(OutputEvent(output=CALLS_PER_RUN))


def _agent() -> Agent:
    agent = Agent(name="task_end")
    agent.add_action(call_on)
    return agent


def _ends(thread: TaskThread) -> bool:
    """Whether ``thread`` is seen gone within a few seconds (a joined thread's OS thread may
    outlive the join by a moment; the fence's watchdog asks again and again too)."""
    deadline = time.monotonic() + 5
    while thread.alive():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_a_task_thread_is_alive_until_it_ends() -> None:
    noted: list[TaskThread] = []
    release = threading.Event()

    def task() -> None:
        noted.append(TaskThread())
        release.wait()

    thread = threading.Thread(target=task)
    thread.start()
    while not noted:
        time.sleep(0.01)
    assert noted[0].alive()
    release.set()
    thread.join()
    assert _ends(noted[0])


def test_a_task_thread_follows_the_thread_that_calls_it() -> None:
    watched = TaskThread()
    helper = threading.Thread(target=watched.note)
    helper.start()
    helper.join()
    assert _ends(watched)  # noted on the helper, which ended
    watched.note()
    assert watched.alive()


class _Cycle:
    """An object in a reference cycle: only the collector frees it."""

    def __init__(self) -> None:
        self.me = self


def test_opening_again_lets_go_of_what_an_ended_attempt_left_in_cycles() -> None:
    # Thread mode opens the function again in the same interpreter at every restart: what the
    # earlier attempt froze, then dropped, must be collected, not frozen for good.
    try:
        freeze_what_lives()
        engine = _Cycle()
        freeze_what_lives()  # the attempt that holds it opens: it is frozen
        ended = weakref.ref(engine)
        del engine  # the attempt ended
        gc.collect()
        assert ended() is not None  # frozen: the collector does not see it
        freeze_what_lives()  # the next attempt opens
        assert ended() is None
    finally:
        gc.unfreeze()


def test_opening_again_forgets_the_ended_foreign_threads_python_registered() -> None:
    # Each attempt's task thread is a JVM thread Python did not start: asking for the current
    # thread there (a log line does) registers it with `threading` for good (before 3.13).
    def foreign(seen: list[threading.Thread], done: threading.Event) -> None:
        seen.append(threading.current_thread())
        done.wait(10)

    ended: list[threading.Thread] = []
    living: list[threading.Thread] = []
    first, second = threading.Event(), threading.Event()
    first.set()  # the first one ends at once
    _thread.start_new_thread(foreign, (ended, first))
    _thread.start_new_thread(foreign, (living, second))
    deadline = time.monotonic() + 10
    while not (ended and living) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # the first has returned
    if sys.version_info < (3, 13):  # 3.13 removes such an entry when its thread ends
        assert ended[0] in threading.enumerate()  # registered, and left there
    try:
        forget_ended_foreign_threads()
        assert ended[0] not in threading.enumerate()
        assert living[0] in threading.enumerate()  # still running: kept
    finally:
        second.set()


def test_opening_again_drops_the_import_paths_ended_attempts_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pemja inserts the job's paths at the front for every operator it opens, and never takes
    # them out: repeats, and folders of ended attempts that Flink has deleted.
    files, site = tmp_path / "attempt-2", tmp_path / "site"
    files.mkdir()
    site.mkdir()
    deleted = str(tmp_path / "attempt-1")
    paths = [str(files), str(site), "", str(files), deleted, str(site), deleted, "relative"]
    monkeypatch.setattr(sys, "path", paths)
    monkeypatch.setattr(sys, "path_importer_cache", {deleted: None, str(site): None})

    assert forget_stale_import_paths() == 4
    assert sys.path == [str(files), str(site), "", "relative"]
    assert sys.path is paths  # the one list every importer reads, rewritten in place
    assert list(sys.path_importer_cache) == [str(site)]


def test_a_path_another_operator_inserts_meanwhile_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another job's operator may open on another thread while this one tidies: pemja inserts
    # its paths at the front, and those must survive the rewrite.
    files = tmp_path / "files"
    files.mkdir()
    other = str(tmp_path / "other-job")
    monkeypatch.setattr(sys, "path", [str(files), str(files)])
    exists = os.path.exists

    def insert_then_look(path: str) -> bool:
        if other not in sys.path:
            sys.path.insert(0, other)
        return exists(path)

    monkeypatch.setattr(os.path, "exists", insert_then_look)
    assert forget_stale_import_paths() == 1
    assert sys.path == [other, str(files)]


@pytest.mark.flink
@pytest.mark.kafka
@pytest.mark.parametrize("ending", ["cancel", "stop-with-savepoint"])
def test_no_call_is_sent_after_the_task_ended(
    make_flink_env: Any, kafka_bootstrap: str, tmp_path: Path, ending: str
) -> None:
    witness = FakeModelServer(
        fallback=lambda _: ScriptedResponse(body={"ok": True}, delay_seconds=CALL_S)
    ).start()
    try:
        topic = f"task-end-{uuid.uuid4().hex[:12]}"
        produce_json(kafka_bootstrap, topic, [{"k": k, "url": witness.url} for k in range(KEYS)])
        # Thread mode, as jobs run (tests default to loopback), with this checkout and the venv
        # on the embedded interpreter's path.
        env = make_flink_env(**python_settings(), **{"python.execution-mode": "thread"})
        agents = AgentsExecutionEnvironment(env)
        answers = (
            agents.from_kafka(topic, bootstrap_servers=kafka_bootstrap, key="k")
            .apply(_agent())
            .to_datastream()
        )
        discarding = get_gateway().jvm.org.apache.flink.streaming.api.functions.sink.v2
        answers._j_data_stream.sinkTo(discarding.DiscardingSink()).name("discard")
        client = env.execute_async(f"task-end-{ending}")
        deadline = time.monotonic() + 120
        while witness.request_count < 2 * KEYS:  # every key's run is under way
            assert time.monotonic() < deadline, f"{witness.request_count} calls in 120 s"
            time.sleep(0.05)
        if ending == "cancel":
            client.cancel().result()
        else:
            stop_with_savepoint(client, tmp_path / "savepoints")
        time.sleep(SETTLE_S)
        settled = witness.request_count
        time.sleep(WATCH_S)
        after = witness.request_count - settled
    finally:
        witness.stop()
    assert settled < KEYS * CALLS_PER_RUN, "every run ended before the job was stopped"
    assert after == 0, f"{after} calls sent by the engine of a task that had ended ({ending})"
