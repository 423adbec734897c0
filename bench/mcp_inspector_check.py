"""`memctl mcp` as the MCP Inspector's CLI sees it (issue 26, points 2 and 3).

    python bench/mcp_inspector_check.py [--keep DIR]

Installs @modelcontextprotocol/inspector from the npm registry into a temp dir
(`npm install PACKAGE@latest`, nothing global; no other network), makes a tmp store with two
facts (one Japanese), and runs the Inspector's CLI against
`memctl mcp --root STORE` (this interpreter, this checkout: PYTHONPATH is passed
with -e, as the Inspector gives a server only a few variables of its own):
`tools/list`, `resources/list`, and `tools/call` of recall. Prints the
Inspector's version, each command line, its exit code, and a summary of its
output (each tool's title and hints; recall's hits), the raw output too with -v.
Exits 1 when a call fails or a result is not what memctl returns.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOOLS = {"remember", "recall", "context", "show", "get", "forget", "episode_add", "near_dup", "ledger_append",
         "state_show"}  # the server's tools (docs/AGENTS.md, "The MCP server")
PACKAGE = "@modelcontextprotocol/inspector"


def run(argv: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, **kw)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", help="install into (and reuse) this directory instead of a temp dir")
    parser.add_argument("-v", "--verbose", action="store_true", help="print the Inspector's raw output too")
    parser.add_argument("--inspector", default="latest",
                        help="the version or dist-tag to install (default latest: npm would pick an older one "
                             "than the latest on a node older than the latest's engines)")
    args = parser.parse_args()
    if shutil.which("npm") is None:
        print("npm is not installed", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="memctl-inspector-"))
    place = Path(args.keep) if args.keep else tmp / "npm"
    place.mkdir(parents=True, exist_ok=True)
    failed = False
    try:
        if not (place / "node_modules" / ".bin" / "mcp-inspector").exists():
            installed = run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error",
                             f"{PACKAGE}@{args.inspector}"], cwd=place)
            if installed.returncode:
                print(installed.stderr, file=sys.stderr)
                return 2
        meta = json.loads((place / "node_modules" / "@modelcontextprotocol" / "inspector" / "package.json").read_text())
        node = run(["node", "--version"]).stdout.strip()
        print(f"{PACKAGE} {meta['version']} (node {node}; it asks for node {meta.get('engines', {}).get('node', 'any')})")

        env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
        store = tmp / "store"
        run([sys.executable, "-m", "memctl", "init", str(store)], env=env, check=True)
        for name, description in (("deploy-friday", "本番デプロイは金曜に行わない"),
                                  ("backup-time", "Backups run at 03:00 UTC every night")):
            run([sys.executable, "-m", "memctl", "--root", str(store), "remember", name, "-d", description, "-t", "project"],
                env=env, check=True)
        inspector = [str(place / "node_modules" / ".bin" / "mcp-inspector"), "--cli",
                     "-e", f"PYTHONPATH={REPO}", "-e", "HF_HUB_OFFLINE=1",
                     sys.executable, "-m", "memctl", "mcp", "--root", str(store)]

        def ask(*method: str, tool_error: bool = False) -> dict | None:
            """The Inspector's JSON answer; with tool_error, a tool error is expected (the Inspector 2.x
            exits 5 then, printing the result and one line of its own on stderr)."""
            nonlocal failed
            done = run([*inspector, *method], env=env)
            print(f"\n$ mcp-inspector --cli ... memctl mcp --root STORE {' '.join(method)}  -> exit {done.returncode}")
            expected = done.returncode == 0 or (tool_error and "tool_is_error" in done.stderr)
            if args.verbose or not expected:
                print(done.stdout[:20000], done.stderr[-4000:], sep="\n")
            if not expected:
                failed = True
                return None
            if done.returncode:
                print("  (stderr)", done.stderr.strip().splitlines()[-1])
            return json.loads(done.stdout)

        listed = ask("--method", "tools/list")
        if listed is not None:
            for tool in listed["tools"]:
                a = tool.get("annotations", {})
                print(f"  {tool['name']:<14} {tool.get('title', ''):<28} readOnly={a.get('readOnlyHint')} "
                      f"destructive={a.get('destructiveHint')} idempotent={a.get('idempotentHint')} "
                      f"openWorld={a.get('openWorldHint')} outputSchema={'yes' if tool.get('outputSchema') else 'no'}")
            failed |= {t["name"] for t in listed["tools"]} != TOOLS or any("outputSchema" not in t or "annotations" not in t
                                                       for t in listed["tools"])
        resources = ask("--method", "resources/list")
        if resources is not None:
            print("  resources:", ", ".join(r["uri"] for r in resources["resources"]))
        called = ask("--method", "tools/call", "--tool-name", "recall", "--tool-arg", "query=金曜のデプロイ",
                     "--tool-arg", "k=3", "--tool-arg", "mode=keyword")
        if called is not None:
            data = called.get("structuredContent") or {}
            print(f"  isError={called.get('isError', False)} hits:",
                  ", ".join(f"{h['name']} ({h['relevance']:.2f})" for h in data.get("hits", [])))
            failed |= bool(called.get("isError")) or not data.get("hits") or data["hits"][0]["name"] != "deploy-friday"
        bad = ask("--method", "tools/call", "--tool-name", "recall", "--tool-arg", "query=x", "--tool-arg", "k=500",
                  tool_error=True)
        if bad is not None:
            print("  isError:", bad.get("isError"), "text:", bad["content"][0]["text"])
            failed |= not bad.get("isError") or not bad["content"][0]["text"].startswith("memctl: error: ")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("\nresult:", "FAILED" if failed else "ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
