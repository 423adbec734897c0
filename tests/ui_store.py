"""The store the ui tests look at, and the ui serving it in a thread (tests/test_ui*.py).

Facts in Japanese and English (one holding a <script>, one superseded), episodes
on several days, a merge conflict copy, an access log, and a month of STATE.md
commits, each under its own pinned clock (MEMCTL_NOW and GIT_*_DATE): nothing
depends on today's date.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

START = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)
DAYS = 30
SCRIPT_FACT = "xss-probe"
SCRIPT_TEXT = '<script>window.__pwned = 1; document.title = "pwned"</script><img src=x onerror="window.__pwned=2">'


@contextlib.contextmanager
def clock_at(when: datetime):
    """The clock of everything run inside, and an environment like conftest's _clean_env (the store
    is built once per session, before any test's own fixtures run)."""
    stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ")
    given = {"MEMCTL_NOW": stamp, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp, "GIT_CONFIG_NOSYSTEM": "1",
             "MEMCTL_HOOK_RESIDENT": "0", "HOME": str(HOME), "MEMCTL_ROOT": None, "MEMCTL_NO_COMMIT": None,
             "MEMCTL_AGENT": None, "XDG_CONFIG_HOME": None}
    saved = {k: os.environ.get(k) for k in given}
    for key, value in given.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


HOME = Path("/nonexistent")  # build() sets it: a fresh home beside the store


def build(root: Path) -> Path:
    import memctl

    global HOME
    HOME = root.parent / "home"
    HOME.mkdir(exist_ok=True)

    with clock_at(START):
        store = memctl.init_store(root)
        memctl.remember(store, "deploy-freeze", "Deploys freeze on Fridays after 15:00", type="project",
                        vector_check=False)
        memctl.remember(store, "kiji-yoyaku", "記事の予約投稿は毎朝9時に公開する", type="project",
                        body="公開前に見出しと画像を確認する。", vector_check=False)
        memctl.remember(store, "user-lang", "The user writes in Japanese and English", type="user", vector_check=False)
        memctl.remember(store, SCRIPT_FACT, f"A fact holding {SCRIPT_TEXT}", type="reference", body=SCRIPT_TEXT,
                        vector_check=False)
    with clock_at(START + timedelta(days=2)):
        memctl.remember(store, "deploy-freeze-thursday", "Deploys freeze on Thursdays after 15:00", type="project",
                        supersedes=["deploy-freeze"], vector_check=False)
    for day in range(DAYS):
        when = START + timedelta(days=day, hours=1)
        with clock_at(when):
            if day % 3 == 0:
                memctl.add_episode(store, f"deployed release {day}", "success", agent="claude-code")
            if day % 5 == 0:
                memctl.add_episode(store, f"記事の公開に失敗した {day}", "error", agent="writer")
            memctl.update_state(store, numbers={"completed": day * 2, "pending": 40 - day})
    with clock_at(START + timedelta(days=DAYS)):
        memctl.search(store, "deploy freeze", log=True, mode="keyword")
        memctl.show(store, "kiji-yoyaku", log=True)
        conflicts = store.memory_dir / "conflicts"
        conflicts.mkdir()
        live = (store.memory_dir / "user-lang.md").read_text(encoding="utf-8")
        (conflicts / "user-lang.0123abcd.md").write_text(
            live.replace("Japanese and English", "Japanese only"), encoding="utf-8")
        subprocess.run(["git", "-C", str(root), "add", "-A"], check=True, capture_output=True)
        subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.invalid",
                        "commit", "-qm", "a merge kept the other machine's version"], check=True, capture_output=True)
    return root


@pytest.fixture(scope="session")
def ui_root(tmp_path_factory) -> Path:
    """The store above, built once for the ui tests (test_ui.py and test_ui_browser.py only read it)."""
    return build(tmp_path_factory.mktemp("ui") / "store")


@pytest.fixture(scope="session")
def ui_url(ui_root) -> str:
    """The ui for that store, served by a thread for the whole session."""
    with serving(ui_root) as url:
        yield url


@contextlib.contextmanager
def serving(root: Path):
    """The ui for `root` on a free port, served by a thread; yields its URL."""
    from memctl.store import open_store
    from memctl.ui import server

    httpd = server.make(open_store(root), 0)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.url(httpd)
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
