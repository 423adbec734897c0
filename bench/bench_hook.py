"""Agent integration budgets (issue 14): the UserPromptSubmit hook and MCP `recall`.

    python bench/bench_hook.py [--facts 1000] [--runs 15] [--mcp-facts 10000] [--calls 50]
                               [--mcp-modes keyword,default] [--strict]

1. Builds a store of --facts facts (half Japanese), installs the Claude Code
   hooks into a throwaway project (`agent install claude-code --root STORE`),
   then times, interleaved so machine noise hits all alike and warm (each
   command once before timing):
     - python -c pass                                (the floor)
     - the installed UserPromptSubmit command through `sh -c`, hook JSON on
       stdin, a prompt with relevant facts           (budget: <= 150 ms)
     - the same with a prompt nothing matches        (prints nothing)
     - the installed SessionStart command            (information)
2. Builds a store of --mcp-facts facts, starts `memctl mcp --root STORE` and
   calls `recall` --calls times through the SDK's own stdio client, after
   warm-up calls, in keyword mode and in the store's default mode (hybrid:
   its first call embeds every fact) (budget: median <= 30 ms per call at
   10,000 facts).
memctl runs byte-compiled, as an installed package does.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HOOK_BUDGET_MS = 150.0
MCP_BUDGET_MS = 30.0
PROMPTS = {
    "relevant": "does deploy job 42 run before the morning report?",
    "irrelevant": "猫の餌の選び方を教えて",
}


def build_store(root: Path, count: int) -> None:
    """`count` fact files written directly (the format of docs/FORMAT.md), one index run, one commit."""
    from memctl import fact, facts
    from memctl.store import init_store, open_store

    init_store(root)
    store = open_store(root)
    for i in range(count):
        if i % 2:
            desc = f"記事{i}の公開は朝9時に行い、タイトルは32文字以内に収める（ルール{i}）"
        else:
            desc = f"Rule {i}: deploy job {i} runs before the morning report and retries {i % 7} times"
        front = {"name": f"fact-{i:05d}", "description": desc, "metadata": {
            "type": ("feedback", "project", "user")[i % 3], "created": "2026-11-01T09:00:00+00:00",
            "updated": "2026-11-01T09:00:00+00:00"}}
        body = fact.compose_body(None, f"理由 {i}", f"how {i}")
        (store.memory_dir / f"fact-{i:05d}.md").write_text(fact.render(fact.Fact(f"fact-{i:05d}", front, body)), encoding="utf-8")
    facts.reindex(store, commit_changes=False)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=bench@localhost",
                    "commit", "-qm", "bench store"], check=True)


def time_once(argv: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, bytes]:
    start = time.perf_counter()
    done = subprocess.run(argv, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True, env=env)
    return (time.perf_counter() - start) * 1000, done.stdout


def hook_round(memctl: str, tmp: Path, facts_count: int, runs: int, env: dict[str, str]) -> dict[str, list[float]]:
    root = tmp / "hook-store"
    print(f"building a store of {facts_count} facts ...", file=sys.stderr)
    build_store(root, facts_count)
    project = tmp / "project"
    project.mkdir()
    subprocess.run([memctl, "--root", str(root), "agent", "install", "claude-code", "--project", str(project)],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    settings = json.loads((project / ".claude" / "settings.json").read_text(encoding="utf-8"))
    installed = {group["hooks"][0]["command"].rsplit(" ", 1)[-1]: group["hooks"][0]["command"]
                 for groups in settings["hooks"].values() for group in groups}
    hook_env = {**env, "CLAUDE_PROJECT_DIR": str(project)}
    commands = {
        "python -c pass": ([sys.executable, "-c", "pass"], b""),
        "hook prompt (relevant)": (["sh", "-c", installed["prompt"]], json.dumps({"prompt": PROMPTS["relevant"]}).encode()),
        "hook prompt (nothing)": (["sh", "-c", installed["prompt"]], json.dumps({"prompt": PROMPTS["irrelevant"]}).encode()),
        "hook session-start": (["sh", "-c", installed["session-start"]], b'{"source": "startup"}'),
    }
    for name, (argv, stdin) in commands.items():  # warm: bytecode, page cache, recall index
        _, out = time_once(argv, stdin, hook_env)
        if name.startswith("hook prompt"):
            print(f"{name} prints {len(out.splitlines())} lines", file=sys.stderr)
        if name == "hook prompt (relevant)" and len(out.splitlines()) < 2:
            sys.exit("bench_hook: the relevant prompt printed no fact: it would time the wrong path")
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, (argv, stdin) in commands.items():
            samples[name].append(time_once(argv, stdin, hook_env)[0])
    return samples


def mcp_round(memctl: str, tmp: Path, facts_count: int, calls: int, modes: list[str | None],
              env: dict[str, str]) -> dict[str, list[float]]:
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    root = tmp / "mcp-store"
    print(f"building a store of {facts_count} facts ...", file=sys.stderr)
    build_store(root, facts_count)
    queries = ["deploy job retries", "記事の公開は朝9時", "morning report", "タイトルは32文字以内", "rule 4242"]
    samples: dict[str, list[float]] = {}

    async def run() -> None:
        params = StdioServerParameters(command=memctl, args=["mcp", "--root", str(root)], env=env)
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                for mode in modes:
                    label = f"mcp recall ({mode or 'default mode'})"
                    arguments = {"k": 5, **({"mode": mode} if mode else {})}
                    for query in queries:  # warm: the index, the embedder, the vector cache
                        result = await session.call_tool("recall", {**arguments, "query": query})
                        assert not result.is_error, result.content
                    notes = (result.structured_content or {}).get("notes") or []
                    print(f"{label}: {len(result.structured_content['hits'])} hits; notes: {notes}", file=sys.stderr)
                    samples[label] = []
                    for i in range(calls):
                        start = time.perf_counter()
                        result = await session.call_tool("recall", {**arguments, "query": queries[i % len(queries)]})
                        samples[label].append((time.perf_counter() - start) * 1000)
                        assert not result.is_error, result.content

    anyio.run(run)
    return samples


def report(samples: dict[str, list[float]], budgets: dict[str, float], floor: float | None) -> bool:
    missed = False
    print(f"{'what':<30} {'median ms':>10} {'p90 ms':>8} {'min ms':>8} {'x python':>9} {'budget':>7}  result")
    for name, values in samples.items():
        median = statistics.median(values)
        p90 = sorted(values)[max(0, int(len(values) * 0.9) - 1)]
        budget = budgets.get(name)
        verdict = ""
        if budget is not None:
            verdict = "PASS" if median <= budget else "FAIL"
            missed |= median > budget
        ratio = f"{median / floor:.2f}" if floor else ""
        print(f"{name:<30} {median:>10.1f} {p90:>8.1f} {min(values):>8.1f} {ratio:>9} {budget or '':>7}  {verdict}")
    return missed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--mcp-facts", type=int, default=10000, help="0 skips the MCP round")
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--mcp-modes", default="keyword,default", help="recall modes to time; default = the store's own")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a budget is missed")
    args = parser.parse_args()

    memctl = shutil.which("memctl", path=str(Path(sys.executable).parent)) or shutil.which("memctl")
    if memctl is None:
        print("memctl is not installed in this environment", file=sys.stderr)
        return 2
    memctl = str(Path(memctl).absolute())
    tmp = Path(tempfile.mkdtemp(prefix="memctl-bench-"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "MEMCTL_ROOT")}
    env.update(PYTHONPYCACHEPREFIX=str(tmp / "pycache"), HF_HUB_OFFLINE="1")
    try:
        hooks = hook_round(memctl, tmp, args.facts, args.runs, env)
        modes = [None if m == "default" else m for m in args.mcp_modes.split(",")]
        mcp = mcp_round(memctl, tmp, args.mcp_facts, args.calls, modes, env) if args.mcp_facts else {}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    floor = statistics.median(hooks["python -c pass"])
    missed = report(hooks, {"hook prompt (relevant)": HOOK_BUDGET_MS, "hook prompt (nothing)": HOOK_BUDGET_MS}, floor)
    print(f"({args.runs} interleaved runs each through sh -c, {args.facts} facts, {os.cpu_count()} cores)")
    if mcp:
        print()
        missed |= report(mcp, {name: MCP_BUDGET_MS for name in mcp}, None)
        print(f"({args.calls} calls each on one running server, {args.mcp_facts} facts, SDK stdio client)")
    return 1 if missed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
