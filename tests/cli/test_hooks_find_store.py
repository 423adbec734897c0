"""The installed hooks find their store (issue 23, point 4), run exactly as Claude Code runs them.

Every hook here is the command string install wrote into settings.json, run through `sh -c`
with the hook's JSON on stdin, a minimal PATH, from a code project directory that is not the
store and has no store above it. The store is found from the hook input's `cwd`, then
CLAUDE_PROJECT_DIR, then the store named at install (`agent install --store PATH`, which also
goes into the MCP server entry). `agent status` runs each installed entry once.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import memctl
from memctl.integrations.claude_code import project_memory_dir

NOW = "2026-05-01T09:00:00+00:00"  # every command's clock
FACT = ("deploy-window", "-t", "project", "-d", "Deploys run only on weekday mornings before 10:00", "--pin")
ASK = "when do deploys run?"
# A store path that needs quoting in `sh -c`: spaces, Japanese, an apostrophe.
AWKWARD = "agent memory 記憶's store"


def _env(**extra: str) -> dict[str, str]:
    env = {"HOME": os.environ["HOME"], "PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1", "HF_HUB_OFFLINE": "1",
           "MEMCTL_NOW": NOW, "LANG": "C.UTF-8", "MEMCTL_HOOK_RESIDENT": "0"}  # (the resident: test_resident_hook.py)
    env.update(extra)
    return env


def _store(path: Path) -> Path:
    assert memctl(None, "init", str(path), env={"MEMCTL_NOW": NOW}).returncode == 0
    done = memctl(path, "remember", *FACT, env={"MEMCTL_NOW": NOW})
    assert done.returncode == 0, done.stderr
    return path


def _code_project(tmp_path: Path, name: str = "my app") -> Path:
    project = tmp_path / "src" / name
    project.mkdir(parents=True)
    (project / "main.py").write_text("print('hello')\n", encoding="utf-8")
    return project


def _memctl_in(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("MEMCTL_", "CLAUDE_"))}
    full.update(MEMCTL_NOW=NOW, **(env or {}))
    return subprocess.run([sys.executable, "-m", "memctl", *args], cwd=cwd, capture_output=True, text=True,
                          env=full, timeout=300)


def _install(project: Path, *args: str) -> subprocess.CompletedProcess:
    return _memctl_in(project, "agent", "install", "claude-code", *args)


def _hooks(project: Path) -> dict[str, str]:
    settings = json.loads((project / ".claude" / "settings.json").read_text(encoding="utf-8"))
    return {event: groups[0]["hooks"][0]["command"] for event, groups in settings["hooks"].items()}


def _server(project: Path) -> dict:
    return json.loads((project / ".mcp.json").read_text(encoding="utf-8"))["mcpServers"]["memctl"]


def _hook(command: str, payload, *, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    data = payload if isinstance(payload, (str, bytes)) else json.dumps(payload, ensure_ascii=False)
    data = data.encode("utf-8") if isinstance(data, str) else data
    done = subprocess.run(["sh", "-c", command], input=data, capture_output=True, cwd=cwd, env=_env(**env), timeout=120)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode("utf-8"), done.stderr.decode("utf-8"))


def _prompt(project: Path, cwd: Path | None = None, prompt: str = ASK) -> dict:
    return {"session_id": "s1", "transcript_path": str(project / "t.jsonl"), "cwd": str(cwd or project),
            "permission_mode": "default", "hook_event_name": "UserPromptSubmit", "prompt": prompt}


def _start(project: Path, cwd: Path | None = None) -> dict:
    return {"session_id": "s1", "transcript_path": str(project / "t.jsonl"), "cwd": str(cwd or project),
            "hook_event_name": "SessionStart", "source": "startup"}


def _shown(result: subprocess.CompletedProcess) -> list[str]:
    """The fact names the prompt hook printed (stdout's lines after the header)."""
    assert result.returncode == 0 and result.stderr == "", result.stderr
    return [line[2:].split(":")[0] for line in result.stdout.splitlines()[1:]]


@pytest.fixture
def installed_plain(tmp_path) -> dict[str, str]:
    """The hook commands a plain install writes (no --store), from a project that has its own store."""
    own = _store(tmp_path / "with-store")
    done = _install(own)
    assert done.returncode == 0, done.stderr
    return _hooks(own)


# ---------------------------------------------------------------- where the store is found

def test_the_hook_inputs_cwd_finds_the_store_above_it(tmp_path, installed_plain):
    """Claude Code works in a folder inside a repository that holds a store; the hook runs elsewhere."""
    store = _store(tmp_path / "repo")
    inside = store / "docs" / "notes"
    inside.mkdir(parents=True)
    project = _code_project(tmp_path)
    other = tmp_path / "with-store"  # a store without facts: had it been used, nothing would show
    asked = _hook(installed_plain["UserPromptSubmit"], _prompt(project, cwd=inside), cwd=project,
                  CLAUDE_PROJECT_DIR=str(other))
    assert _shown(asked) == ["deploy-window"]
    assert str(store.resolve() / "memory" / "deploy-window.md") in asked.stdout


def test_the_hook_inputs_cwd_finds_its_claude_code_memory_directory(tmp_path, installed_plain):
    project = _code_project(tmp_path)
    memory = project_memory_dir(project)
    memory.mkdir(parents=True)
    (memory / "MEMORY.md").write_text("# Memory index\n", encoding="utf-8")
    # a directory never `memctl init`-ed is no git repository: writes there go without commits
    assert memctl(memory, "remember", *FACT, env={"MEMCTL_NOW": NOW, "MEMCTL_NO_COMMIT": "1"}).returncode == 0
    elsewhere = _code_project(tmp_path, "other")
    asked = _hook(installed_plain["UserPromptSubmit"], _prompt(project), cwd=elsewhere)
    assert _shown(asked) == ["deploy-window"]
    began = _hook(installed_plain["SessionStart"], _start(project), cwd=elsewhere)
    assert began.returncode == 0 and began.stderr == "", began.stderr
    assert began.stdout.startswith("# memctl context\n")


def test_a_subfolder_of_a_git_project_finds_the_memory_claude_code_keeps_under_the_roots_name(tmp_path, installed_plain):
    """Claude Code names a project's memory folder after its git root; a prompt from `repo/pkg` found no
    store (memctl looked under the subfolder's name)."""
    project = _code_project(tmp_path, "repo 🚀")
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / "pkg").mkdir()
    memory = project_memory_dir(project / "pkg")
    assert memory == project_memory_dir(project) and memory.parent.name.endswith("-repo---")  # space, and an emoji of two UTF-16 units
    memory.mkdir(parents=True)
    (memory / "MEMORY.md").write_text("# Memory index\n", encoding="utf-8")
    assert memctl(memory, "remember", *FACT, env={"MEMCTL_NOW": NOW, "MEMCTL_NO_COMMIT": "1"}).returncode == 0
    asked = _hook(installed_plain["UserPromptSubmit"], _prompt(project, cwd=project / "pkg"), cwd=project / "pkg")
    assert _shown(asked) == ["deploy-window"]


