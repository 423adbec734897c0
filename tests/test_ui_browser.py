"""`memctl ui` in a real browser: Debian's headless Chromium driven by Selenium (chromium-driver).

One browser for the module. Each view loads and is saved as a screenshot under the
test's temp dir (the path is printed: `pytest -s` shows where, for a person to look);
the search answers; the STATE.md chart has its points; a fact holding <script> shows
it as text and runs nothing. scripts/test.sh installs chromium, chromium-driver and a
Japanese font (fonts-ipafont-gothic).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ui_store import SCRIPT_FACT, SCRIPT_TEXT

selenium = pytest.importorskip("selenium", reason="pip install selenium (the test extra)")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
pytestmark = pytest.mark.skipif(not (os.path.exists(CHROMIUM) and os.path.exists(DRIVER)),
                                reason="apt-get install chromium chromium-driver (scripts/test.sh does)")
VIEWS = {"facts": "/", "search": "/?q=deploy+freeze", "fact": "/fact?name=kiji-yoyaku",
         "inject": "/inject?prompt=deploy+freeze", "episodes": "/episodes", "state": "/state",
         "ledgers": "/ledgers?name=episodes", "conflicts": "/conflicts"}


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager never downloads a driver or a browser
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1200,900", "--lang=ja",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"):
        options.add_argument(flag)
    # The browser is a test tool, not the code under test: it runs on the real clock. Under
    # scripts/shifted-clock/run, libfaketime in LD_PRELOAD keeps Chromium from ever answering
    # ChromeDriver ("chrome not reachable"); the ui server, in this process, keeps the shifted clock.
    real_clock = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "FAKETIME")}
    service = Service(executable_path=DRIVER, env=real_clock)
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("screenshots")
    print(f"\nui screenshots: {folder}")
    return folder


@pytest.mark.parametrize("view", list(VIEWS))
def test_each_view_loads(browser, ui_url, shots, view, pinned_clock):
    from selenium.webdriver.common.by import By

    browser.get(ui_url.rstrip("/") + VIEWS[view])
    assert browser.title.endswith("· memctl")
    assert browser.find_element(By.TAG_NAME, "h1").is_displayed()
    assert not browser.find_elements(By.CLASS_NAME, "err")
    assert browser.save_screenshot(str(shots / f"{view}.png"))
    assert (shots / f"{view}.png").stat().st_size > 10_000


def test_search_answers_in_japanese(browser, ui_url, pinned_clock):
    from selenium.webdriver.common.by import By

    browser.get(ui_url)
    box = browser.find_element(By.NAME, "q")
    box.send_keys("記事の予約投稿")
    box.submit()
    assert "記事の予約投稿" in browser.find_element(By.ID, "hits").text
    link = browser.find_element(By.LINK_TEXT, "kiji-yoyaku")
    assert browser.find_elements(By.CSS_SELECTOR, "svg.factors rect.bar")
    link.click()
    assert "記事の予約投稿は毎朝9時に公開する" in browser.find_element(By.TAG_NAME, "main").text


def test_state_chart_has_its_points(browser, ui_url):
    from selenium.webdriver.common.by import By

    browser.get(ui_url + "state")
    points = browser.find_elements(By.CSS_SELECTOR, 'svg.line[data-name="completed"] circle.pt')
    assert len(points) == 30
    ys = [p.location["y"] for p in points]
    assert ys[0] > ys[-1]  # completed grows: the line rises (y grows downwards)
    assert all(p.size["width"] > 0 for p in points)


def test_injected_script_does_not_run(browser, ui_url):
    from selenium.webdriver.common.by import By

    for path in (f"fact?name={SCRIPT_FACT}", "?q=fact+holding+script"):
        browser.get(ui_url + path)
        assert browser.execute_script("return window.__pwned === undefined")
        assert "pwned" not in browser.title
        assert not browser.find_elements(By.CSS_SELECTOR, "main script, main img")
    assert SCRIPT_TEXT in browser.find_element(By.TAG_NAME, "main").text  # shown as text
