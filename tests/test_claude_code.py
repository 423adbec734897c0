"""Claude Code settings: install plans, idempotence, foreign keys kept, exact uninstall, bad files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memctl.errors import BadInput, NotFound
from memctl.integrations import claude_code as cc

EXE = ["/opt/venv/bin/memctl"]


def _write(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=4) + "\n", encoding="utf-8")


def _read(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def _install(tgt, root=None):
    changes = cc.plan_install(tgt, EXE, root)
    cc.apply(changes)
    return changes


FOREIGN_SETTINGS = {
    "model": "opus",
    "permissions": {"allow": ["Bash(git status)"]},
    "hooks": {
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "echo 'their own hook'"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./check.sh"}]}],
    },
}


def test_install_writes_both_hooks_and_the_server(tmp_path):
    tgt = cc.target("project", tmp_path, home=tmp_path / "home")
    changes = _install(tgt)
    assert [c.path for c in changes] == [tmp_path / ".claude" / "settings.json", tmp_path / ".mcp.json"]
    settings = _read(tgt.settings)
    start = settings["hooks"]["SessionStart"]
    assert start == [{"matcher": "startup|resume|clear|compact",
                      "hooks": [{"type": "command", "command": "/opt/venv/bin/memctl hook session-start", "timeout": 30}]}]
    assert settings["hooks"]["UserPromptSubmit"] == [
        {"hooks": [{"type": "command", "command": "/opt/venv/bin/memctl hook prompt", "timeout": 10}]}]
    assert _read(tmp_path / ".mcp.json") == {"mcpServers": {"memctl": {
        "type": "stdio", "command": "/opt/venv/bin/memctl", "args": ["mcp"], "env": {"MEMCTL_AGENT": "claude-code"}}}}


def test_install_twice_changes_nothing(tmp_path):
    tgt = cc.target("project", tmp_path, home=tmp_path / "home")
    _install(tgt, root="/stores/a b")
    before = {p: p.read_bytes() for p in (tgt.settings, tgt.mcp_file)}
    assert cc.plan_install(tgt, EXE, "/stores/a b") == []
    assert {p: p.read_bytes() for p in before} == before
    assert "--root '/stores/a b' hook prompt" in tgt.settings.read_text(encoding="utf-8")


def test_reinstall_with_another_root_replaces_the_hook(tmp_path):
    tgt = cc.target("project", tmp_path, home=tmp_path / "home")
    _install(tgt, root="/stores/a")
    changes = _install(tgt, root="/stores/b")
    assert changes
    groups = _read(tgt.settings)["hooks"]["UserPromptSubmit"]
    assert [h["command"] for g in groups for h in g["hooks"]] == ["/opt/venv/bin/memctl --root /stores/b hook prompt"]
    assert _read(tgt.mcp_file)["mcpServers"]["memctl"]["args"] == ["mcp", "--root", "/stores/b"]


def test_foreign_keys_and_hooks_are_kept_and_uninstall_restores_them(tmp_path):
    tgt = cc.target("project", tmp_path, home=tmp_path / "home")
    _write(tgt.settings, FOREIGN_SETTINGS)
    _write(tgt.mcp_file, {"mcpServers": {"other": {"command": "other-server"}}, "x": 1})
    _install(tgt)
    settings = _read(tgt.settings)
    assert settings["model"] == "opus" and settings["permissions"] == FOREIGN_SETTINGS["permissions"]
    assert settings["hooks"]["PreToolUse"] == FOREIGN_SETTINGS["hooks"]["PreToolUse"]
    commands = [h["command"] for g in settings["hooks"]["UserPromptSubmit"] for h in g["hooks"]]
    assert commands == ["echo 'their own hook'", "/opt/venv/bin/memctl hook prompt"]
    assert set(_read(tgt.mcp_file)["mcpServers"]) == {"other", "memctl"}

    cc.apply(cc.plan_uninstall(tgt))
    assert _read(tgt.settings) == FOREIGN_SETTINGS
    assert _read(tgt.mcp_file) == {"mcpServers": {"other": {"command": "other-server"}}, "x": 1}
    assert cc.plan_uninstall(tgt) == []


def test_uninstall_removes_files_that_held_only_memctl(tmp_path):
    tgt = cc.target("project", tmp_path, home=tmp_path / "home")
    _install(tgt)
    cc.apply(cc.plan_uninstall(tgt))
    assert not tgt.settings.exists() and not tgt.mcp_file.exists()


def test_a_hook_sharing_a_group_with_a_foreign_one(tmp_path):
    """A hand edit put memctl's hook and another into one group, with a timeout of its own: install keeps
    the group and the timeout (only the program, memctl's part, is brought up to date), and uninstall
    touches only memctl's."""
    tgt = cc.target("project", tmp_path, home=tmp_path / "home")
    _write(tgt.settings, {"hooks": {"UserPromptSubmit": [{"hooks": [
        {"type": "command", "command": "echo mine"},
        {"type": "command", "command": "/old/bin/memctl hook prompt", "timeout": 20}]}]}})
    _install(tgt)
    groups = _read(tgt.settings)["hooks"]["UserPromptSubmit"]
    assert groups == [{"hooks": [{"type": "command", "command": "echo mine"},
                                 {"type": "command", "command": "/opt/venv/bin/memctl hook prompt", "timeout": 20}]}]
    assert cc.plan_install(tgt, EXE, None) == []
    prefixed = "MEMCTL_HOOK_TIMEOUT=8 /opt/venv/bin/memctl hook prompt"  # an environment prefix: still memctl's, kept
    doc = _read(tgt.settings)
    doc["hooks"]["UserPromptSubmit"][0]["hooks"][1]["command"] = prefixed
    _write(tgt.settings, doc)
    assert cc.plan_install(tgt, EXE, None) == []
    # another store (or program): memctl's part is brought up to date, the prefix stays (it was dropped)
    cc.apply(cc.plan_install(tgt, EXE, None, store="/s/記憶 store"))
    assert _read(tgt.settings)["hooks"]["UserPromptSubmit"][0]["hooks"][1]["command"] == \
        "MEMCTL_HOOK_TIMEOUT=8 /opt/venv/bin/memctl hook prompt --store '/s/記憶 store'"
    cc.apply(cc.plan_uninstall(tgt))
    assert _read(tgt.settings) == {"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": "echo mine"}]}]}}


