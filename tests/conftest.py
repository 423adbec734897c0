"""Shared fixtures: real stores in temp dirs with real git, the CLI in-process and as a subprocess."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memctl import early
from memctl.cli.root import load_commands
from memctl.store import init_store, open_store

app = load_commands()  # every command, as `memctl --help` shows them
from ui_store import ui_root, ui_url  # noqa: E402,F401  (session fixtures: the ui tests' store, built once)

REPO = Path(__file__).resolve().parent.parent


# Set in os.environ by memctl itself when it reads history through GitPython (gitstore._git_module):
# in-process commands of one test must not hand them to the subprocesses of the next, where
# GIT_PYTHON_GIT_EXECUTABLE would name the git to run ahead of PATH.
SET_BY_MEMCTL = ("GIT_PYTHON_GIT_EXECUTABLE",) + tuple(name for name, _ in early.ENV_DEFAULTS)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch, tmp_path_factory):
    """Tests never depend on the developer's environment, ~/.gitconfig, or what an earlier test set."""
    for key in ("MEMCTL_ROOT", "MEMCTL_NO_COMMIT", "MEMCTL_AGENT", "MEMCTL_NOW", "MEMCTL_FORCE_TTY", "MEMCTL_GIT",
                "XDG_CONFIG_HOME"):
        monkeypatch.delenv(key, raising=False)
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # The SessionStart hook starts a detached resident embedder; only the tests of it let it
    # (tests/cli/test_resident_hook.py), so no other test leaves a model-loading process behind.
    monkeypatch.setenv("MEMCTL_HOOK_RESIDENT", "0")
    for key in SET_BY_MEMCTL:
        os.environ.pop(key, None)
    yield
    for key in SET_BY_MEMCTL:
        os.environ.pop(key, None)


# One instant for tests whose commands read the clock and compare with what earlier commands wrote
# (STATE.md's age, an episode's order): pinned, so that they pass on any date and under a shifted
# system clock (scripts/test.sh runs the suite again under faketime +400d).
PINNED_NOW = "2026-11-30T12:00:00+00:00"


@pytest.fixture
def pinned_clock(monkeypatch) -> str:
    """Every command the test runs, in-process or as a subprocess, reads PINNED_NOW as the time."""
    monkeypatch.setenv("MEMCTL_NOW", PINNED_NOW)
    return PINNED_NOW


@pytest.fixture
def ctrl_c_reaches_us():
    """SIGINT handled as Python's own (a KeyboardInterrupt) for the test, whatever the suite runs under:
    a shell's background job (CI under nohup ... &) starts with it ignored, which memctl keeps."""
    import signal

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.fixture
def root(tmp_path) -> Path:
    """An initialised store (with a git repository) in a temp dir."""
    path = tmp_path / "store"
    init_store(path)
    return path


def drop_default_jobs(root: Path) -> Path:
    """Remove the jobs `init` declares (tests of job mechanics declare their own) and commit."""
    toml = root / "memctl.toml"
    text = toml.read_text(encoding="utf-8")
    toml.write_text(text[: text.index("\n# Scheduled jobs")] + "\n", encoding="utf-8")
    git(root, "-c", "user.name=test", "-c", "user.email=test@localhost", "commit", "-q", "-m", "test: no default jobs", "--", "memctl.toml")
    return root


@pytest.fixture
def store(root):
    return open_store(root)


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str


def cli(root: Path | None, *args: str, input: str | bytes | None = None, env: dict | None = None) -> Result:
    """Run the CLI in-process (CliRunner): stdout and stderr kept apart."""
    runner = CliRunner()
    argv = (["--root", str(root)] if root is not None else []) + list(args)
    result = runner.invoke(app, argv, input=input, env=env, catch_exceptions=False)
    return Result(result.exit_code, result.stdout, result.stderr)


def memctl(root: Path | None, *args: str, input: str | bytes | None = None, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `python -m memctl` as a real subprocess (for concurrency and start-up tests)."""
    argv = [sys.executable, "-m", "memctl"] + (["--root", str(root)] if root is not None else []) + list(args)
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(argv, input=input, capture_output=True, env=full_env, timeout=timeout,
                          text=not isinstance(input, bytes))


def mcp_calls(root: Path, env: dict, calls: list[tuple[str, dict]]) -> list:
    """Call MCP tools in order on one real `memctl mcp` server; each call must succeed."""
    mcp = pytest.importorskip("mcp")
    anyio = pytest.importorskip("anyio")
    results = []

    async def run():
        params = mcp.StdioServerParameters(command=sys.executable, args=["-m", "memctl", "mcp", "--root", str(root)],
                                           env={**os.environ, **env})
        async with mcp.stdio_client(params) as (read, write):
            async with mcp.ClientSession(read, write) as client:
                await client.initialize()
                for tool, arguments in calls:
                    result = await client.call_tool(tool, arguments)
                    assert not result.is_error, result.content
                    results.append(result)

    anyio.run(run)
    return results


def fact_versions(folder: Path) -> dict[str, Path]:
    """Base, ours and theirs of one fact, as git hands them to a merge driver (ours is the newest)."""
    fact = "---\nname: n\ndescription: {d}\nmetadata:\n  updated: {u}\n---\n"
    paths = {}
    for label, text in (("base", fact.format(d="b", u="2026-11-30T00:00:00+00:00")),
                        ("ours", fact.format(d="ours", u="2026-11-30T02:00:00+00:00")),
                        ("theirs", fact.format(d="theirs", u="2026-11-30T01:00:00+00:00"))):
        paths[label] = folder / f"{label}.tmp"
        paths[label].write_text(text, encoding="utf-8")
    return paths


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In the full run (scripts/test.sh sets MEMCTL_TEST_FULL=1) a skip is a failure.

    Skip markers exist only for reduced installs (e.g. the e5-only check without
    torch); the README's test command installs everything, so nothing may skip there.
    """
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("MEMCTL_TEST_FULL") == "1" and report.skipped:
        report.outcome = "failed"
        report.longrepr = f"skipped in the full test run (MEMCTL_TEST_FULL=1): {report.longrepr}"


def access_log(root: Path) -> str:
    """A memctl store's access log as `memctl maintain` will commit it: ledgers/access.tsv, then the rows
    reads left pending in .memctl/access/ (memctl/access.py); "" when there is none."""
    from memctl import access

    store = open_store(root)
    text = "".join(p.read_text(encoding="utf-8") for p in (access.path_for(store), *access.pending_files(store)) if p.exists())
    header = "\t".join(access.COLUMNS) + "\n"
    return header + text if text and not text.startswith(header) else text


def pytest_sessionfinish(session, exitstatus):
    """A safety net: a resident embedder (`embed-server --idle`, which the SessionStart hook starts
    detached) still running for a store under this session's temp folder is stopped, and named, so that a
    test whose hook environment lost conftest's MEMCTL_HOOK_RESIDENT=0 shows up."""
    import signal

    factory = getattr(session.config, "_tmp_path_factory", None)
    base = getattr(factory, "_basetemp", None)  # this session's temp folder, if it made one
    if base is None:
        return
    ours = str(base).encode() + b"/"  # (never another pytest's: a run beside a CI run stopped its server)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"embed-server" in argv and b"--idle" in argv and any(a.startswith(ours) for a in argv):
            with contextlib.suppress(OSError):
                os.kill(int(entry.name), signal.SIGTERM)
            print(f"\nconftest: stopped a resident embedder a test left running: {b' '.join(argv).decode(errors='replace')}")
