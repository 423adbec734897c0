"""One validation: the same condition gives the same exit code in every command (errors.BY_CONDITION).

Every case runs `python -m memctl` as a real process (so arguments that are not UTF-8 reach it as
bytes, as from a shell) against a real store, and checks the exit code the table gives for its
condition, one line on stderr, no traceback, and nothing changed in git.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memctl import errors

from conftest import git

FF = "\udcff"  # the byte 0xff as Python hands over an argument that is not UTF-8 (surrogateescape)
CODES = {key: code for key, _text, code in errors.BY_CONDITION}

# condition -> (argv, stdin bytes or None, env); "{tmp}" is the test's temp folder.
CASES: dict[str, list[tuple[list[str], bytes | None, dict[str, str]]]] = {
    "not-found": [
        (["show", "missing"], None, {}),
        (["forget", "missing", "--reason", "x"], None, {}),
        (["log", "missing"], None, {}),
        (["pin", "missing"], None, {}),
        (["unpin", "missing"], None, {}),
        (["remember", "missing", "--update", "-d", "x"], None, {}),
        (["remember", "new-one", "-d", "x", "--supersedes", "missing"], None, {}),
        (["ledger", "append", "nope", "a=1"], None, {}),
        (["ledger", "rows", "nope"], None, {}),
        (["ledger", "check", "nope"], None, {}),
        (["ledger", "dups", "nope", "a"], None, {}),
        (["ledger", "adopt", "ledgers/missing.tsv", "--columns", "a"], None, {}),
        (["near-dup", "x", "--ledger", "nope", "--column", "a"], None, {}),
        (["near-dup", "scan", "--ledger", "nope", "--column", "a"], None, {}),
        (["near-dup", "calibrate", "missing.tsv"], None, {}),
        (["state", "check"], None, {}),
        (["state", "show"], None, {}),
        (["run-job", "no-such-job"], None, {}),
        (["recall", "--queries", "{tmp}/missing.txt"], None, {}),
        (["state", "update", "--from-json", "{tmp}/missing.json"], None, {}),
        (["episode", "import", "claude-code", "{tmp}/missing.jsonl"], None, {}),
        (["list"], None, {"MEMCTL_ROOT": "{tmp}/no-store", "NO_ROOT": "1"}),
    ],
    "bad-name": [
        (["remember", "../evil", "-d", "x"], None, {}),
        (["show", "../evil"], None, {}),
        (["ledger", "create", "a b", "--columns", "a"], None, {}),
        (["ledger", "create", "fine", "--columns", "a b"], None, {}),
        (["ledger", "append", "../etc", "a=1"], None, {}),
        (["ledger", "rows", "a/b"], None, {}),
        (["near-dup", "x", "--ledger", "a b", "--column", "a"], None, {}),
    ],
    "bad-value": [
        (["remember", "ok", "-d", "x", "--importance", "1.5"], None, {}),
        (["remember", "ok", "-d", "x", "--expires", "next tuesday"], None, {}),
        (["episode", "add", "x", "-t", "decision", "--importance", "2"], None, {}),
        (["ledger", "rows", "themes", "--where", "nocolumn=1"], None, {}),
        (["ledger", "rows", "themes", "--tail", "-1"], None, {}),
        (["ledger", "append", "themes", "nocolumn=1"], None, {}),
        (["episode", "list", "--since", "someday"], None, {}),
        (["state", "check", "--max-age", "forever"], None, {}),
        (["near-dup", "x", "--ledger", "themes", "--column", "theme", "--top", "0"], None, {}),
        (["remember", "ok", "-d", "x", "--importance", "high"], None, {}),
        (["remember", "ok", "-d", "x"], None, {"MEMCTL_NOW": "garbage"}),  # a traceback before
        (["episode", "add", "x", "--type", "decision"], None, {"MEMCTL_NOW": "yesterday"}),
    ],
    "unknown-type": [
        (["remember", "ok", "-d", "x", "--type", "feeback"], None, {}),
        (["remember", "fa", "--update", "--type", "banana"], None, {}),
        (["remember", "ok", "-d", "x", "--supersedes", "fa", "--type", "banana"], None, {}),
        (["episode", "add", "x", "--type", "bogus"], None, {}),
        (["episode", "list", "--type", "bogus"], None, {}),
        (["episode", "recall", "決めた", "--type", "bogus"], None, {}),
        (["recall", "決めた", "--source", "episodes", "--type", "bogus"], None, {}),
    ],
    "bad-ref": [
        (["episode", "add", "x", "--type", "decision", "--ref", "does-not-exist"], None, {}),
        (["episode", "add", "x", "--type", "decision", "--ref", "ep-20990101000000-abcd"], None, {}),
    ],
    "not-utf8": [
        (["remember", "ok", "-d", "x" + FF], None, {}),
        (["ledger", "append", "themes", "host=a", "theme=" + FF], None, {}),
        (["near-dup", FF, "--ledger", "themes", "--column", "theme"], None, {}),
        (["recall", FF], None, {}),
        (["episode", "add", FF, "--type", "decision"], None, {}),
        (["episode", "add", "x", "--type", "decision"], None, {"MEMCTL_AGENT": FF}),
        (["ledger", "append", "themes", "-"], b"a\t\xff\n", {}),
        (["ledger", "append", "themes", "-", "--json"], b'{"host": "a", "theme": "\xff"}\n', {}),
        (["remember", "ok", "-d", "x", "--body", "-"], b"\xff\n", {}),
        (["recall", "--queries", "-"], b"\xff\n", {}),
        (["near-dup", "--stdin", "--ledger", "themes", "--column", "theme"], b"\xff\n", {}),
        (["recall", "--queries", "{tmp}/latin1.txt"], None, {}),
        (["state", "update", "--from-json", "-"], b'{"a\xff": 1}', {}),
    ],
    "nul": [
        (["remember", "ok", "-d", "x", "--body", "-"], b"one\x00two\n", {}),
        (["ledger", "append", "themes", "-", "--json"], b'{"host": "a", "theme": "x\\u0000y"}\n', {}),
        (["episode", "add", "x", "--type", "decision", "--outcome", "-"], None, {}),  # placeholder, replaced below
    ],
    "usage": [
        (["list", "--bogus"], None, {}),
        (["remember"], None, {}),
        (["ledger", "append"], None, {}),
        (["ledger", "append", "themes", "--unique"], None, {}),
        (["episode", "add", "x"], None, {}),
        (["forget", "fa", "--reason", "x", "--dry-run"], None, {}),  # it forgot and committed
        (["forget", "--policies", "--reason", "x"], None, {}),  # the reason was dropped
    ],
    "exists": [
        (["remember", "fa", "-d", "another description"], None, {}),
        (["ledger", "create", "themes", "--columns", "a"], None, {}),
        (["ledger", "append", "themes", "host=b", "theme=猫の餌の選び方"], None, {}),
    ],
    "damaged": [
        (["ledger", "append", "torn", "a=1"], None, {}),
        (["ledger", "rows", "torn"], None, {}),
        (["remember", "another", "-d", "x"], None, {"DAMAGE": "index"}),
        (["index"], None, {"DAMAGE": "index"}),
    ],
    "locked": [
        (["remember", "ok", "-d", "x"], None, {"MEMCTL_LOCK_TIMEOUT": "0.2", "HOLD": "lock"}),
        (["ledger", "append", "themes", "host=a", "theme=new"], None, {"MEMCTL_LOCK_TIMEOUT": "0.2", "HOLD": "lock"}),
        (["episode", "add", "x", "--type", "decision"], None, {"MEMCTL_LOCK_TIMEOUT": "0.2", "HOLD": "lock"}),
        (["forget", "fa", "--reason", "x"], None, {"MEMCTL_LOCK_TIMEOUT": "0.2", "HOLD": "lock"}),
    ],
    "no-git": [
        (["remember", "ok", "-d", "x"], None, {"MEMCTL_GIT": "{tmp}/no-such-git"}),
        (["ledger", "append", "themes", "host=a", "theme=new"], None, {"MEMCTL_GIT": "{tmp}/no-such-git"}),
        (["ledger", "append", "themes", "-", "--json"], b'{"host": "a", "theme": "new"}\n', {"MEMCTL_GIT": "{tmp}/no-such-git"}),
        (["episode", "add", "x", "--type", "decision"], None, {"MEMCTL_GIT": "{tmp}/no-such-git"}),
        (["forget", "fa", "--reason", "x"], None, {"MEMCTL_GIT": "{tmp}/no-such-git"}),
        (["state", "update"], None, {"MEMCTL_GIT": "{tmp}/no-such-git"}),
        (["maintain"], None, {"MEMCTL_GIT": "{tmp}/no-such-git"}),
        (["sync"], None, {"MEMCTL_GIT": "{tmp}/no-such-git"}),
    ],
    "link": [
        (["show", "fa"], None, {"DAMAGE": "link"}),
        (["ledger", "append", "themes", "host=b", "theme=new"], None, {"DAMAGE": "link"}),
        (["ledger", "rows", "themes"], None, {"DAMAGE": "link"}),
        (["state", "show"], None, {"DAMAGE": "link"}),
        (["state", "update"], None, {"DAMAGE": "link"}),
    ],
    "untrusted": [
        (["run-job", "evil"], None, {"DAMAGE": "untrusted"}),
        (["run-job", "--quiet", "daily-maintenance"], None, {"DAMAGE": "untrusted"}),
    ],
}
# argv cannot carry a NUL; the MCP tools and stdin can. The episode one goes through NDJSON.
CASES["nul"][2] = (["ledger", "append", "episodes", "-", "--json"],
                   b'{"id": "ep-1", "ts": "2026-01-01", "agent": "", "type": "decision", "description": "a\\u0000",'
                   b' "outcome": "", "importance": "0.5", "tags": "", "refs": ""}\n', {})


def _run(root: Path, argv: list[str], stdin: bytes | None, env: dict[str, str]) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("MEMCTL_")}
    full["HF_HUB_OFFLINE"] = "1"
    full.update({k: v.replace("{tmp}", str(root.parent)) for k, v in env.items() if k.startswith("MEMCTL_")})
    argv = [a.replace("{tmp}", str(root.parent)) for a in argv]
    where = [] if env.get("NO_ROOT") else ["--root", str(root)]
    return subprocess.run([sys.executable, "-m", "memctl", *where, *argv], input=stdin or b"",
                          capture_output=True, env=full, timeout=120)


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """A store with a fact, a ledger with a unique column and one row, an episode, and a torn ledger."""
    top = tmp_path_factory.mktemp("validation")
    root = top / "store"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMCTL_")}

    def run(*argv: str, stdin: bytes = b"") -> None:
        subprocess.run([sys.executable, "-m", "memctl", "--root", str(root), *argv], input=stdin, check=True,
                       capture_output=True, env=env)

    subprocess.run([sys.executable, "-m", "memctl", "init", str(root)], check=True, capture_output=True, env=env)
    toml = root / "memctl.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace("[facts]\n", '[facts]\nvector_check = "never"\n'), encoding="utf-8")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "no vector check")
    run("remember", "fa", "-d", "Zenn投稿は1日1件まで")
    run("ledger", "create", "themes", "--columns", "host,theme", "--unique", "theme")
    run("ledger", "append", "themes", "host=a", "theme=猫の餌の選び方")
    run("ledger", "create", "torn", "--columns", "a")
    run("episode", "add", "決めた", "--type", "decision")
    with open(root / "ledgers" / "torn.tsv", "ab") as handle:
        handle.write(b"cut-off")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "a torn last line")
    (top / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    return root


def _copy(base: Path, tmp_path: Path) -> Path:
    root = tmp_path / "store"
    subprocess.run(["cp", "-a", str(base), str(root)], check=True)
    (tmp_path / "latin1.txt").write_bytes((base.parent / "latin1.txt").read_bytes())
    return root


def _case_ids():
    for key, cases in CASES.items():
        for argv, stdin, env in cases:
            yield pytest.param(key, argv, stdin, env, id=f"{key}:{' '.join(argv)[:60]}")


@pytest.mark.parametrize("key, argv, stdin, env", list(_case_ids()))
def test_same_condition_same_exit_code(base, tmp_path, key, argv, stdin, env):
    root = _copy(base, tmp_path)
    if env.get("DAMAGE") == "index":  # a begin marker without its end marker
        index = root / "memory" / "MEMORY.md"
        index.write_text(index.read_text(encoding="utf-8").replace("<!-- memctl:index:end -->\n", ""), encoding="utf-8")
        git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "damaged block")
    if env.get("DAMAGE") == "link":  # files moved out of the store, links left in their place
        for rel in ("memory/fa.md", "ledgers/themes.tsv", "state/STATE.md"):
            outside = tmp_path / rel.replace("/", "-")
            if (root / rel).exists():
                (root / rel).rename(outside)
            else:
                outside.write_text("---\nupdated: 2026-01-01T00:00:00+00:00\n---\n")
            (root / rel).symlink_to(outside)
    if env.get("DAMAGE") == "untrusted":  # jobs that came in by a merge, not by a commit made here
        git(root, "checkout", "-qb", "theirs")
        toml = root / "memctl.toml"
        text = toml.read_text(encoding="utf-8").replace('command = "maintain"', 'command = "doctor"')
        toml.write_text(text + '\n[jobs.evil]\nscript = "/bin/sh"\nargs = ["-c", "true"]\nhour = 1\n', encoding="utf-8")
        git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "new jobs")
        git(root, "checkout", "-q", "-")
        git(root, "merge", "-q", "--ff-only", "theirs")
    head = git(root, "rev-parse", "HEAD")
    status = git(root, "status", "--porcelain")
    holder = None
    if env.get("HOLD") == "lock":
        (root / ".memctl").mkdir(exist_ok=True)
        holder = os.open(root / ".memctl" / "lock", os.O_RDWR | os.O_CREAT)
        fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        done = _run(root, argv, stdin, env)
    finally:
        if holder is not None:
            os.close(holder)
    err = done.stderr.decode("utf-8", "replace")
    expected = CODES[key]
    if argv[0] == "near-dup" and expected == errors.FAILED:
        expected = errors.USAGE  # near-dup's 1 means "near-duplicate"
    assert done.returncode == expected, (key, argv, err)
    assert "Traceback" not in err
    assert err.count("\n") == 1, err
    if "--json" in argv:  # with --json an error is one JSON object (docs/JSON.md)
        assert json.loads(err)["exit_code"] == expected, err
    else:
        assert err.startswith("memctl: error: "), err
    assert git(root, "rev-parse", "HEAD") == head
    assert git(root, "status", "--porcelain") == status


def test_a_git_hint_offers_no_commit_only_to_a_command_that_has_it(base, tmp_path):
    """helper-72: `log`, `sync`, `ledger commit` without git said "or use --no-commit / MEMCTL_NO_COMMIT=1", an
    option they do not have (and a variable that does not help them)."""
    root = _copy(base, tmp_path)
    missing = {"MEMCTL_GIT": "{tmp}/no-such-git"}
    for argv, offered in ((["log", "fa"], False), (["sync"], False), (["ledger", "commit", "themes"], False),
                          (["remember", "ok", "-d", "x"], True), (["ledger", "append", "themes", "host=a", "theme=new"], True)):
        err = _run(root, argv, None, missing).stderr.decode("utf-8", "replace")
        assert err.startswith("memctl: error: git not found") and "(hint: install git (or name it in MEMCTL_GIT)" in err, (argv, err)
        assert ("--no-commit" in err) is offered, (argv, err)
    assert _run(root, ["remember", "ok", "-d", "x", "--no-commit"], None, missing).returncode == 0  # the hint, followed


def test_every_condition_in_the_table_is_triggered_and_every_case_names_one():
    assert set(CASES) == set(CODES)
    assert all(CASES[key] for key in CASES)
    assert {code for code in CODES.values()} == {errors.FAILED, errors.USAGE, errors.NOT_FOUND, errors.LOCKED}


def test_docs_cli_prints_the_table():
    text = (Path(__file__).resolve().parent.parent / "docs" / "CLI.md").read_text(encoding="utf-8")
    for _key, condition, code in errors.BY_CONDITION:
        assert f"| {condition} | {code} |" in text


# ---------------------------------------------------------------- one behaviour each

def test_a_torn_last_line_is_named_by_rows_and_never_padded(base, tmp_path):
    root = _copy(base, tmp_path)
    path = root / "ledgers" / "torn.tsv"
    with open(path, "ab") as handle:  # the cut-off "cut-off" becomes whole, then a torn two-field fragment follows
        handle.write(b"\nsecond\tfield")
    size = path.stat().st_size
    whole = size - len(b"second\tfield")  # where the last whole line ends
    done = _run(root, ["ledger", "rows", "torn"], None, {})
    assert done.returncode == 1
    assert done.stdout.decode() == "cut-off\n"  # the whole rows; the torn one neither printed nor padded
    err = done.stderr.decode()
    assert err == (f"memctl: error: ledgers/torn.tsv:3: the last line has no LF (a cut-off record?); that line was left out "
                   f"(hint: if that line is cut off: truncate -s {whole} ledgers/torn.tsv; "
                   "if it is a whole record: printf '\\n' >> ledgers/torn.tsv)\n")
    json_rows = _run(root, ["ledger", "rows", "torn", "--json"], None, {})
    assert (json_rows.returncode, json_rows.stdout.decode().strip()) == (1, '[{"a": "cut-off"}]')
    refused = _run(root, ["ledger", "append", "torn", "a=new"], None, {})
    assert refused.returncode == 1 and f"truncate -s {whole} ledgers/torn.tsv" in refused.stderr.decode()
    assert path.stat().st_size == size
    # the repair the hint names makes both work again
    subprocess.run(["truncate", "-s", str(whole), str(path)], check=True)
    assert _run(root, ["ledger", "append", "torn", "a=new", "--no-commit"], None, {}).returncode == 0
    again = _run(root, ["ledger", "rows", "torn"], None, {})
    assert (again.returncode, again.stdout.decode(), again.stderr.decode()) == (0, "cut-off\nnew\n", "")


def test_doctor_names_nul_bytes_in_every_file_memctl_owns(base, tmp_path):
    root = _copy(base, tmp_path)
    assert _run(root, ["state", "update"], None, {}).returncode == 0
    with open(root / "memory" / "fa.md", "ab") as handle:
        handle.write("本文\n二行目\x00\n".encode())
    lines = (root / "memory" / "fa.md").read_bytes().count(b"\n")
    with open(root / "memory" / "MEMORY.md", "ab") as handle:
        handle.write(b"a hand line\nx\x00y\x00\n")
    with open(root / "state" / "STATE.md", "ab") as handle:
        handle.write(b"\x00\n")
    with open(root / "ledgers" / "themes.tsv", "ab") as handle:
        handle.write(b"b\tnul\x00here\n")
    index_lines = (root / "memory" / "MEMORY.md").read_bytes().count(b"\n")
    state_lines = (root / "state" / "STATE.md").read_bytes().count(b"\n")
    done = _run(root, ["doctor"], None, {})
    out = done.stdout.decode() + done.stderr.decode()
    assert done.returncode == 1
    assert f"memory/fa.md:{lines}: error: a NUL byte" in out
    assert f"memory/MEMORY.md:{index_lines}: error: a NUL byte" in out
    assert len(re.findall(r"memory/MEMORY\.md:\d+: error: a NUL byte", out)) == 1  # one per line, however many NULs
    assert f"state/STATE.md:{state_lines}: error: a NUL byte" in out
    assert "ledgers/themes.tsv:3: error: a NUL byte" in out


def test_a_hook_given_bytes_that_are_not_utf8_still_exits_0(base, tmp_path):
    root = _copy(base, tmp_path)
    done = _run(root, ["hook", "prompt"], b'{"prompt": "\xff\xfe Zenn"}', {})
    assert (done.returncode, done.stdout) == (0, b"")
    assert done.stderr.decode() == "memctl: hook prompt: nothing added: the hook input on stdin is not valid UTF-8\n"


@pytest.mark.parametrize("given, said", [
    (b'["When are we allowed to deploy?"]', "the hook input on stdin is an array, not a JSON object"),
    (b'"When are we allowed to deploy?"', "the hook input on stdin is a string, not a JSON object"),
    (b'{"prompt": ["When are we allowed to deploy?"]}', "the hook input's prompt is an array, not text"),
    (b'{"prompt": 42}', "the hook input's prompt is a number, not text"),
])
def test_a_hook_input_of_the_wrong_shape_says_so_in_one_line_and_still_exits_0(base, tmp_path, given, said):
    root = _copy(base, tmp_path)
    done = _run(root, ["hook", "prompt"], given, {})
    assert (done.returncode, done.stdout) == (0, b"")
    assert done.stderr.decode().startswith(f"memctl: hook prompt: nothing added: {said}")
    assert done.stderr.decode().count("\n") == 1


def test_declared_episode_types_extend_the_defaults(base, tmp_path):
    root = _copy(base, tmp_path)
    refused = _run(root, ["episode", "add", "レビューで指摘された", "--type", "review"], None, {})
    assert refused.returncode == 2
    assert ("unknown episode type 'review'; the types are decision | error | success | feedback | conflict | prompt | "
            "reply | tool") in refused.stderr.decode()
    with open(root / "memctl.toml", "a", encoding="utf-8") as toml:
        toml.write('\n[episodes]\ntypes = ["review", "incident"]\n')
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "declare review")
    added = _run(root, ["episode", "add", "レビューで指摘された", "--type", "review", "--ref", "fa", "--ref", "commit:abc123",
                        "--ref", "https://example.com/pr/1"], None, {})
    assert added.returncode == 0, added.stderr
    episode_id = added.stdout.decode().strip()
    assert _run(root, ["episode", "add", "続き", "--type", "incident", "--ref", episode_id], None, {}).returncode == 0
    listed = _run(root, ["episode", "list", "--type", "review"], None, {})
    assert listed.returncode == 0 and "レビューで指摘された" in listed.stdout.decode()
    assert "review" in _run(root, ["episode", "add", "x", "--type", "bogus"], None, {}).stderr.decode()
    # a declaration that is not a list of slugs is bad input for every command that reads memctl.toml
    with open(root / "memctl.toml", "a", encoding="utf-8") as toml:
        toml.write('\n[episodes.more]\n')
    (root / "memctl.toml").write_text((root / "memctl.toml").read_text(encoding="utf-8")
                                      .replace('types = ["review", "incident"]', 'types = ["Not A Slug"]'), encoding="utf-8")
    bad = _run(root, ["episode", "list"], None, {})
    assert bad.returncode == 2 and "[episodes] types must be a list of slugs" in bad.stderr.decode()


DECLARED = "user | feedback | project | reference | procedure"


def test_an_undeclared_fact_type_is_refused_naming_the_declared_ones_and_the_closest(base, tmp_path):
    """`--type feeback` once added a `## feeback` section to MEMORY.md; now exit 2, nothing written."""
    root = _copy(base, tmp_path)
    index = (root / "memory" / "MEMORY.md").read_bytes()
    typo = _run(root, ["remember", "deploy", "-d", "Deploys on Tuesdays", "--type", "feeback"], None, {})
    assert (typo.returncode, typo.stdout) == (2, b"")
    assert typo.stderr.decode() == (f"memctl: error: unknown fact type 'feeback'; the types are {DECLARED} (hint: did you "
                                    "mean 'feedback'? to add a type, declare it in memctl.toml: [facts] types)\n")
    banana = _run(root, ["remember", "deploy", "-d", "Deploys on Tuesdays", "--type", "banana"], None, {})
    assert banana.returncode == 2
    assert banana.stderr.decode() == (f"memctl: error: unknown fact type 'banana'; the types are {DECLARED} "
                                      "(hint: to add a type, declare it in memctl.toml: [facts] types)\n")
    assert (root / "memory" / "MEMORY.md").read_bytes() == index and not (root / "memory" / "deploy.md").exists()
    # The Python API refuses it with the same error (the MCP tool calls the same function).
    import memctl
    from memctl.errors import BadInput

    with pytest.raises(BadInput, match="unknown fact type 'Feedback'.*") as caught:
        memctl.remember(memctl.open_store(root), "deploy", "Deploys on Tuesdays", type="Feedback")
    assert caught.value.exit_code == 2 and caught.value.hint.startswith("did you mean 'feedback'?")
    assert (root / "memory" / "MEMORY.md").read_bytes() == index


def test_memctl_toml_declares_the_fact_types(base, tmp_path):
    root = _copy(base, tmp_path)
    toml = root / "memctl.toml"
    written = toml.read_text(encoding="utf-8")
    line = 'types = ["user", "feedback", "project", "reference", "procedure"]'
    assert f"[facts]\n" in written and f"\n{line}  #" in written  # init wrote it, for people to see and change
    toml.write_text(written.replace(line, 'types = ["feedback", "howto"]'), encoding="utf-8")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "declare howto")
    assert _run(root, ["remember", "howto-deploy", "-d", "How to deploy", "--type", "howto"], None, {}).returncode == 0
    refused = _run(root, ["remember", "deploy", "-d", "Deploys on Tuesdays", "--type", "project"], None, {})
    assert refused.returncode == 2 and "the types are feedback | howto (hint: " in refused.stderr.decode()
    # without --type a new fact is a project fact, or of the first declared type when project is not declared
    assert _run(root, ["remember", "plain", "-d", "A fact without a type"], None, {}).returncode == 0
    assert "\n  type: feedback\n" in (root / "memory" / "plain.md").read_text(encoding="utf-8")
    assert "## howto\n- [howto-deploy](howto-deploy.md)" in (root / "memory" / "MEMORY.md").read_text(encoding="utf-8")
    # `fa` (a project fact from before) is read as usual: listed, found, and changed when no type is given
    listed = _run(root, ["list"], None, {}).stdout.decode()
    assert "fa\tproject\tZenn投稿は1日1件まで\tmemory/fa.md\n" in listed
    assert _run(root, ["recall", "Zenn投稿"], None, {}).stdout.decode().split("\t")[3] == "fa"
    assert _run(root, ["remember", "fa", "--update", "--importance", "0.9"], None, {}).returncode == 0
    # ... a fact superseding it takes its type only when declared
    inherit = _run(root, ["remember", "fb", "-d", "Zenn: one post a day", "--supersedes", "fa"], None, {})
    assert inherit.returncode == 2 and inherit.stderr.decode().startswith(
        "memctl: error: unknown fact type 'project' (the type of fa); the types are feedback | howto (hint: ")
    for bad, message in (('types = []', "[facts] types is empty"), ('types = ["Bad Type"]', "[facts] types must be a list of slugs"),
                         ('types = "user"', "[facts] types must be a list of slugs")):
        toml.write_text(written.replace(line, bad), encoding="utf-8")
        done = _run(root, ["list"], None, {})
        assert done.returncode == 2 and message in done.stderr.decode(), (bad, done.stderr)


def test_doctor_warns_of_a_fact_on_disk_whose_type_is_not_declared(base, tmp_path):
    root = _copy(base, tmp_path)
    (root / "memory" / "old-note.md").write_text("---\nname: old-note\ndescription: 古いメモ banana\nmetadata:\n"
                                                 "  importance: 0.5\n  type: banana\n---\nbody\n", encoding="utf-8")
    assert _run(root, ["index"], None, {}).returncode == 0
    assert git(root, "status", "--porcelain", "memory") == ""  # committed with the index that links it
    done = _run(root, ["doctor"], None, {})
    assert [line for line in done.stdout.decode().splitlines() if "old-note" in line] == [
        f"memory/old-note.md:6: warning: type 'banana' is not declared ([facts] types in memctl.toml: {DECLARED}); "
        "the fact is read as usual"]
    assert "old-note\tbanana\t古いメモ banana" in _run(root, ["list"], None, {}).stdout.decode()
    assert _run(root, ["show", "old-note"], None, {}).returncode == 0



def test_doctor_names_a_description_longer_than_memctl_writes_at_its_line(base, tmp_path):
    """A fact pulled with a 96 KB description was read (and embedded) without a word: memctl writes at most
    1,000 characters of one, and a model is given the first 4,096 of a text. doctor warns at its line."""
    root = _copy(base, tmp_path)
    for name, words in (("pulled-giant", 8000), ("hand-long", 100)):
        (root / "memory" / f"{name}.md").write_text(
            f"---\nname: {name}\nmetadata:\n  type: project\ndescription: {'deploy word ' * words}\n---\nbody\n",
            encoding="utf-8")
    assert _run(root, ["index"], None, {}).returncode == 0
    done = _run(root, ["doctor"], None, {})
    assert sorted(line for line in done.stdout.decode().splitlines() if "pulled-giant" in line or "hand-long" in line
                  if "MEMORY.md" not in line) == [
        "memory/hand-long.md:5: warning: description is 1,199 characters, more than the 1,000 memctl writes "
        "(put details in the body)",
        "memory/pulled-giant.md:5: warning: description is 95,999 characters, more than the 1,000 memctl writes; "
        "a model is given its first 4,096 (put details in the body)"]
    codes = [p["code"] for p in json.loads(_run(root, ["doctor", "--json"], None, {}).stdout)["problems"]
             if p["path"] in ("memory/pulled-giant.md", "memory/hand-long.md")]
    assert codes == ["long-description", "long-description"]


def test_doctor_names_a_fact_dated_ahead_of_the_clock(base, tmp_path):
    """A fact written under a clock that ran ahead (another machine's, pushed) counted as just written in
    recall until that day and was never called stale, and doctor said nothing. More than five minutes
    ahead (clock.SKEW) is now a warning at its line; less is another clock's drift, and `expires` is
    meant to be ahead."""
    root = _copy(base, tmp_path)
    (root / "memory" / "ahead.md").write_text(
        "---\nname: ahead\ndescription: written on a laptop whose clock ran ahead\ntype: project\n"
        "created: 2026-12-01T09:04:59+09:00\nupdated: 2026-12-01T09:05:01+09:00\nexpires: 2099-01-01\n---\nbody\n",
        encoding="utf-8")
    assert _run(root, ["index"], None, {}).returncode == 0
    pinned = {"MEMCTL_NOW": "2026-12-01T09:00:00+09:00"}
    done = _run(root, ["doctor", "--json"], None, pinned)
    found = [p for p in json.loads(done.stdout)["problems"] if p["path"] == "memory/ahead.md"]
    assert [(p["line"], p["code"], p["severity"]) for p in found] == [(6, "bad-updated", "warning")]
    assert found[0]["message"] == ("updated '2026-12-01T09:05:01+09:00' is in the future (written under a clock that "
                                   "ran ahead?): until then recall counts the fact as just written and nothing calls it stale")
    later = _run(root, ["doctor", "--json"], None, {"MEMCTL_NOW": "2026-12-01T09:00:02+09:00"})
    assert [p for p in json.loads(later.stdout)["problems"] if p["path"] == "memory/ahead.md"] == []


def test_a_date_another_zone_has_begun_is_not_ahead_and_year_9999_stops_no_doctor(base, tmp_path):
    """A teammate in Tokyo writes `created: 2026-12-02` at 09:00 there; read in Los Angeles (still the 1st,
    16:00) that bare date was local midnight, 8 hours ahead, and doctor called it a wrong clock: a bare date
    is ahead only once no zone has begun that day (UTC+14). A naive `9999-12-31T23:59:59` read west of UTC
    has no instant: doctor ended in an OverflowError traceback, every day in the maintenance job (helper-91)."""
    root = _copy(base, tmp_path)
    (root / "memory" / "tokyo.md").write_text(
        "---\nname: tokyo\ndescription: written in Tokyo\ntype: project\ncreated: 2026-12-02\n"
        "updated: 9999-12-31T23:59:59\n---\nbody\n", encoding="utf-8")
    (root / "memory" / "later.md").write_text(
        "---\nname: later\ndescription: dated the day after\ntype: project\ncreated: 2026-12-03\n---\nbody\n",
        encoding="utf-8")
    assert _run(root, ["index"], None, {}).returncode == 0
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMCTL_")}, "TZ": "America/Los_Angeles",
           "MEMCTL_NOW": "2026-12-01T16:00:00-08:00", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "memctl", "--root", str(root), "doctor", "--json"], capture_output=True,
                          env=env, timeout=120, text=True)
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
    found = {(p["path"], p["code"]) for p in json.loads(done.stdout)["problems"] if p["path"] in ("memory/tokyo.md", "memory/later.md")}
    assert found == {("memory/tokyo.md", "bad-updated"), ("memory/later.md", "bad-created")}  # 9999: unreadable; the 3rd: ahead


def test_doctor_says_what_memctl_reads_for_a_hand_written_value_it_cannot_read_as_the_format_says(base, tmp_path):
    """`importance: high`, `expires: next friday`, `pinned: "yes"` were read as the default, never, and (by some
    readers) pinned, and nothing said so. Each is now a warning at its line, saying what is read instead."""
    root = _copy(base, tmp_path)
    (root / "memory" / "hand-made.md").write_text(
        "---\nname: hand-made\ndescription: 手書きのメモ deploys on Tuesdays\nmetadata:\n  type: project\n"
        "  importance: high\n  confidence: 7\n  pinned: \"false\"\n  expires: next friday\n  created: yesterday\n"
        "  updated: 2026-11-30\n---\nbody\n", encoding="utf-8")
    assert _run(root, ["index"], None, {}).returncode == 0
    assert git(root, "status", "--porcelain", "memory") == ""  # committed with the index that links it
    done = _run(root, ["doctor"], None, {})
    assert sorted(line for line in done.stdout.decode().splitlines() if "hand-made" in line) == sorted([
        "memory/hand-made.md:6: warning: importance 'high' is not a number from 0 to 1: the type's default is used",
        "memory/hand-made.md:7: warning: confidence 7 is outside 0 to 1: read as 1",
        "memory/hand-made.md:8: warning: pinned 'false' is not true or false: read as not pinned",
        "memory/hand-made.md:9: warning: expires 'next friday' is not an ISO-8601 date (YYYY-MM-DD, or with a time): "
        "the fact never expires",
        "memory/hand-made.md:10: warning: created 'yesterday' is not an ISO-8601 date (YYYY-MM-DD, or with a time): "
        "it is ignored"])
    codes = {p["code"] for p in json.loads(_run(root, ["doctor", "--json"], None, {}).stdout)["problems"]
             if p["path"] == "memory/hand-made.md"}
    assert codes == {"bad-importance", "bad-confidence", "bad-pinned", "bad-expires", "bad-created"}
    # What doctor says is what is read: not pinned by context (it once was: bool("false")), and not expired.
    context = _run(root, ["context", "--query", "Tuesdays", "--mode", "keyword", "--no-log"], None, {}).stdout.decode()
    pinned = context.split("## Pinned facts", 1)[1].split("\n## ", 1)[0] if "## Pinned facts" in context else ""
    assert "memory/hand-made.md" in context and "memory/hand-made.md" not in pinned
    assert "hand-made" in _run(root, ["recall", "Tuesdays", "--mode", "keyword", "--no-log"], None, {}).stdout.decode()
    # The values memctl writes itself give no warning.
    assert _run(root, ["remember", "written", "-d", "Written by memctl", "--pin", "--expires", "2099-01-01"],
                None, {}).returncode == 0
    assert "memory/written.md" not in _run(root, ["doctor"], None, {}).stdout.decode()


def test_state_check_without_state_md_says_so(base, tmp_path):
    root = _copy(base, tmp_path)
    done = _run(root, ["state", "check"], None, {})
    assert (done.returncode, done.stdout) == (3, b"")
    assert done.stderr.decode() == "memctl: error: no state/STATE.md yet, so nothing to check (hint: memctl state update)\n"
    assert _run(root, ["state", "update"], None, {}).returncode == 0
    fresh = _run(root, ["state", "check"], None, {})
    assert (fresh.returncode, fresh.stdout, fresh.stderr) == (0, b"", b"")


# ---------------------------------------------------------------- the library never prints

PACKAGE = Path(__file__).resolve().parent.parent / "memctl"
# Where printing belongs: the CLI, the one output module, and the two command bodies that other
# programs run (the MCP server's stdio; `memctl hook`, whose stderr line is its report by contract).
MAY_PRINT = ("cli/", "output.py", "integrations/mcp_server.py", "integrations/hooks.py",
             "integrations/mcp_fast.py", "ui/server.py")  # the last two: a server's stdio and its request log


def printing(path: Path) -> list[str]:
    """What in a module's source prints: print(), sys.stdout/sys.stderr, importing memctl.output or rich."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            found.append(f"{node.lineno}: print()")
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "sys"
              and node.attr in ("stdout", "stderr", "__stdout__", "__stderr__")):
            found.append(f"{node.lineno}: sys.{node.attr}")
        elif isinstance(node, ast.ImportFrom):
            names = {alias.name for alias in node.names}
            if node.module in ("output", "memctl.output") or (node.module in (None, "memctl") and "output" in names):
                found.append(f"{node.lineno}: imports output")
            if (node.module or "").split(".")[0] == "rich":
                found.append(f"{node.lineno}: imports rich")
        elif isinstance(node, ast.Import) and any(a.name.split(".")[0] == "rich" or a.name == "memctl.output" for a in node.names):
            found.append(f"{node.lineno}: imports {node.names[0].name}")
    return found