def test_claude_project_dir_comes_next(tmp_path, installed_plain):
    """Nothing from the input's cwd: CLAUDE_PROJECT_DIR's store is used."""
    store = _store(tmp_path / "repo")
    project = _code_project(tmp_path)
    asked = _hook(installed_plain["UserPromptSubmit"], _prompt(project), cwd=project, CLAUDE_PROJECT_DIR=str(store))
    assert _shown(asked) == ["deploy-window"]


def test_the_quick_start_store_named_at_install(tmp_path):
    """Store in ~/agent-memory (here with a path that needs quoting), hooks installed in a code project."""
    store = _store(tmp_path / AWKWARD)
    project = _code_project(tmp_path)
    done = _install(project, "--store", str(store))
    assert done.returncode == 0, done.stderr
    hooks = _hooks(project)
    assert hooks["UserPromptSubmit"].endswith(" hook prompt --store '" + str(store.resolve()).replace("'", "'\"'\"'") + "'")
    assert _server(project)["args"] == ["mcp", "--store", str(store.resolve())]
    asked = _hook(hooks["UserPromptSubmit"], _prompt(project), cwd=project, CLAUDE_PROJECT_DIR=str(project))
    assert _shown(asked) == ["deploy-window"]
    began = _hook(hooks["SessionStart"], _start(project), cwd=project, CLAUDE_PROJECT_DIR=str(project))
    assert began.returncode == 0 and began.stderr == "", began.stderr
    assert began.stdout.startswith("# memctl context\n")
    # A store found from the project wins over the one named at install.
    near = _store(project / "notes")
    nearer = _hook(hooks["UserPromptSubmit"], _prompt(project, cwd=near), cwd=project)
    assert _shown(nearer) == ["deploy-window"]
    assert str(near.resolve()) in nearer.stdout and str(store.resolve()) not in nearer.stdout


