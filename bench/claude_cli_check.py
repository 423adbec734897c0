"""Checked with the real client (issue 24, point 6): the Claude Code CLI from the npm registry.

    python bench/claude_cli_check.py [--package @anthropic-ai/claude-code] [--keep DIR]

1. `npm install` the CLI into a temp prefix (the only network use: the npm registry), and prints
   its version (`claude --version`).
2. In a temp HOME (so the user's own ~/.claude is never read or written) with a temp project and a
   memctl store: for the local and the user scope, `memctl agent install claude-code --scope S
   --store STORE`, then `claude mcp list` in the project, which starts every configured server and
   says whether it connected; the script requires memctl's line to say "Connected". Then
   `memctl agent uninstall` for that scope.
3. `claude doctor` (an interactive screen: run in tmux, its screen captured) with memctl's hooks
   and server installed in the user scope: the screen must name no settings error.
Claude Code's non-essential traffic (telemetry, auto-update) is switched off by its own variables;
no model API is needed for these commands. Exit 1 when a check fails. docs/CLAUDE_CODE.md has the
result of the last run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QUIET = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1",
         "DISABLE_ERROR_REPORTING": "1", "CI": "1"}


def run(argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    print(f"$ {' '.join(argv)}  (exit {done.returncode})")
    for line in (done.stdout + done.stderr).splitlines():
        print("  " + line)
    return done


def install_cli(prefix: Path, package: str) -> Path:
    done = subprocess.run(["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund", package],
                          capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        sys.exit(f"npm install failed:\n{done.stderr}")
    return prefix / "node_modules" / ".bin" / "claude"


def doctor_screen(claude: Path, env: dict[str, str], cwd: Path) -> str:
    """`claude doctor` in a detached tmux session; its screen once it has settled."""
    if shutil.which("tmux") is None:
        sys.exit("tmux is needed for `claude doctor` (apt-get install -y tmux)")
    name = f"memctl-doctor-{os.getpid()}"
    exports = " ".join(f"{k}={v!r}" for k, v in env.items() if k in ("HOME", "PATH", *QUIET))
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "160", "-y", "60", "-c", str(cwd),
                    f"env -i {exports} {claude} doctor; sleep 30"], check=True)
    screen, last = "", None
    try:
        for _ in range(60):
            time.sleep(1)
            screen = subprocess.run(["tmux", "capture-pane", "-p", "-t", name], capture_output=True, text=True).stdout
            if screen == last and screen.strip():
                break
            last = screen
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
    return screen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--package", default="@anthropic-ai/claude-code")
    parser.add_argument("--keep", type=Path, help="work in DIR and keep it (the CLI is reused when there)")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="memctl-claude-cli-"))
    work.mkdir(parents=True, exist_ok=True)
    claude = work / "npm" / "node_modules" / ".bin" / "claude"
    if not claude.exists():
        claude = install_cli(work / "npm", args.package)
    home, project, store = work / "home", work / "project", work / "store"
    for path in (home, project):
        path.mkdir(exist_ok=True)
    env = {"HOME": str(home), "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin", **QUIET,
           "GIT_CONFIG_NOSYSTEM": "1", "HF_HUB_OFFLINE": "1"}
    memctl = [sys.executable, "-m", "memctl"]
    version = run([str(claude), "--version"], env, project).stdout.strip()
    if not (store / "memctl.toml").exists():
        run([*memctl, "init", str(store)], env, project)
    failures = []
    for scope in ("local", "user"):
        run([*memctl, "agent", "install", "claude-code", "--scope", scope, "--store", str(store)], env, project)
        listed = run([str(claude), "mcp", "list"], env, project, timeout=120)
        line = next((l for l in listed.stdout.splitlines() if l.startswith("memctl")), "")
        if "Connected" not in line:
            failures.append(f"{scope} scope: `claude mcp list` does not report memctl connected: {line or listed.stdout!r}")
        if scope == "user":
            screen = doctor_screen(claude, env, project)
            print("claude doctor:\n" + "\n".join("  " + l for l in screen.rstrip().splitlines()))
            lowered = screen.lower()
            if not screen.strip() or "invalid settings" in lowered or "settings error" in lowered \
                    or ("settings" in lowered and "error" in lowered and "no settings error" not in lowered):
                failures.append("`claude doctor` names a settings error (or showed nothing)")
        run([*memctl, "agent", "uninstall", "claude-code", "--scope", scope], env, project)
    print(f"Claude Code {version}: " + ("all checks passed" if not failures else "; ".join(failures)))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
