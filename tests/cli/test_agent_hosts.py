"""`agent install|uninstall|status codex|gemini|cursor` and `--all` (issue 26, point 1): each host's own
files and formats, other keys and comments kept, installing twice changes nothing, uninstall gives
every file back byte for byte and removes what install created (one test per host and scope); bad
files (not valid TOML/JSON, a symbolic link) are refused with one line and left untouched; the hooks
print the JSON each host reads."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest

from conftest import cli, memctl
from memctl.integrations import codex_toml, hosts

# The files as a person or the host left them: comments, no final newline, tabs, Japanese, other servers.
CODEX_CONFIG = '# 私の設定\nmodel = "o3"  # keep this\n\n[mcp_servers.docs]\ncommand = "docs-server"\nargs = ["--port", "1"]'
# (JSON comes back byte for byte in one consistent layout, as the hosts write it: JSON.stringify's, or any one indent.)
GEMINI_SETTINGS = json.dumps({"theme": "ダーク", "mcpServers": {"docs": {"command": "docs-server"}},
                              "hooks": {"AfterTool": [{"hooks": [{"type": "command", "command": "./log.sh"}]}]}},
                             ensure_ascii=False, indent="\t")
CURSOR_MCP = json.dumps({"mcpServers": {"docs": {"url": "http://localhost:1/mcp"}}}, indent=4) + "\n"
CURSOR_HOOKS = json.dumps({"version": 1, "hooks": {"afterFileEdit": [{"command": "./fmt.sh"}]}}, indent=2)
PREPARED = {"codex": {"config.toml": CODEX_CONFIG}, "gemini": {"settings.json": GEMINI_SETTINGS},
            "cursor": {"mcp.json": CURSOR_MCP, "hooks.json": CURSOR_HOOKS}}


def _snapshot(*places: Path) -> dict[str, bytes | None]:
    seen: dict[str, bytes | None] = {}
    for place in places:
        for path in [place, *(sorted(place.rglob("*")) if place.is_dir() else [])]:
            if path.exists():
                seen[str(path)] = path.read_bytes() if path.is_file() else None
    return seen


def _folder(host: str, scope: str, home: Path, project: Path) -> Path:
    return (project if scope == "project" else home) / hosts.HOST[host].folder


@pytest.mark.parametrize("host", hosts.HOSTS)
@pytest.mark.parametrize("scope", hosts.SCOPES)
def test_install_twice_then_uninstall_leaves_no_trace(tmp_path, host, scope, root):
    """The user scope starts from the host's own files; the project scope from nothing at all."""
    home = Path(os.environ["HOME"])
    project = tmp_path / "プロジェクト"
    project.mkdir()
    folder = _folder(host, scope, home, project)
    if scope == "user":
        folder.mkdir()
        for name, text in PREPARED[host].items():
            (folder / name).write_text(text, encoding="utf-8")
    before = _snapshot(home, project)
    args = ("--scope", scope, "--project", str(project))

    done = cli(None, "agent", "install", host, *args, "--store", str(root), "--transcripts")
    assert done.exit_code == 0, done.stderr
    # What keeps the agent from using a project's files, as found with Codex 0.171 and Gemini CLI 0.61, is said.
    caveat = {"codex": "does not trust", "gemini": "does not load a project's policy files"}.get(host)
    assert (caveat in done.stderr) == (scope == "project") if caveat else "warning" not in done.stderr, done.stderr
    installed = _snapshot(home, project)
    assert installed != before
    _check_installed(host, folder, root)
    again = cli(None, "agent", "install", host, *args, "--store", str(root), "--transcripts")
    assert again.exit_code == 0, again.stderr
    assert "nothing changed" in again.stderr and _snapshot(home, project) == installed

    if scope == "project" and host != "gemini":  # status runs each entry once (server, hooks): slow; Codex's TOML and
        # Claude-shaped hooks, Cursor's JSON and flat hooks cover what Gemini's files have
        status = cli(None, "agent", "status", host, "--project", str(project), "--json")
        if host == "codex":  # installed and answering, but Codex reads a project's files only in a folder it trusts
            assert status.exit_code == 1 and "does not trust" in status.stderr, status.stderr
            trusted = home / ".codex" / "config.toml"
            trusted.parent.mkdir()
            trusted.write_text(f'[projects."{project.resolve()}"]\ntrust_level = "trusted"\n', encoding="utf-8")
            status = cli(None, "agent", "status", host, "--project", str(project), "--json")
            trusted.unlink()
            trusted.parent.rmdir()
        assert status.exit_code == 0, status.stderr
        row = next(r for r in json.loads(status.stdout) if r["scope"] == scope)
        answering = {e["item"] for e in row["entries"] if e["answers"] and e["store"] == str(root)}
        assert answering == {"MCP server", *(f"{hook.event} hook" for hook in hosts.HOST[host].hooks)}
        assert hosts.HOST[host].end_hook.event in row["hooks"]  # listed; `episode import` is not run by status

    done = cli(None, "agent", "uninstall", host, *args)
    assert done.exit_code == 0, done.stderr
    assert _snapshot(home, project) == before


