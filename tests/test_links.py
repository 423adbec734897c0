"""Issue 29.4: no link is followed. An attacker's clone commits symbolic links (git stores them as
links) that point at a file outside the store holding a fake secret; the victim pulls them and runs
every reader: the secret is never printed, returned by MCP, injected by a hook, written into the
store or pushed (docs/RELIABILITY.md, "No link is followed").

Real git, a bare remote, two clones, `memctl` subprocesses and the MCP SDK's own stdio client.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import drop_default_jobs, fact_versions, git, memctl

ID = ("-c", "user.name=attacker", "-c", "user.email=attacker@example.com")
SECRET = "FAKE-SECRET-7f3a"
FACT = f"---\nname: leak\ndescription: {SECRET} fact\ntype: project\npinned: true\n---\n{SECRET} body\n"
OUTSIDE = {
    "fact.md": FACT,
    "state.md": f"---\nupdated: 2026-11-30T11:00:00+00:00\n---\n# State\n- {SECRET}: 1\n",
    "index.md": f"# Memory index\n\n<!-- memctl:index:begin -->\n- [Leak](leak.md) — {SECRET} index\n<!-- memctl:index:end -->\n",
    "ledger.tsv": f"k\tv\n{SECRET}\t1\n",
    "copy.md": f"---\nname: alpha\ndescription: {SECRET} copy\ntype: project\n---\n{SECRET}\n",
}
# Where the attacker's links sit in the store, and which outside file each names.
LINKS = {
    "memory/leak.md": "fact.md",
    "memory/archive/old-leak.md": "fact.md",
    "memory/memory-index/leak.md": "index.md",
    "memory/conflicts/alpha.0123abcd.md": "copy.md",
    "state/STATE.md": "state.md",
    "state/leak/STATE.md": "state.md",
    "ledgers/leak.tsv": "ledger.tsv",
    "logs/state-update.log": "ledger.tsv",
}


@pytest.fixture(autouse=True)
def _clock(pinned_clock):
    """Every command reads one pinned clock."""


@pytest.fixture
def attacked(tmp_path):
    """(victim, remote): the victim's store after pulling the attacker's links, and the bare remote."""
    outside = tmp_path / "outside"
    outside.mkdir()
    for name, text in OUTSIDE.items():
        (outside / name).write_text(text, encoding="utf-8")
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    victim = tmp_path / "victim"
    assert memctl(None, "init", str(victim)).returncode == 0
    assert memctl(victim, "remember", "alpha", "-d", "アルファの事実", "--type", "project").returncode == 0
    git(victim, "remote", "add", "origin", str(remote))
    assert memctl(victim, "sync").returncode == 0
    attacker = tmp_path / "attacker"
    subprocess.run(["git", "clone", "-q", str(remote), str(attacker)], check=True)
    for rel, name in LINKS.items():
        link = attacker / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(outside / name)
    git(attacker, "add", "-f", *LINKS)
    git(attacker, *ID, "commit", "-qm", "notes")
    git(attacker, "push", "-q", "origin", "HEAD")
    assert "120000" in git(remote, "ls-tree", "-r", "HEAD", "memory/leak.md")  # git keeps them as links
    refused = memctl(victim, "sync")  # memctl's own sync refuses links added to its files (tests/test_hostile_remote.py)
    assert refused.returncode == 1 and "nothing was merged or pushed" in refused.stderr, refused.stderr
    git(victim, *ID, "pull", "-q", "--no-rebase", "--no-edit", "origin", git(victim, "branch", "--show-current").strip())
    assert all((victim / rel).is_symlink() for rel in LINKS)  # a plain git pull takes them in: readers follow none
    return victim, remote


def no_secret(*outputs) -> None:
    for text in outputs:
        text = text if isinstance(text, str) else text.stdout + text.stderr
        assert SECRET not in text, text


def regular_files(root: Path):
    for here, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            path = Path(here) / name
            if not path.is_symlink():
                yield path


def test_no_reader_prints_what_a_link_names(attacked):
    victim, remote = attacked
    runs = {
        "list": memctl(victim, "list"),
        "list --all": memctl(victim, "list", "--all", "--json"),
        "show": memctl(victim, "show", "leak"),
        "show --json": memctl(victim, "show", "old-leak", "--json"),
        "recall": memctl(victim, "recall", "leak fact body", "--mode", "keyword", "--all", "--source", "all", "--json"),
        "context": memctl(victim, "context"),
        "context --query": memctl(victim, "context", "--query", "leak fact body"),
        "session-start": memctl(victim, "hook", "session-start", input='{"source": "startup"}'),
        "prompt hook": memctl(victim, "hook", "prompt", input='{"prompt": "what is the leak fact body?"}'),
        "state show": memctl(victim, "state", "show"),
        "state show leak": memctl(victim, "state", "show", "leak"),
        "state check": memctl(victim, "state", "check"),
        "ledger rows": memctl(victim, "ledger", "rows", "leak"),
        "ledger list": memctl(victim, "ledger", "list"),
        "conflicts": memctl(victim, "conflicts"),
        "schedule status": memctl(victim, "schedule", "status", "--tail", "5"),
        "doctor": memctl(victim, "doctor"),
    }
    no_secret(*runs.values())
    assert runs["show"].returncode == 1 and "cannot be read: memory/leak.md: a symbolic link (to " in runs["show"].stderr
    assert runs["state show"].returncode == 1 and "state/STATE.md is a symbolic link (to " in runs["state show"].stderr
    assert runs["ledger rows"].returncode == 1 and "ledgers/leak.tsv is a symbolic link" in runs["ledger rows"].stderr
    assert "skipped memory/leak.md: a symbolic link (to " in runs["list"].stderr
    assert "left out of the context: state/leak/STATE.md is a symbolic link" in runs["context"].stderr
    assert "conflict alpha.0123abcd.md left out: memory/conflicts/alpha.0123abcd.md is a symbolic link" in runs["conflicts"].stderr
    assert runs["session-start"].returncode == 0  # a hook never fails the session
    doctor = runs["doctor"]
    assert doctor.returncode == 1
    for rel in LINKS:  # each one named, once
        assert doctor.stdout.count(f"{rel}: error: a symbolic link (to ") == 1, (rel, doctor.stdout)
    for path in regular_files(victim):
        assert SECRET.encode() not in path.read_bytes(), path


def test_resolve_and_sync_never_commit_or_push_what_a_link_names(attacked):
    victim, remote = attacked
    done = memctl(victim, "resolve", "alpha", "--keep", "remote")
    assert done.returncode == 3 and "memory/conflicts/alpha.0123abcd.md is a symbolic link" in done.stderr
    no_secret(done)
    for argv in (("remember", "beta", "-d", "ベータ", "--type", "project"), ("index",), ("sync",),
                 ("forget", "alpha", "--reason", "done"), ("sync",)):
        done = memctl(victim, *argv)
        no_secret(done)
        assert done.returncode == 0, (argv, done.stderr)
    assert (victim / "memory" / "leak.md").is_symlink()
    no_secret(git(remote, "log", "-p", "--all"), git(victim, "log", "-p", "--all"))
    for path in regular_files(victim):
        assert SECRET.encode() not in path.read_bytes(), path


def test_writers_refuse_a_link_and_change_nothing_outside(attacked, tmp_path):
    victim, _ = attacked
    before = {p.name: p.read_bytes() for p in (tmp_path / "outside").iterdir()}
    for argv, rel in ((("state", "update"), "state/STATE.md"), (("ledger", "append", "leak", "k=1", "v=2"), "ledgers/leak.tsv"),
                      (("remember", "leak", "--update", "-d", "changed"), "memory/leak.md"),
                      (("run-job", "state-update"), "logs/state-update.log")):
        done = memctl(victim, *argv)
        assert done.returncode != 0, (argv, done.stderr)
        assert any(rel in line and "a symbolic link (to " in line for line in done.stderr.splitlines()), (argv, done.stderr)
        no_secret(done)
    assert {p.name: p.read_bytes() for p in (tmp_path / "outside").iterdir()} == before
    assert git(victim, "status", "--porcelain") == ""


def test_a_linked_memory_md_is_never_read_nor_served(tmp_path):
    outside = tmp_path / "index.md"
    outside.write_text(OUTSIDE["index.md"], encoding="utf-8")
    root = tmp_path / "s"
    assert memctl(None, "init", str(root)).returncode == 0
    assert memctl(root, "remember", "alpha", "-d", "アルファ", "--type", "project").returncode == 0
    index = root / "memory" / "MEMORY.md"
    index.unlink()
    index.symlink_to(outside)
    runs = [memctl(root, "context"), memctl(root, "hook", "session-start", input="{}"), memctl(root, "index", "--check"),
            memctl(root, "remember", "beta", "-d", "ベータ"), memctl(root, "doctor")]
    no_secret(*runs)
    assert "memory/MEMORY.md is a symbolic link" in runs[3].stderr and runs[3].returncode == 1
    assert "memory/MEMORY.md: error: a symbolic link (to " in runs[4].stdout
    assert outside.read_text(encoding="utf-8") == OUTSIDE["index.md"]
    mcp = pytest.importorskip("mcp")
    anyio = pytest.importorskip("anyio")

    async def serve():
        params = mcp.StdioServerParameters(command=sys.executable, args=["-m", "memctl", "mcp", "--root", str(root)],
                                           env=dict(os.environ))
        async with mcp.stdio_client(params) as (read, write):
            async with mcp.ClientSession(read, write) as client:
                await client.initialize()
                for uri in ("memctl://index", "memctl://facts/leak", "memctl://state"):
                    with pytest.raises(mcp.MCPError) as caught:
                        await client.read_resource(uri)
                    no_secret(str(caught.value))
                result = await client.call_tool("context", {})
                no_secret(str(result.content))

    (root / "memory" / "leak.md").symlink_to(tmp_path / "fact.md")
    (tmp_path / "fact.md").write_text(FACT, encoding="utf-8")
    (root / "state" / "STATE.md").symlink_to(tmp_path / "fact.md")
    anyio.run(serve)


def test_the_merge_driver_never_writes_a_conflict_copy_through_a_linked_folder(tmp_path):
    """Under a plain `git pull` git runs memctl's fact driver with no store lock: a `memory/conflicts`
    that a commit made a link to a folder outside gets nothing written into it."""
    paths = fact_versions(tmp_path)
    work = tmp_path / "work"
    (work / "memory").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (work / "memory" / "conflicts").symlink_to(elsewhere)
    done = subprocess.run([sys.executable, "-m", "memctl", "merge-driver", "fact", str(paths["base"]), str(paths["ours"]),
                           str(paths["theirs"]), "memory/n.md"], cwd=work, capture_output=True, text=True)
    assert done.returncode == 1 and "memory/conflicts is a symbolic link" in done.stderr
    assert list(elsewhere.iterdir()) == []


def test_schedule_render_never_removes_plists_in_a_folder_a_link_names(tmp_path):
    """`render` removes the plists it once rendered for jobs no longer declared: a `launchd/` that is a
    link to another folder (an agents folder, another store's) keeps every file."""
    root = tmp_path / "s"
    assert memctl(None, "init", str(root)).returncode == 0
    elsewhere = tmp_path / "agents"
    elsewhere.mkdir()
    # A plist as render writes them, for a job this store does not declare.
    assert memctl(root, "schedule", "render").returncode == 0
    rendered = next((root / "launchd").glob("*.plist"))
    (elsewhere / "io.memctl.s.gone.plist").write_bytes(rendered.read_bytes().replace(b"state-update", b"gone"))
    shutil.rmtree(root / "launchd")
    (root / "launchd").symlink_to(elsewhere)
    drop_default_jobs(root)  # nothing to write: render would only remove
    done = memctl(root, "schedule", "render")
    assert done.returncode == 1 and "launchd is a symbolic link" in done.stderr
    assert sorted(p.name for p in elsewhere.iterdir()) == ["io.memctl.s.gone.plist"]