def test_no_library_module_prints():
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith(MAY_PRINT[0]) or rel in MAY_PRINT[1:]:
            continue
        if printing(path):
            offenders[rel] = printing(path)
    assert offenders == {}


def test_the_print_check_sees_each_way_of_printing(tmp_path):
    """So that test_no_library_module_prints can fail."""
    for source in ("print('x')\n", "import sys\nsys.stderr.write('x')\n", "from . import output\n",
                   "from .output import warn\n", "from rich.console import Console\n", "import rich\n"):
        module = tmp_path / "m.py"
        module.write_text(source, encoding="utf-8")
        assert printing(module), source
    (tmp_path / "m.py").write_text("from . import errors\nerrors.warn('x')\n", encoding="utf-8")
    assert printing(tmp_path / "m.py") == []


def test_library_warnings_go_to_logging_without_the_cli(base, tmp_path, caplog):
    """A Python user sees the library's warnings through the `memctl` logger; the CLI through its stderr lines."""
    import logging

    from memctl import errors as errors_mod, facts
    from memctl.store import open_store

    root = _copy(base, tmp_path)
    (root / "memory" / "broken.md").write_text("---\nname: broken\n  description: indented: wrongly\n---\n", encoding="utf-8")
    before = errors_mod._reporter
    errors_mod.set_reporter(None)
    try:
        with caplog.at_level(logging.WARNING, logger="memctl"):
            facts.live_facts(open_store(root))
    finally:
        errors_mod.set_reporter(before)
    assert [r.name for r in caplog.records] == ["memctl"]
    assert caplog.records[0].getMessage().startswith("skipped memory/broken.md")
    done = _run(root, ["list"], None, {})
    assert done.returncode == 0
    assert done.stderr.decode().startswith("memctl: warning: skipped memory/broken.md")


def test_doctor_prints_one_line_per_problem_for_a_file_named_with_a_newline_or_a_tab(root):
    """A file named `two\\nlines.md` (git carries such a name) split doctor's report across lines."""
    from conftest import cli

    for name in ("two\nlines", "tab\there"):
        (root / "memory" / f"{name}.md").write_text("---\nname: x\n---\nbroken, no description\n", encoding="utf-8")
    done = cli(root, "doctor")
    assert done.exit_code == 1
    lines = done.stdout.splitlines()
    assert any(line.startswith("memory/two\\x0alines.md") for line in lines), lines
    assert any(line.startswith("memory/tab\\x09here.md") for line in lines), lines
    assert all(line.startswith("memory/") for line in lines), lines  # no line is a piece of another


def test_an_mcp_tool_error_offers_no_no_commit():
    """helper-73: an MCP tool's error on a store without git said "or use --no-commit / MEMCTL_NO_COMMIT=1", an
    option no tool has."""
    from memctl.errors import GitError
    from memctl.integrations import mcp_server

    said = mcp_server._error_text(GitError("git not found", kind="no-git"))
    assert said == "memctl: error: git not found (hint: install git (or name it in MEMCTL_GIT))"