def _check_installed(host: str, folder: Path, root: Path) -> None:
    """Each host's entry in its own format, the other keys and comments still there."""
    if host == "codex":
        text = (folder / "config.toml").read_text(encoding="utf-8")
        doc = tomllib.loads(text)
        server = doc["mcp_servers"]["memctl"]
        assert server["args"][-2:] == ["--store", str(root)] and server["env"] == {"MEMCTL_AGENT": "codex"}
        assert {t: v["approval_mode"] for t, v in server["tools"].items()} == {t: "approve" for t in hosts.READ_TOOLS}
        assert "remember" not in server["tools"]  # write tools keep Codex's own approval
        hooks = json.loads((folder / "hooks.json").read_text(encoding="utf-8"))["hooks"]
        assert set(hooks) == {"SessionStart", "UserPromptSubmit", "SessionEnd"}
        assert hooks["UserPromptSubmit"][0]["hooks"][0]["command"].split()[-4:-2] == ["--host", "codex"]
        if (folder / "config.toml").exists() and "私の設定" in text:
            assert text.startswith(CODEX_CONFIG) and doc["mcp_servers"]["docs"]["command"] == "docs-server"
    elif host == "gemini":
        settings = json.loads((folder / "settings.json").read_text(encoding="utf-8"))
        assert settings["mcpServers"]["memctl"]["env"] == {"MEMCTL_AGENT": "gemini"}
        assert "trust" not in settings["mcpServers"]["memctl"]  # it would approve the write tools too
        assert {"SessionStart", "BeforeAgent", "SessionEnd"} <= set(settings["hooks"])
        assert settings["hooks"]["BeforeAgent"][0]["hooks"][0]["timeout"] == 10000  # milliseconds
        policy = tomllib.loads((folder / "policies" / "memctl.toml").read_text(encoding="utf-8"))["rule"]
        assert policy == [{"mcpName": "memctl", "toolName": [f"mcp_memctl_{t}" for t in hosts.READ_TOOLS],
                           "decision": "allow", "priority": 100}]
    else:
        assert json.loads((folder / "mcp.json").read_text(encoding="utf-8"))["mcpServers"]["memctl"]["args"][0] == "mcp"
        doc = json.loads((folder / "hooks.json").read_text(encoding="utf-8"))
        assert doc["version"] == 1 and {"sessionStart", "sessionEnd"} <= set(doc["hooks"])
        assert "beforeSubmitPrompt" not in doc["hooks"]  # Cursor's prompt hook cannot add context