def test_local_scope_uses_the_project_entry_of_claude_json(tmp_path):
    home = tmp_path / "home"
    project = tmp_path / "proj"
    project.mkdir()
    claude_json = home / ".claude.json"
    original = {"numStartups": 3, "projects": {"/elsewhere": {"mcpServers": {}, "allowedTools": []}}}
    _write(claude_json, original)
    tgt = cc.target("local", project, home=home)
    assert tgt.settings == project.resolve() / ".claude" / "settings.local.json"
    _install(tgt)
    data = _read(claude_json)
    assert data["numStartups"] == 3 and data["projects"]["/elsewhere"] == original["projects"]["/elsewhere"]
    assert data["projects"][str(project.resolve())]["mcpServers"]["memctl"]["command"] == EXE[0]
    cc.apply(cc.plan_uninstall(tgt))
    assert _read(claude_json) == original
    assert not tgt.settings.exists()


def test_user_scope_paths(tmp_path, monkeypatch):
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    tgt = cc.target("user", tmp_path / "proj", home=tmp_path / "home")
    assert tgt.settings == tmp_path / "home" / ".claude" / "settings.json"
    assert (tgt.mcp_file, tgt.mcp_keys) == (tmp_path / "home" / ".claude.json", ("mcpServers",))


@pytest.mark.parametrize("content, words", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "not a JSON object"),
    ('{"hooks": []}', "'hooks' is not a JSON object"),
    ('{"hooks": {"UserPromptSubmit": {}}}', "'UserPromptSubmit' is not a JSON array"),
], ids=["invalid", "array", "hooks-array", "event-object"])
def test_bad_settings_refused_before_anything_is_written(tmp_path, content, words):
    tgt = cc.target("project", tmp_path, home=tmp_path / "home")
    tgt.settings.parent.mkdir(parents=True)
    tgt.settings.write_text(content, encoding="utf-8")
    with pytest.raises(BadInput) as caught:
        cc.install("project", tmp_path, home=tmp_path / "home")
    assert words in caught.value.message and caught.value.hint
    assert tgt.settings.read_text(encoding="utf-8") == content
    assert not tgt.mcp_file.exists()


def test_unknown_scope():
    with pytest.raises(BadInput, match="unknown scope"):
        cc.target("global", Path("/tmp"))


@pytest.mark.parametrize("command, args", [
    ("/v/bin/memctl hook prompt", ["hook", "prompt"]),
    ("'/my venv/bin/memctl' --root '/a b' hook session-start", ["hook", "session-start"]),
    ("/usr/bin/python3 -m memctl --root=/s hook prompt", ["hook", "prompt"]),
    ("echo memctl hook prompt", None),
    ("/bin/memctl-other hook prompt", None),
    ("memctl 'unterminated", None),
], ids=["plain", "quoted-root", "python-m", "echo", "other-program", "bad-quoting"])
def test_memctl_commands_are_recognised(command, args):
    assert cc.memctl_args(command) == args


