"""How soon `memctl mcp` lists its tools (issue 26, point 3), measured beside `python -c pass`.

    python bench/bench_mcp_start.py [--runs 15] [--strict] [--no-relay]

Starts `memctl mcp --root STORE` on a throwaway store, sends initialize, the
initialized notification and tools/list as a client does, and times from the
spawn to the tools/list reply; also the first tools/call (recall) reply, which
waits for the SDK. Interleaved with `python -c pass` (the floor: the
interpreter's own start), so machine noise hits all alike. Reports median, min
and max, the ratio to the floor, and `uptime` (the load average) before and
after. Budget: tools/list within 300 ms. --no-relay sets MEMCTL_MCP_NO_RELAY=1
(the SDK answers everything: the "before" figure). memctl runs byte-compiled,
as an installed package does.
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

BUDGET_MS = 300.0
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}


def _send(proc: subprocess.Popen, message: dict) -> None:
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


def _reply(proc: subprocess.Popen, ident: int) -> dict:
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("memctl mcp closed its output")
        message = json.loads(line)
        if message.get("id") == ident:
            return message


def time_server(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(ms to the tools/list reply, ms to the first tools/call reply) from the spawn."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        _send(proc, INIT)
        _reply(proc, 1)
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        tools = _reply(proc, 2)
        listed = (time.perf_counter() - start) * 1000
        assert len(tools["result"]["tools"]) == 10, tools
        _send(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                     "params": {"name": "recall", "arguments": {"query": "デプロイ", "k": 3, "mode": "keyword"}}})
        called = _reply(proc, 3)
        assert not called["result"].get("isError"), called
        return listed, (time.perf_counter() - start) * 1000
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)


def time_once(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env)
    return (time.perf_counter() - start) * 1000


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--strict", action="store_true", help="exit 1 when the budget is missed")
    parser.add_argument("--no-relay", action="store_true", help="MEMCTL_MCP_NO_RELAY=1: the SDK answers tools/list")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="memctl-bench-mcp-"))
    try:
        root = tmp / "store"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(PYTHONPYCACHEPREFIX=str(tmp / "pycache"), HF_HUB_OFFLINE="1")
        if args.no_relay:
            env["MEMCTL_MCP_NO_RELAY"] = "1"
        subprocess.run([sys.executable, "-m", "memctl", "init", str(root)], check=True, env=env, capture_output=True)
        subprocess.run([sys.executable, "-m", "memctl", "--root", str(root), "remember", "deploy-friday", "-d",
                        "本番デプロイは金曜に行わない"], check=True, env=env, capture_output=True)
        server = [sys.executable, "-m", "memctl", "mcp", "--root", str(root)]
        floor_argv = [sys.executable, "-c", "pass"]
        time_server(server, env)  # warm the page cache and write the bytecode
        time_once(floor_argv, env)
        print(f"before: {uptime()}")
        floor, listed, called = [], [], []
        for _ in range(args.runs):
            floor.append(time_once(floor_argv, env))
            first, second = time_server(server, env)
            listed.append(first)
            called.append(second)
        print(f"after:  {uptime()}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    base = statistics.median(floor)
    print(f"{'measure':<34} {'median ms':>10} {'min ms':>8} {'max ms':>8} {'x python':>9}")
    for name, values in (("python -c pass", floor), ("memctl mcp: tools/list reply", listed),
                         ("memctl mcp: first tools/call reply", called)):
        median = statistics.median(values)
        print(f"{name:<34} {median:>10.1f} {min(values):>8.1f} {max(values):>8.1f} {median / base:>9.2f}")
    missed = statistics.median(listed) > BUDGET_MS
    print(f"({args.runs} interleaved runs, {os.cpu_count()} cores, relay {'off' if args.no_relay else 'on'}); "
          f"budget tools/list <= {BUDGET_MS:.0f} ms: {'FAIL' if missed else 'PASS'}")
    return 1 if missed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