@pytest.mark.parametrize(("host", "name", "text", "said", "code"), [
    ("codex", "config.toml", 'model = "o3"\n[mcp_servers\n', "not valid TOML", 2),
    ("codex", "config.toml", 'mcp_servers = { docs = { command = "x" } }\n', "not valid TOML", 2),  # inline: no new table
    ("codex", "config.toml", '[mcp_servers.memctl]\ncommand = "mine"\n', "memctl did not write", 1),
    ("gemini", "settings.json", '{"theme": "dark",}', "not valid JSON", 2),
    ("gemini", "settings.json", '{\n  // my theme, "a // b" kept\n  "ui": {"theme": "GitHub", "u": "http://x"} /* c */\n}\n',
     "has comments (// or /* */), which memctl cannot keep", 2),
    ("gemini", "policies/memctl.toml", '[[rule]]\ntoolName = "x"\ndecision = "deny"\npriority = 1\n', "memctl did not write", 1),
    ("cursor", "hooks.json", '{"version": 1, "hooks": []}', "'hooks' is not a JSON object", 2),
])
def test_a_bad_config_file_is_refused_and_left_untouched(tmp_path, root, host, name, text, said, code):
    project = tmp_path / "p"
    bad = project / hosts.HOST[host].folder / name
    bad.parent.mkdir(parents=True)
    bad.write_text(text, encoding="utf-8")
    before = _snapshot(project)
    done = memctl(None, "agent", "install", host, "--project", str(project), "--store", str(root))
    assert done.returncode == code and done.stdout == ""
    assert done.stderr.startswith("memctl: error: ") and said in done.stderr and len(done.stderr.splitlines()) == 1
    assert _snapshot(project) == before


@pytest.mark.parametrize("host, folder, name", [("gemini", ".gemini", "settings.json"), ("claude-code", ".claude", "settings.json"),
                                                ("claude-code", ".", ".mcp.json")])
def test_a_config_file_that_is_a_symlink_is_refused(tmp_path, root, host, folder, name):
    """Claude Code's settings (a dotfiles repository's link, say) were replaced by a plain file: the
    link was gone for good, and the dotfiles never got the hooks. Every host refuses a link now."""
    project = tmp_path / "p"
    (project / folder).mkdir(parents=True, exist_ok=True)
    real = tmp_path / "real-settings.json"
    real.write_text('{"theme": "dark"}\n', encoding="utf-8")
    (project / folder / name).symlink_to(real)
    for verb in ("install", "uninstall"):
        done = memctl(None, "agent", verb, host, "--project", str(project), *(("--store", str(root)) if verb == "install" else ()))
        assert done.returncode == 2, done.stderr
        assert "is a symbolic link" in done.stderr and len(done.stderr.splitlines()) == 1
        assert real.read_text(encoding="utf-8") == '{"theme": "dark"}\n' and (project / folder / name).is_symlink()


def test_install_all_wires_every_host_found(tmp_path, root):
    home = Path(os.environ["HOME"])
    (home / ".codex").mkdir()
    (home / ".cursor").mkdir()
    env = {"PATH": "/usr/bin:/bin"}  # no claude, codex, gemini or cursor program on it
    done = memctl(None, "agent", "install", "--all", "--scope", "user", "--store", str(root), "--dry-run", "--json", env=env)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["found"] == [f"codex: {home / '.codex'}", f"cursor: {home / '.cursor'}"]
    assert {Path(c["path"]).parent.name for c in shown["changes"]} == {".codex", ".cursor"}
    assert not (home / ".codex" / "config.toml").exists()  # a dry run
    none = memctl(None, "agent", "install", "--all", "--store", str(root), env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "empty")})
    assert none.returncode == 2 and "no agent found" in none.stderr


def test_hooks_print_the_json_each_host_reads(root):
    """Fast path and Typer path alike: JSON only on stdout (Gemini CLI rejects anything else), the text in
    the field the host reads, under its own event name."""
    done = memctl(root, "remember", "deploy-window", "-t", "feedback", "-d", "本番デプロイは金曜に行わない")
    assert done.returncode == 0, done.stderr
    payload = json.dumps({"cwd": str(root), "prompt": "金曜 デプロイ", "hook_event_name": "x"})
    for host, event, name in [("codex", "session-start", "SessionStart"), ("gemini", "prompt", "BeforeAgent"),
                              ("codex", "prompt", "UserPromptSubmit"), ("cursor", "session-start", None)]:
        for fast in ("0", "1") if host != "codex" or event == "prompt" else ("0",):
            ran = memctl(None, "hook", event, "--host", host, "--store", str(root), input=payload, env={"MEMCTL_NO_FAST": fast})
            assert ran.returncode == 0 and ran.stderr == "", (host, event, ran.stderr)
            printed = json.loads(ran.stdout)
            if name is None:
                assert list(printed) == ["additional_context"]
                context = printed["additional_context"]
            else:
                assert printed["hookSpecificOutput"]["hookEventName"] == name
                context = printed["hookSpecificOutput"]["additionalContext"]
            assert "本番デプロイは金曜に行わない" in context