def test_the_mcp_entry_reaches_the_store_named_at_install(tmp_path):
    anyio = pytest.importorskip("anyio")
    from test_mcp_cli import call, session

    store = _store(tmp_path / AWKWARD)
    project = _code_project(tmp_path)
    assert _install(project, "--store", str(store)).returncode == 0
    entry = _server(project)

    async def run():
        async with session(entry["command"], entry["args"], env={**entry["env"], "MEMCTL_NOW": NOW},
                           cwd=str(project)) as client:
            error, found = await call(client, "recall", query=ASK, k=3)
            assert not error, found
            assert found["hits"][0]["name"] == "deploy-window"

    anyio.run(run)


# ---------------------------------------------------------------- install refuses what cannot work

def test_install_refuses_where_no_store_can_be_found(tmp_path):
    project = _code_project(tmp_path)
    for args in ([], ["--dry-run"], ["--scope", "user"]):
        refused = _install(project, *args)
        assert refused.returncode == 1, refused.stderr
        [line] = refused.stderr.splitlines()
        assert line.startswith("memctl: error: no memctl store found from ") and "--store" in line.split("(hint: ")[1]
        assert refused.stdout == ""
    assert sorted(p.name for p in project.iterdir()) == ["main.py"]
    assert not (Path(os.environ["HOME"]) / ".claude").exists()


def test_the_cli_in_the_project_reaches_the_store_the_hooks_use_and_installs_hint_makes_it(tmp_path):
    """First hour: `agent install` in a new project said to run `memctl init` "in the project" (a second
    store in the code repository); once the memory was set up, `memctl recall` in the project, as the
    installed snippet tells the agent to run it, exited 3 where the hooks found the store."""
    import shlex

    project = _code_project(tmp_path, "app 記憶")
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    refused = _install(project)
    assert refused.returncode == 1
    hint = refused.stderr.split("(hint: run `")[1].split("`")[0]
    assert shlex.split(hint) == ["memctl", "init", str(project_memory_dir(project))], refused.stderr
    assert memctl(None, *shlex.split(hint)[1:], env={"MEMCTL_NOW": NOW}).returncode == 0
    assert _install(project).returncode == 0
    (project / "pkg").mkdir()
    for cwd in (project, project / "pkg"):
        added = _memctl_in(cwd, "remember", f"fact-{cwd.name}", "-t", "project", "-d", f"Deploys from {cwd.name} on Tuesdays")
        assert added.returncode == 0, added.stderr
        found = _memctl_in(cwd, "recall", "deploys tuesdays", "--json")
        assert found.returncode == 0, found.stderr
        [hit] = [h for h in json.loads(found.stdout) if h["name"] == f"fact-{cwd.name}"]
        assert (project_memory_dir(project) / hit["path"]).is_file()
    assert not (project / "memctl.toml").exists() and not (project / "MEMORY.md").exists()
    assert "fact-pkg" in _hook(_hooks(project)["UserPromptSubmit"], _prompt(project, prompt="deploys tuesdays"), cwd=project).stdout
    assert _memctl_in(tmp_path, "list").returncode == 3  # outside the project: no store


@pytest.mark.parametrize("where, words", [
    ("missing", "store directory does not exist: "),
    ("not-a-store", " is not a memctl store"),
], ids=["missing", "not-a-store"])
def test_install_refuses_an_unreachable_store(tmp_path, where, words):
    project = _code_project(tmp_path)
    given = tmp_path / where
    if where == "not-a-store":
        given.mkdir()
    refused = _install(project, "--store", str(given))
    assert refused.returncode == 3
    [line] = refused.stderr.splitlines()
    assert line.startswith("memctl: error: ") and words in line and "(hint: " in line
    assert sorted(p.name for p in project.iterdir()) == ["main.py"]


def _without_mcp(tmp_path: Path) -> str:
    """A PYTHONPATH under which `import mcp` fails, as in an install without the mcp package."""
    broken = tmp_path / "no-mcp" / "mcp"
    broken.mkdir(parents=True, exist_ok=True)
    (broken / "__init__.py").write_text("raise ImportError('mcp is not installed here')\n", encoding="utf-8")
    return str(broken.parent)


