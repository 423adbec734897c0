"""The resident watch over the fact folders (memctl/watch.py): its stamp moves with every change to a
fact file and only then, and a command whose index was checked at the same stamp stats no fact file,
yet sees every write made before it. Real inotify, real files, a real embed-server for the CLI test."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import memctl
from memctl import rindex, watch
from memctl.store import open_store

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")


def _fact(folder: Path, name: str, description: str) -> Path:
    path = folder / f"{name}.md"
    path.write_text(f"---\nname: {name}\ndescription: {description}\ntype: project\n---\n\nbody\n", encoding="utf-8")
    return path


def _eventually(condition, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_the_stamp_moves_with_every_change_to_a_fact_file_and_only_then(store):
    memory = store.memory_dir
    fact = _fact(memory, "deploy-window", "デプロイは火曜日だけ")
    outside = store.root / "notes.txt"

    def in_place():  # same size, mtime put back: no folder mtime moves, only inotify sees it
        st = fact.stat()
        with open(fact, "r+b") as handle:
            handle.seek(-5, os.SEEK_END)
            handle.write(b"BODY\n")
        os.utime(fact, ns=(st.st_atime_ns, st.st_mtime_ns))

    def renamed_in():  # an atomic write: a hidden temp file, then a rename onto the name
        temp = memory / ".deploy-window.md.tmp"
        temp.write_text(fact.read_text(encoding="utf-8") + "more\n", encoding="utf-8")
        os.replace(temp, fact)

    def archived():
        store.archive_dir.mkdir(exist_ok=True)
        os.replace(_fact(memory, "old-rule", "古い決まり"), store.archive_dir / "old-rule.md")

    moves = [
        ("an in-place write", in_place),
        ("a touch", lambda: os.utime(fact)),
        ("an atomic rewrite", renamed_in),
        ("a new fact", lambda: _fact(memory, "lunch", "Team lunch is on Fridays")),
        ("a fact removed", lambda: (memory / "lunch.md").unlink()),
        ("the archive made and a fact moved in", archived),
        ("a write in the archive", lambda: (store.archive_dir / "old-rule.md").write_text("changed\n")),
        ("a fact moved out of the archive", lambda: os.replace(store.archive_dir / "old-rule.md", memory / "old-rule.md")),
        ("the archive moved away", lambda: os.rename(store.archive_dir, store.root / "archive-moved")),
    ]
    stays = [
        ("a read", lambda: fact.read_bytes()),
        ("MEMORY.md rewritten", lambda: (memory / "MEMORY.md").write_text("- index\n", encoding="utf-8")),
        ("a hidden temp file", lambda: (memory / ".x.md.tmp").write_text("temp\n")),
        ("a file that is no fact", lambda: (memory / "notes.txt").write_text("not a fact\n")),
        ("a file outside memory/", lambda: outside.write_text("elsewhere\n")),
    ]
    with watch.serving(store) as watching:
        assert watching and watch.stamp(store) == watch.stamp(store)
        assert (watch.socket_path(store).stat().st_mode & 0o777) == 0o600
        for what, change in moves:
            before = watch.stamp(store)
            change()
            assert watch.stamp(store) != before, what  # asked right after the change: no wait
        for what, change in stays:
            before = watch.stamp(store)
            change()
            assert watch.stamp(store) == before, what
    assert not watch.socket_path(store).exists() and watch.stamp(store) is None


def test_memory_moved_away_gives_no_stamp_and_a_dead_or_foreign_socket_none_either(store, tmp_path):
    with watch.serving(store, recheck_seconds=0.2):
        before = watch.stamp(store)
        assert before is not None
        os.rename(store.memory_dir, tmp_path / "moved")
        assert watch.stamp(store) is None
        (tmp_path / "moved" / "written-while-away.md").write_text("away\n")
        os.rename(tmp_path / "moved", store.memory_dir)
        # Back, and watched again at the next recheck, under a stamp no index was checked at.
        assert _eventually(lambda: watch.stamp(store) is not None)
        again = watch.stamp(store)
        assert again != before
        (store.memory_dir / "written-while-away.md").write_text("back\n")
        assert watch.stamp(store) != again  # the folder is watched, not only answered for
        shutil.rmtree(store.memory_dir)
        assert watch.stamp(store) is None
        store.memory_dir.mkdir()
        assert _eventually(lambda: watch.stamp(store) is not None)  # a memory/ made anew is watched too
        fresh = watch.stamp(store)
        (store.memory_dir / "new.md").write_text("new\n")
        assert watch.stamp(store) != fresh
    linked = tmp_path / "linked-store"
    linked.symlink_to(store.root)  # the same store by another path: the same folders, the same stamp
    with watch.serving(open_store(linked)):
        assert watch.stamp(store) is not None and watch.stamp(store) == watch.stamp(open_store(linked))
    path = watch.socket_path(store)
    path.write_text("not a socket")
    assert watch.stamp(store) is None
    path.unlink()
    # A socket that answers for another folder (a server started under another memory/): not taken.
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)

    def answer():
        conn, _ = listener.accept()
        conn.sendall(b"abc:1\0" + os.fsencode(tmp_path / "elsewhere"))
        conn.close()

    thread = threading.Thread(target=answer)
    thread.start()
    assert watch.stamp(store) is None
    thread.join()
    listener.close()


def test_a_memory_folder_replaced_while_the_old_one_is_held_open_is_watched_at_once(store, tmp_path):
    """The kernel holds back the delete event of a folder that something still has open (a shell in it,
    a `tail -f` of a fact): the watch sees the new folder by its inode at the next ask, not 30 s later."""
    _fact(store.memory_dir, "kept-open", "開いたままのファイル")
    with watch.serving(store), open(store.memory_dir / "kept-open.md", "rb"):
        before = watch.stamp(store)
        shutil.rmtree(store.memory_dir)
        store.memory_dir.mkdir()
        stamps = [watch.stamp(store)]
        for n in range(3):
            _fact(store.memory_dir, f"after-{n}", f"Written into the new folder, number {n}")
            stamps.append(watch.stamp(store))
        assert None not in stamps and before not in stamps
        assert len(set(stamps)) == len(stamps)  # every write into the new folder moved the stamp


def test_a_change_inotify_does_not_report_moves_the_stamp_at_the_next_recheck(store, tmp_path):
    fact = _fact(store.memory_dir, "deploy-window", "デプロイは火曜日だけ")
    link = tmp_path / "hard-link.md"
    os.link(fact, link)  # a write through this name is reported to tmp_path's watchers, not memory/'s
    with watch.serving(store, recheck_seconds=0.2):
        before = watch.stamp(store)
        time.sleep(0.5)
        assert watch.stamp(store) == before  # nothing changed: rechecks leave it
        with open(link, "a", encoding="utf-8") as handle:
            handle.write("written through the link\n")
        assert _eventually(lambda: watch.stamp(store) != before)


def test_a_check_at_an_unmoved_stamp_stats_no_fact_file_and_a_change_brings_the_stat_back(store, monkeypatch):
    _fact(store.memory_dir, "deploy-window", "デプロイは火曜日だけ")
    walks = []
    real = rindex._fact_stats
    def counted(s):  # the checks of commands (the watch's own rechecks are not counted)
        if sys._getframe(1).f_code.co_name == "_sync_facts":
            walks.append(1)
        return real(s)

    monkeypatch.setattr(rindex, "_fact_stats", counted)
    with rindex.opened(store):
        pass
    assert len(walks) == 1
    with rindex.opened(store):
        pass
    assert len(walks) == 2  # without a watch: every check stats every file
    with watch.serving(store):
        for expected in (3, 3, 3):
            with rindex.opened(store):
                pass
            assert len(walks) == expected  # the first records the stamp; the next two stat nothing
        _fact(store.memory_dir, "lunch", "Team lunch is on Fridays")
        with rindex.opened(store) as conn:
            assert conn.execute("SELECT count(*) FROM docs WHERE kind='fact'").fetchone()[0] == 2
        assert len(walks) == 4
    with rindex.opened(store):
        pass
    assert len(walks) == 5  # the watch stopped: back to the stat of every file


def _recalled(root: Path, query: str) -> list[str]:
    r = memctl(root, "recall", query, "--mode", "keyword", "--json", "--no-log", "--min-score", "0")
    assert r.returncode in (0, 1), r.stderr
    return [hit["description"] for hit in json.loads(r.stdout)] if r.returncode == 0 else []


def test_every_write_made_before_a_command_is_in_its_answer_with_the_embed_server_watching(root):
    (root / "memctl.toml").write_text((root / "memctl.toml").read_text(encoding="utf-8")
                                      + '\n[embedding]\nbackend = "char-ngram"\n', encoding="utf-8")
    fact = _fact(root / "memory", "deploy-window", "deploys on alpha")
    proc = subprocess.Popen([sys.executable, "-m", "memctl", "--root", str(root), "embed-server", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = json.loads(proc.stdout.readline())
        assert ready["watch"] is True and watch.stamp(open_store(root)) is not None
        words = ["bravo", "gamma", "delta", "kappa", "omega", "sigma"]
        for word in words:  # each an in-place write of the same size, its mtime put back
            st = fact.stat()
            text = fact.read_text(encoding="utf-8")
            fact.write_text(text.replace(text.split("deploys on ")[1].split("\n")[0], word), encoding="utf-8")
            os.utime(fact, ns=(st.st_atime_ns, st.st_mtime_ns))
            assert _recalled(root, word) == [f"deploys on {word}"], word
        os.kill(proc.pid, signal.SIGKILL)  # a stale socket: commands check every file again
        proc.wait()
        assert watch.socket_path(open_store(root)).exists()
        fact.write_text(fact.read_text(encoding="utf-8").replace("sigma", "theta"), encoding="utf-8")
        assert _recalled(root, "theta") == ["deploys on theta"]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_commands_asking_the_watch_keep_an_idle_embed_server_up_and_it_exits_once_nobody_asks(root):
    """The SessionStart hook starts the server with --idle: keyword commands, which ask only the watch,
    are requests too; once nobody asks anything for --idle seconds, it exits."""
    (root / "memctl.toml").write_text((root / "memctl.toml").read_text(encoding="utf-8")
                                      + '\n[embedding]\nbackend = "char-ngram"\n', encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-m", "memctl", "--root", str(root), "embed-server", "--json", "--idle", "5"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert json.loads(proc.stdout.readline())["watch"] is True
        store = open_store(root)
        asked, answered = time.monotonic(), 0
        # Three idle periods, a stamp asked every 0.3 s: the server must still be there after each. (An ask
        # may go unanswered within its 0.5 s on a loaded machine; the idle is long enough for many more.)
        while time.monotonic() - asked < 15:
            answered += watch.stamp(store) is not None
            assert proc.poll() is None
            time.sleep(0.3)
        assert answered > 0
        assert proc.wait(timeout=60) == 0  # nobody asks: gone after --idle seconds
        assert watch.stamp(store) is None and not watch.socket_path(store).exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