def test_cursor_prompt_hook_prints_nothing_and_says_why(root):
    ran = memctl(None, "hook", "prompt", "--host", "cursor", "--store", str(root), input='{"prompt": "deploy"}')
    assert ran.returncode == 0 and ran.stdout == "" and "cannot add context" in ran.stderr


def test_a_hook_with_an_unknown_host_still_exits_0_and_says_why_in_memctls_words(root):
    """Exit 0 (2 would block the user's prompt in Claude Code), with one line naming the hosts and how to
    rewrite the command: it said `ValueError: unknown host 'claude'` (helper-67)."""
    ran = memctl(None, "hook", "prompt", "--host", "claude", "--store", str(root), input='{"prompt": "deploy"}')
    assert ran.returncode == 0 and ran.stdout == ""
    assert ran.stderr.count("\n") == 1 and "ValueError" not in ran.stderr, ran.stderr
    assert "unknown host 'claude': one of claude-code, codex, gemini, cursor" in ran.stderr
    assert "memctl agent install" in ran.stderr


def test_install_says_when_the_named_store_is_not_the_one_the_hooks_will_use(tmp_path, root):
    """A store found from the project comes first (docs/AGENTS.md, "Which store"): `--store OTHER` was
    accepted without a word while the hooks and the server used the project's store (helper-67)."""
    other = tmp_path / "other"
    assert memctl(None, "init", str(other)).returncode == 0
    done = memctl(None, "agent", "install", "claude-code", "--project", str(root), "--store", str(other), "--dry-run")
    assert done.returncode == 0, done.stderr
    assert f"--store {other} is where the hooks and the MCP server go when they find no store" in done.stderr
    assert f"they find {root.resolve()} and use it" in done.stderr and f"memctl --root {other} agent install" in done.stderr
    alone = tmp_path / "project"
    alone.mkdir()
    done = memctl(None, "agent", "install", "claude-code", "--project", str(alone), "--store", str(other), "--dry-run")
    assert done.returncode == 0 and "is where the hooks" not in done.stderr, done.stderr


def test_gemini_hook_with_nothing_to_add_prints_an_empty_object(tmp_path):
    """Gemini CLI shows stderr to the user when stdout is empty: `{}` keeps the note a log line."""
    ran = memctl(None, "hook", "prompt", "--host", "gemini", input=json.dumps({"cwd": str(tmp_path), "prompt": "deploy"}))
    assert ran.returncode == 0 and ran.stdout == "{}\n" and "no memctl store found" in ran.stderr


# ---------------------------------------------------------------- codex_toml, in-process

SERVER = {"name": "memctl", "command": "/x/memctl", "args": ["mcp", "--store", "/s/メモ"], "env": {"MEMCTL_AGENT": "codex"}}


@pytest.mark.parametrize("text", [None, "", "a = 1\n", "a = 1", "# only a comment", "[t]\nb = 'x'\r\n",
                                  "[mcp_servers.other]\ncommand = \"o\"\n\n", "a = 1\r\nb = 2", "a = 1\r\n"])
def test_codex_block_goes_in_and_out_byte_for_byte(text):
    path = Path("config.toml")
    new = codex_toml.with_block(text, SERVER, hosts.READ_TOOLS, path)
    assert tomllib.loads(new)["mcp_servers"]["memctl"]["args"] == SERVER["args"]
    assert codex_toml.with_block(new, SERVER, hosts.READ_TOOLS, path) == new  # idempotent
    changed = codex_toml.with_block(new, {**SERVER, "args": ["mcp"]}, hosts.READ_TOOLS, path)
    assert changed.count(codex_toml.BEGIN) == 1 and tomllib.loads(changed)["mcp_servers"]["memctl"]["args"] == ["mcp"]
    assert codex_toml.without_block(changed, path, "memctl") == (text, True)
    assert codex_toml.without_block(text or "", path, "memctl") == (text or "", False)