def test_install_refuses_an_mcp_entry_that_does_not_start(tmp_path):
    store = _store(tmp_path / AWKWARD)
    project = _code_project(tmp_path)
    refused = _memctl_in(project, "agent", "install", "claude-code", "--store", str(store),
                         env={"PYTHONPATH": _without_mcp(tmp_path)})
    assert refused.returncode == 1
    [line] = refused.stderr.splitlines()
    assert line.startswith("memctl: error: the MCP server entry does not start: ") and "mcp" in line[60:]
    assert "nothing was written" in line
    assert sorted(p.name for p in project.iterdir()) == ["main.py"]


def test_install_takes_root_or_store_not_both(tmp_path):
    store = _store(tmp_path / "s")
    project = _code_project(tmp_path)
    both = _memctl_in(project, "--root", str(store), "agent", "install", "claude-code", "--store", str(store))
    assert (both.returncode, both.stderr) == (2, "memctl: error: give --root (always that store) or --store "
                                                 "(when none is found), not both\n")
    outside = _memctl_in(project, "episode", "import", "claude-code", "t.jsonl", "--store", str(store))
    assert (outside.returncode, outside.stderr) == (2, "memctl: error: --store goes with --hook "
                                                       "(hint: --root DIR names the store otherwise)\n")
    assert sorted(p.name for p in project.iterdir()) == ["main.py"]


# ---------------------------------------------------------------- bad input at hook time: exit 0, one line

def test_no_store_anywhere_adds_nothing_and_says_so_once(tmp_path, installed_plain):
    project = _code_project(tmp_path)
    for event, payload in (("UserPromptSubmit", _prompt(project)), ("SessionStart", _start(project))):
        result = _hook(installed_plain[event], payload, cwd=project, CLAUDE_PROJECT_DIR=str(project))
        assert (result.returncode, result.stdout) == (0, "")
        [line] = result.stderr.splitlines()
        assert line.startswith("memctl: hook ") and "nothing added: no memctl store found from " in line
        assert str(project) in line and "--store" in line


@pytest.mark.parametrize("data", ["this is not json", '{"prompt": ', b'{"prompt": "\xff\xfe"}'],
                         ids=["text", "cut-off", "not-utf8"])
def test_a_hook_input_that_is_not_json(tmp_path, data):
    store = _store(tmp_path / AWKWARD)
    project = _code_project(tmp_path)
    assert _install(project, "--store", str(store)).returncode == 0
    for event, command in _hooks(project).items():
        result = _hook(command, data, cwd=project)
        assert (result.returncode, result.stdout) == (0, ""), event
        [line] = result.stderr.splitlines()
        assert line.startswith("memctl: hook ") and ": nothing added: " in line
        assert ("UTF-8" if isinstance(data, bytes) else "not JSON") in line


def test_the_store_named_at_install_removed_later(tmp_path):
    store = _store(tmp_path / AWKWARD)
    project = _code_project(tmp_path)
    assert _install(project, "--store", str(store)).returncode == 0
    shutil.rmtree(store)
    for event, payload in (("UserPromptSubmit", _prompt(project)), ("SessionStart", _start(project))):
        result = _hook(_hooks(project)[event], payload, cwd=project, CLAUDE_PROJECT_DIR=str(project))
        assert (result.returncode, result.stdout) == (0, "")
        [line] = result.stderr.splitlines()
        assert "nothing added: the store named at install does not exist: " + str(store.resolve()) in line


# ---------------------------------------------------------------- agent status runs what is installed

def _status(project: Path) -> tuple[int, dict[str, dict]]:
    result = _memctl_in(project, "agent", "status", "--json")
    [row] = [r for r in json.loads(result.stdout) if r["scope"] == "project"]
    return result.returncode, {entry["item"]: entry for entry in row["entries"]}


def test_status_runs_each_hook_and_the_server_and_names_the_store(tmp_path):
    store = _store(tmp_path / AWKWARD)
    project = _code_project(tmp_path)
    assert _install(project, "--store", str(store)).returncode == 0
    code, entries = _status(project)
    assert code == 0
    assert set(entries) == {"SessionStart hook", "UserPromptSubmit hook", "MCP server"}
    for item, entry in entries.items():
        assert (entry["answers"], entry["store"], entry["found_by"], entry["error"]) == (
            True, str(store.resolve()), "--store", None), item
    assert entries["UserPromptSubmit hook"]["command"] == _hooks(project)["UserPromptSubmit"]
    table = _memctl_in(project, "agent", "status")
    assert table.returncode == 0
    assert f"project\tUserPromptSubmit hook\tyes\tyes\t{store.resolve()}\t" in table.stdout
    assert f"project\tMCP server\tyes\tyes\t{store.resolve()}\t" in table.stdout
    assert "user\tMCP server\tno\t\t\t" in table.stdout
    logged = [p.read_text(encoding="utf-8") for p in store.rglob("access.tsv")]
    assert not any("hook" in text or "context" in text for text in logged)  # the checks log nothing


