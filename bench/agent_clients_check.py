"""Checked with each real client (issue 26, point 2): Codex CLI, Gemini CLI and Claude Code from the npm registry.

    python bench/agent_clients_check.py [--keep DIR] [--clients codex,gemini,claude]

1. `npm install` @openai/codex, @google/gemini-cli and @anthropic-ai/claude-code into a temp prefix
   (the only network use: the npm registry) and print each version.
2. In a temp HOME (the user's own ~/.codex, ~/.gemini, ~/.claude are never read or written), with a
   temp project and a memctl store, for each client and scope: `memctl agent install CLIENT --scope S
   --store STORE`, then the client's own listing, which must show memctl's server connected:
   - Codex: `codex mcp list` (it lists the configured servers without starting them; the project
     scope once the project is trusted, as Codex's trust prompt records it), then Codex's
     app server (`codex app-server`, JSON-RPC on stdio) asked to start a thread in the project (no
     model request) and `mcpServerStatus/list` for it, which starts each server: memctl's must be
     "connected" with its ten tools;
   - Gemini CLI: `gemini mcp list` (it starts each server: "Connected"), the folder trusted through
     GEMINI_CLI_TRUST_WORKSPACE=true as a user trusts it in the dialog;
   - Claude Code: `claude mcp list` ("Connected"), local and user scopes, as bench/claude_cli_check.py.
   Then `memctl agent uninstall` for that scope, and every file must be as before.
No model API is used. Exit 1 when a check fails. docs/AGENTS.md has the result of the last run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from claude_cli_check import QUIET, run  # noqa: E402  (the same way of running and printing)

PACKAGES = {"codex": "@openai/codex", "gemini": "@google/gemini-cli", "claude": "@anthropic-ai/claude-code"}
SCOPES = {"codex": ("user", "project"), "gemini": ("user", "project"), "claude": ("local", "user")}
AGENT = {"codex": "codex", "gemini": "gemini", "claude": "claude-code"}
TOOLS = {"recall", "context", "show", "forget", "remember", "episode_add", "near_dup", "ledger_append", "state_show", "get"}
# The config files memctl writes (the clients' own state files, e.g. ~/.claude.json, are theirs to change).
CONFIG_FILES = ("/config.toml", "/hooks.json", "/settings.json", "/settings.local.json", "/mcp.json", "/.mcp.json",
                "/policies/memctl.toml")
QUIET_ALL = {**QUIET, "GEMINI_TELEMETRY_ENABLED": "false", "NO_BROWSER": "1", "CODEX_DISABLE_UPDATE_CHECK": "1"}


def install_clients(prefix: Path, names: list[str]) -> None:
    missing = [PACKAGES[n] for n in names if not (prefix / "node_modules" / ".bin" / n).exists()]
    if not missing:
        return
    done = subprocess.run(["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund", *missing],
                          capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        sys.exit(f"npm install failed:\n{done.stderr}")


def snapshot(*places: Path) -> dict[str, bytes | None]:
    seen: dict[str, bytes | None] = {}
    for place in places:
        for path in [place, *(sorted(place.rglob("*")) if place.is_dir() else [])]:
            if path.exists() and not path.is_symlink():
                seen[str(path)] = path.read_bytes() if path.is_file() else None
    return seen


def codex_app_server(codex: Path, env: dict[str, str], cwd: Path, timeout: float = 120) -> dict:
    """Ask Codex's app server for the MCP servers' status in a thread started in `cwd`: it starts each one
    and lists its tools."""
    proc = subprocess.Popen([str(codex), "app-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env, cwd=cwd)

    def ask(number: int, method: str, params: dict) -> dict:
        proc.stdin.write(json.dumps({"id": number, "method": method, "params": params}) + "\n")
        proc.stdin.flush()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            message = json.loads(line)
            if message.get("id") == number:
                return message
        return {"error": f"no answer to {method}"}

    try:
        ask(1, "initialize", {"clientInfo": {"name": "memctl-check", "version": "0"}})
        proc.stdin.write(json.dumps({"method": "initialized"}) + "\n")
        proc.stdin.flush()
        # a thread in the project (no model request: none is sent before a turn) loads the project's config too
        thread = ((ask(2, "thread/start", {"cwd": str(cwd)}).get("result") or {}).get("thread") or {}).get("id")
        for number in range(3, 63):  # until the thread's start of each server has ended (a second apart)
            answer = ask(number, "mcpServerStatus/list", {"threadId": thread})
            states = [s.get("runtimeStatus") for s in (answer.get("result") or {}).get("data", [])]
            if "starting" not in states:
                break
            time.sleep(1)
        return answer
    finally:
        proc.kill()
        proc.wait()


def trust(config: Path, project: Path) -> None:
    """What Codex's trust prompt writes for a project (`[projects."DIR"] trust_level = "trusted"`)."""
    config.parent.mkdir(parents=True, exist_ok=True)
    text = config.read_text(encoding="utf-8") if config.exists() else ""
    entry = f'[projects.{json.dumps(str(project))}]\ntrust_level = "trusted"\n'
    if entry not in text:
        config.write_text(text + ("\n" if text and not text.endswith("\n") else "") + entry, encoding="utf-8")