def test_a_tool_approval_of_yours_for_memctls_server_neither_blocks_install_nor_is_orphaned_by_uninstall(tmp_path, root):
    """A user who approved memctl's `remember` in config.toml (after memctl's block, the natural place)
    then ran uninstall: the block went, the `[mcp_servers.memctl.tools.remember]` table stayed alone,
    and Codex refused to start ("invalid transport in `mcp_servers.memctl`"); a reinstall was refused as
    a table memctl did not write. Uninstall now refuses, naming the table, and changes nothing; a
    reinstall keeps the approval."""
    home = Path(os.environ["HOME"])
    config = home / ".codex" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(CODEX_CONFIG + "\n", encoding="utf-8")
    assert cli(None, "agent", "install", "codex", "--scope", "user", "--store", str(root)).exit_code == 0
    with open(config, "a", encoding="utf-8") as handle:
        handle.write('\n[mcp_servers.memctl.tools.remember]\napproval_mode = "approve"\n')
    approved = config.read_bytes()
    again = cli(None, "agent", "install", "codex", "--scope", "user", "--store", str(root))
    assert again.exit_code == 0, again.stderr
    assert tomllib.loads(config.read_text(encoding="utf-8"))["mcp_servers"]["memctl"]["tools"]["remember"]["approval_mode"] == "approve"
    assert config.read_bytes() == approved
    gone = cli(None, "agent", "uninstall", "codex", "--scope", "user")
    assert gone.exit_code == 1 and "[mcp_servers.memctl.tools.remember]" in gone.stderr, gone.stderr
    assert config.read_bytes() == approved


def test_the_read_tools_are_the_servers_tools_that_only_read(root):
    """READ_TOOLS (approved without a prompt in Codex and Gemini CLI) names real tools, and, where the
    server declares annotations, exactly those whose readOnlyHint is true."""
    import anyio

    from memctl.integrations.mcp_server import build

    tools = anyio.run(build(root).list_tools)
    names = {tool.name for tool in tools}
    assert set(hosts.READ_TOOLS) < names and {"remember", "forget", "episode_add", "ledger_append"} <= names - set(hosts.READ_TOOLS)
    for tool in tools:
        hint = getattr(tool.annotations, "readOnlyHint", None)
        if hint is not None:
            assert hint == (tool.name in hosts.READ_TOOLS), tool.name


def _commands(doc) -> list[str]:
    """Every hook command string in a host's hook file, wherever its layout puts it."""
    if isinstance(doc, dict):
        return [c for key, value in doc.items() for c in ([value] if key == "command" and isinstance(value, str)
                                                            else _commands(value))]
    return [c for value in doc for c in _commands(value)] if isinstance(doc, list) else []


@pytest.mark.parametrize("host, fixture", [
    ("codex", "codex/rollout-2026-05-12T09-00-00-7f3c2a10-3333-4a7b-9c1d-000000000003.jsonl"),
    ("gemini", "gemini/session-2026-05-13T10-00-8d4e5f60.jsonl"),
    ("cursor", "cursor/9e5f6a70-6666-4a7b-9c1d-000000000006/9e5f6a70-6666-4a7b-9c1d-000000000006.jsonl")])
def test_the_installed_session_end_hook_imports_the_session_through_sh(tmp_path, host, fixture, root, pinned_clock):
    """As the host runs it: the command from its hook file through `sh -c`, the hook's JSON on stdin,
    from a working directory that is no store (the store named at install answers)."""
    import shutil
    import subprocess

    from conftest import REPO

    project = tmp_path / "proj"
    project.mkdir()
    done = cli(None, "agent", "install", host, "--scope", "project", "--project", str(project), "--store", str(root),
               "--transcripts")
    assert done.exit_code == 0, done.stderr
    folder = project / hosts.HOST[host].folder
    ends = [c for f in folder.rglob("*.json") for c in _commands(json.loads(f.read_text(encoding="utf-8")))
            if "episode import" in c]
    assert len(ends) == 1 and f"episode import {host} --hook" in ends[0], ends
    transcript = shutil.copy(REPO / "tests" / "fixtures" / fixture, tmp_path / Path(fixture).name)
    hook_input = json.dumps({"session_id": "s", "transcript_path": str(transcript), "cwd": str(project),
                             "hook_event_name": "SessionEnd"})
    run = subprocess.run(["sh", "-c", ends[0]], input=hook_input, capture_output=True, text=True, cwd=project,
                         timeout=120)
    assert (run.returncode, run.stdout) == (0, ""), run.stderr
    assert "imported 4 episodes from 1 transcript" in run.stderr, run.stderr
    assert len(json.loads(memctl(root, "episode", "list", "--json").stdout)) >= 4


