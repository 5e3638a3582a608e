"""The console served for real (uvicorn on a free local port) and a headless chromium that
selenium drives: Debian's ``chromium`` and ``chromium-driver``. Without them a browser test is
skipped, saying what to install."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# docs/console/ when asked (FLINK_AGENTS_UPDATE_SCREENSHOTS=1), so a test run leaves the
# committed screenshots alone; else the shots are still taken, into the temporary folder.
SCREENSHOTS = (
    Path(__file__).resolve().parents[2] / "docs" / "console"
    if os.environ.get("FLINK_AGENTS_UPDATE_SCREENSHOTS")
    else Path(tempfile.gettempdir()) / "flink-agents-console-screenshots"
)


def _missing() -> str | None:
    for path in (CHROMIUM, CHROMEDRIVER):
        if not Path(path).exists() and shutil.which(Path(path).name) is None:
            return f"{path} is missing: apt-get install chromium chromium-driver"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is missing: pip install -e '.[test]'"
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    reason = _missing()
    if reason is None:
        return
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=f"browser test: {reason}"))


class Served:
    """An ASGI app served by uvicorn on a thread of this process."""

    def __init__(self, app: object) -> None:
        import uvicorn

        from flink_agents.flink.job_status import free_local_port

        self.port = free_local_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")  # type: ignore[arg-type]
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def __enter__(self) -> Served:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            assert time.monotonic() < deadline, "the console did not start within 10 s"
            time.sleep(0.05)
        return self

    def __exit__(self, *_: object) -> None:
        self._server.should_exit = True
        self._thread.join(10)


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    """A headless chromium driven by selenium, shared by the session's browser tests."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,900"):
        options.add_argument(argument)
    driver = webdriver.Chrome(
        service=Service(shutil.which("chromedriver") or CHROMEDRIVER), options=options
    )
    driver.implicitly_wait(2)
    try:
        yield driver
    finally:
        driver.quit()


def screenshot(driver: object, name: str) -> Path:
    """Save the page's full height as <name>.png in `SCREENSHOTS` (docs/console.md shows
    docs/console/'s)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    height = driver.execute_script("return document.documentElement.scrollHeight")  # type: ignore[attr-defined]
    # The window's height holds its own frame too: a margin keeps the page's end in the shot.
    driver.set_window_size(1280, min(max(int(height) + 160, 600), 2400))  # type: ignore[attr-defined]
    driver.save_screenshot(str(path))  # type: ignore[attr-defined]
    driver.set_window_size(1280, 900)  # type: ignore[attr-defined]
    return path


def page_holds(
    driver: Any, holds: Callable[[Any], bool], what: str, timeout_s: float = 30.0
) -> None:
    """Wait until ``holds(driver)``. A click that submits a form or follows a link loads the
    next page: what is read before it replaced the old one is the old page's, goes stale, or
    (chromium, read in the middle of a redirect) "does not belong to the document"."""
    errors = pytest.importorskip("selenium.common.exceptions")
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if holds(driver):
                return
        except errors.WebDriverException as exc:  # stale, not found yet, or mid-navigation
            last = exc
        time.sleep(0.1)
    raise AssertionError(
        f"the page did not show {what} within {timeout_s:g} s"
        + (f" (last: {type(last).__name__}: {last.msg})" if last is not None else "")
    )


def message_says(driver: Any, text: str, timeout_s: float = 30.0) -> None:
    """Wait until the page's ``#message`` holds ``text``."""
    by = pytest.importorskip("selenium.webdriver.common.by").By
    page_holds(
        driver,
        lambda d: text in d.find_element(by.ID, "message").text,
        f"the message {text!r}",
        timeout_s,
    )