def test_status_names_what_is_installed(tmp_path):
    home = tmp_path / "home"
    _install(cc.target("project", tmp_path, home=home))
    rows = {r["scope"]: r for r in cc.status(tmp_path, home=home)}
    assert set(rows["project"]["hooks"]) == {"SessionStart", "UserPromptSubmit"}
    assert rows["project"]["mcp"] == "/opt/venv/bin/memctl mcp"
    assert "/opt/venv/bin/memctl does not exist" in " ".join(rows["project"]["problems"])
    entries = {e["item"]: e for e in rows["project"]["entries"]}
    assert set(entries) == {"SessionStart hook", "UserPromptSubmit hook", "MCP server"}
    assert all(e["answers"] is False and e["store"] is None for e in entries.values())
    assert "/opt/venv/bin/memctl" in entries["UserPromptSubmit hook"]["error"]  # sh: ... not found
    assert entries["MCP server"]["error"] == "/opt/venv/bin/memctl: No such file or directory"
    assert rows["user"]["hooks"] == {} and rows["user"]["mcp"] is None and rows["user"]["entries"] == []


def test_project_memory_dir_follows_claude_codes_naming(tmp_path, monkeypatch):
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    assert cc.project_key(Path("/Users/me/my proj.x/日本")) == "-Users-me-my-proj-x---"
    assert cc.project_memory_dir(Path("/w/p"), home=tmp_path) == tmp_path / ".claude" / "projects" / "-w-p" / "memory"


@pytest.mark.parametrize("path, name", [
    ("/tmp/rocket 🚀 app", "-tmp-rocket----app"),  # an emoji is two UTF-16 units: two dashes (memctl made one)
    ("/x/" + "a" * 250, "-x-" + "a" * 197 + "-bjrb96"),  # past 200: cut, and a base-36 hash of the whole path
    ("/home/me/" + "日本語のプロジェクト" * 25, "-home-me" + "-" * 192 + "-qqvfbx"),
    ("/tmp/" + "z" * 195, "-tmp-" + "z" * 195),  # exactly 200: as it is
])
def test_a_project_folder_is_named_as_claude_code_2_1_names_it(path, name):
    """Claude Code 2.1.197's own function (read from its binary) gave these names; memctl gave others for
    an emoji and past 200 characters, so a hook or `agent install` missed the project's memory."""
    assert cc.project_key(Path(path)) == name


def test_the_memory_folder_is_named_after_the_git_root_a_worktree_after_its_main_checkout(tmp_path, monkeypatch):
    """Claude Code keeps a project's auto memory under the name of its git root: a hook run from a
    subfolder (or a linked worktree) looked under the subfolder's name and found no store."""
    import subprocess

    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    repo = tmp_path / "repo"
    (repo / "pkg" / "deep").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty",
                    "-m", "x"], check=True)
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", str(tmp_path / "wt")], check=True)
    expected = tmp_path / ".claude" / "projects" / cc.project_key(repo) / "memory"
    for place in (repo, repo / "pkg" / "deep", tmp_path / "wt"):
        assert cc.project_memory_dir(place, home=tmp_path) == expected, place
    outside = tmp_path / "plain"
    outside.mkdir()
    assert cc.project_memory_dir(outside, home=tmp_path) == tmp_path / ".claude" / "projects" / cc.project_key(outside) / "memory"


def test_snippet_is_short_and_names_the_three_habits():
    lines = cc.SNIPPET.rstrip("\n").splitlines()
    assert len(lines) <= 15
    for word in ("recall", "remember", "episode"):
        assert word in cc.SNIPPET


def test_which_store_a_hook_or_the_server_uses(tmp_path, monkeypatch, root):
    """--root > MEMCTL_ROOT > from cwd > from CLAUDE_PROJECT_DIR (each: its memory directory, else the
    nearest store at or above it) > the store named at install."""
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    home = Path(__import__("os").environ["HOME"])
    project, elsewhere, named = tmp_path / "proj", tmp_path / "elsewhere", tmp_path / "named"
    for folder in (project, elsewhere, named):
        folder.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("CLAUDE_PROJECT_DIR", raising=False)
    with pytest.raises(NotFound, match="no memctl store found from "):
        cc.locate()
    assert cc.locate(store=named) == cc.Found(named.resolve(), "--store")
    with pytest.raises(NotFound, match="the store named at install does not exist"):
        cc.locate(store=tmp_path / "gone")
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(root / "sub"))
    assert cc.locate(store=named) == cc.Found(root.resolve(), "CLAUDE_PROJECT_DIR")  # the store above it
    memory = cc.project_memory_dir(project)
    assert memory == home / ".claude" / "projects" / cc.project_key(project) / "memory"
    memory.mkdir(parents=True)
    (memory / "MEMORY.md").write_text("# Memory index\n", encoding="utf-8")
    assert cc.locate(cwd=project, store=named) == cc.Found(memory.resolve(), "cwd")  # before CLAUDE_PROJECT_DIR
    monkeypatch.chdir(project)
    assert cc.resolve_root() == memory.resolve()  # the working directory when no cwd is given
    assert cc.locate(str(root), cwd=project) == cc.Found(root.resolve(), "--root")  # --root wins
    monkeypatch.setenv("MEMCTL_ROOT", str(root))
    assert cc.locate(cwd=project) == cc.Found(root.resolve(), "MEMCTL_ROOT")  # and MEMCTL_ROOT