@pytest.mark.parametrize("host", ["codex", "claude-code"])
def test_a_config_file_with_windows_line_ends_keeps_them_and_comes_back_byte_for_byte(tmp_path, root, host):
    """A config written on Windows (CRLF), as a teammate may commit a project's .claude/settings.json:
    install writes CRLF lines only, uninstall gives the bytes back."""
    home = Path(os.environ["HOME"])
    if host == "codex":
        path, text = home / ".codex" / "config.toml", 'model = "o3"\r\n[mcp_servers.other]\r\ncommand = "foo"'
        args = ("--scope", "user")
    else:
        path = tmp_path / "project" / ".claude" / "settings.json"
        text = json.dumps({"env": {"A": "1"}, "permissions": {"allow": ["Bash(ls)"]}}, indent=2).replace("\n", "\r\n") + "\r\n"
        args = ("--project", str(tmp_path / "project"))
    path.parent.mkdir(parents=True)
    path.write_bytes(text.encode("utf-8"))
    done = cli(None, "agent", "install", host, *args, "--store", str(root))
    assert done.exit_code == 0, done.stderr
    installed = path.read_bytes()
    assert b"memctl" in installed and installed.count(b"\n") == installed.count(b"\r\n"), installed
    again = cli(None, "agent", "install", host, *args, "--store", str(root))
    assert again.exit_code == 0 and path.read_bytes() == installed
    gone = cli(None, "agent", "uninstall", host, *args)
    assert gone.exit_code == 0, gone.stderr
    assert path.read_bytes() == text.encode("utf-8")


@pytest.mark.parametrize(("host", "name"), [("claude-code", ".mcp.json"), ("gemini", ".gemini/settings.json"),
                                            ("cursor", ".cursor/mcp.json")])
def test_a_server_named_memctl_that_is_not_memctls_is_never_replaced_or_removed(tmp_path, root, host, name):
    """Found with the real clients: install replaced another program's server that happened to be named
    `memctl` (printing "+"), and uninstall then removed it, and with it the whole file."""
    project = tmp_path / "p"
    mcp = project / name
    mcp.parent.mkdir(parents=True, exist_ok=True)
    mcp.write_text(json.dumps({"mcpServers": {"memctl": {"command": "npx", "args": ["-y", "other-memctl-server"]}}}), encoding="utf-8")
    before = _snapshot(project)
    done = memctl(None, "agent", "install", host, "--project", str(project), "--store", str(root))
    assert done.returncode == 1 and done.stdout == "", done.stderr
    assert "already has an MCP server named 'memctl' that is not memctl's; nothing was written" in done.stderr
    assert len(done.stderr.splitlines()) == 1 and _snapshot(project) == before
    done = memctl(None, "agent", "uninstall", host, "--project", str(project))
    assert done.returncode == 0, done.stderr
    assert _snapshot(project) == before
    # memctl's own entry, from another install (another path, another store), is memctl's to replace: "~".
    mcp.write_text(json.dumps({"mcpServers": {"memctl": {"command": "/old/bin/memctl", "args": ["mcp", "--store", "/old"]}}}),
                   encoding="utf-8")
    done = memctl(None, "agent", "install", host, "--project", str(project), "--store", str(root), "--json")
    assert done.returncode == 0, done.stderr
    said = [line for change in json.loads(done.stdout)["changes"] for line in change["changes"] if "MCP server" in line]
    assert said and said[0].startswith("~ MCP server 'memctl': ") and str(root) in said[0]
    done = memctl(None, "agent", "uninstall", host, "--project", str(project))
    assert done.returncode == 0 and not mcp.exists(), done.stderr