def test_status_says_when_the_store_is_gone(tmp_path):
    store = _store(tmp_path / AWKWARD)
    project = _code_project(tmp_path)
    assert _install(project, "--store", str(store)).returncode == 0
    shutil.rmtree(store)
    code, entries = _status(project)
    assert code == 1
    for item, entry in entries.items():
        assert entry["answers"] is False and entry["store"] is None, item
        assert "the store named at install does not exist: " + str(store.resolve()) in entry["error"], item
    table = _memctl_in(project, "agent", "status")
    assert table.returncode == 1
    assert "project\tUserPromptSubmit hook\tyes\tno\t" in table.stdout


def test_status_says_when_the_mcp_server_exits(tmp_path):
    """The hooks work; the server cannot start (here: its Python finds no usable mcp package)."""
    store = _store(tmp_path / AWKWARD)
    project = _code_project(tmp_path)
    assert _install(project, "--store", str(store)).returncode == 0
    settings = project / ".mcp.json"
    data = json.loads(settings.read_text(encoding="utf-8"))
    data["mcpServers"]["memctl"]["env"]["PYTHONPATH"] = _without_mcp(tmp_path)
    settings.write_text(json.dumps(data), encoding="utf-8")
    code, entries = _status(project)
    assert code == 1
    assert entries["UserPromptSubmit hook"]["answers"] is True and entries["SessionStart hook"]["answers"] is True
    server = entries["MCP server"]
    assert server["answers"] is False and server["store"] == str(store.resolve())  # reached, did not answer
    assert server["error"].startswith("memctl: error: ") and "mcp" in server["error"]
    assert "\n" not in server["error"]


def test_the_transcript_hook_and_its_check_use_the_store_named_at_install(tmp_path):
    store = _store(tmp_path / AWKWARD)
    project = _code_project(tmp_path)
    done = _install(project, "--store", str(store), "--transcripts")
    assert done.returncode == 0, done.stderr
    command = _hooks(project)["SessionEnd"]
    assert command.endswith(" episode import claude-code --hook --store '" + str(store.resolve()).replace("'", "'\"'\"'") + "'")
    episodes = store / "ledgers" / "episodes.tsv"
    before = episodes.exists() and episodes.read_text(encoding="utf-8")
    code, entries = _status(project)
    assert code == 0 and entries["SessionEnd hook"]["answers"] is True
    assert entries["SessionEnd hook"]["store"] == str(store.resolve())
    assert (episodes.exists() and episodes.read_text(encoding="utf-8")) == before  # the check imported nothing
    transcript = Path(__file__).resolve().parent.parent / "fixtures" / "claude-code" / "5d0c6a1e-1111-4a7b-9c1d-000000000001.jsonl"
    payload = {"hook_event_name": "SessionEnd", "session_id": transcript.stem, "transcript_path": str(transcript),
               "cwd": str(project), "reason": "exit"}
    ended = _hook(command, payload, cwd=project, CLAUDE_PROJECT_DIR=str(project))
    assert (ended.returncode, ended.stdout) == (0, ""), ended.stderr
    rows = episodes.read_text(encoding="utf-8").splitlines()[1:]
    assert rows and all(f"session:{transcript.stem}" in row for row in rows)


def test_both_paths_of_the_hook_command_agree(tmp_path):
    """`hook prompt --store DIR` on the fast path and through the Typer app print the same."""
    store = _store(tmp_path / AWKWARD)
    project = _code_project(tmp_path)
    assert _install(project, "--store", str(store)).returncode == 0
    command = _hooks(project)["UserPromptSubmit"]
    fast = _hook(command, _prompt(project), cwd=project)
    typer_path = _hook(command, _prompt(project), cwd=project, MEMCTL_NO_FAST="1")
    assert _shown(fast) == _shown(typer_path) == ["deploy-window"]
    assert fast.stdout == typer_path.stdout