def check(client: str, scope: str, binary: Path, env: dict[str, str], home: Path, project: Path, store: Path,
          memctl: list[str]) -> list[str]:
    """Install, list with the client, uninstall; the failures."""
    failures = []
    if client == "codex" and scope == "project":  # Codex reads a project's .codex/ only once the project is trusted
        trust(home / ".codex" / "config.toml", project)
    before = snapshot(home, project)
    done = run([*memctl, "agent", "install", AGENT[client], "--scope", scope, "--store", str(store)], env, project)
    if done.returncode != 0:
        return [f"{client} {scope}: install failed"]
    listed = run([str(binary), "mcp", "list"], env, project, timeout=180)
    line = next((l for l in (listed.stdout + listed.stderr).splitlines() if "memctl" in l), "")
    if client == "codex":
        if "enabled" not in line:
            failures.append(f"codex {scope}: `codex mcp list` does not list memctl enabled: {line!r}")
        answer = codex_app_server(binary, env, project)
        servers = {s.get("name"): s for s in (answer.get("result") or {}).get("data", [])}
        tools = set((servers.get("memctl") or {}).get("tools") or {})
        ours = servers.get("memctl") or {}
        print(f"$ codex app-server <<< thread/start, mcpServerStatus/list\n  memctl: {ours.get('runtimeStatus')}, "
              f"serverInfo {ours.get('serverInfo')}, tools: {', '.join(sorted(tools)) or '(none)'}")
        if tools != TOOLS or ours.get("runtimeStatus") != "connected":
            failures.append(f"codex {scope}: the app server says memctl is {ours.get('runtimeStatus')!r} with tools {sorted(tools)} ({answer.get('error')})")
    elif "Connected" not in line:
        failures.append(f"{client} {scope}: `{client} mcp list` does not report memctl connected: {line!r}")
    run([*memctl, "agent", "uninstall", AGENT[client], "--scope", scope], env, project)
    after = snapshot(home, project)
    changed = sorted(p for p in set(before) | set(after) if p.endswith(CONFIG_FILES) and before.get(p) != after.get(p))
    if changed:
        failures.append(f"{client} {scope}: after uninstall these differ from before: {changed}")
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=Path, help="work in DIR and keep it (the clients are reused when there)")
    parser.add_argument("--clients", default="codex,gemini,claude")
    args = parser.parse_args()
    names = [n for n in args.clients.split(",") if n]
    work = args.keep or Path(tempfile.mkdtemp(prefix="memctl-agent-clients-"))
    work.mkdir(parents=True, exist_ok=True)
    install_clients(work / "npm", names)
    home, project, store = work / "home", work / "project", work / "store"
    for path in (home, project):
        path.mkdir(exist_ok=True)
    here = Path(__file__).resolve().parent.parent
    env = {"HOME": str(home), "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin", **QUIET_ALL,
           "GIT_CONFIG_NOSYSTEM": "1", "HF_HUB_OFFLINE": "1", "GEMINI_CLI_TRUST_WORKSPACE": "true",
           "MEMCTL_HOOK_RESIDENT": "0", "PYTHONPATH": os.environ.get("PYTHONPATH", str(here))}
    memctl = [sys.executable, "-m", "memctl"]
    if not (store / "memctl.toml").exists():
        run([*memctl, "init", str(store)], env, project)
    failures, versions = [], {}
    for name in names:
        binary = work / "npm" / "node_modules" / ".bin" / name
        versions[name] = run([str(binary), "--version"], env, project).stdout.strip().splitlines()[-1:]
        for scope in SCOPES[name]:
            failures += check(name, scope, binary, env, home, project, store, memctl)
    print("versions: " + "; ".join(f"{n} {' '.join(v)}" for n, v in versions.items()))
    print("all checks passed" if not failures else "FAILED:\n  " + "\n  ".join(failures))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
