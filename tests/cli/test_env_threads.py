"""No memctl process writes its environment once it has a second thread.

Adding a variable may move glibc's `environ` array while another thread's getenv reads it. The MCP
server, whose relay threads start at once, died that way in getenv in CI's shifted-clock pass
(libfaketime reads its variables at every clock call): "Connection closed", nothing on stderr, a
segfault in libc's getenv in the kernel log. Here a preloaded guard aborts the process, naming the
variable, whenever setenv, putenv or unsetenv runs while the process has more than one thread; each
command is run as a real process, as a client or a hook runs it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import cli

GUARD_C = r"""
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int threads(void) {
    DIR *dir = opendir("/proc/self/task");
    int n = 0;
    struct dirent *entry;
    if (!dir) return 1;
    while ((entry = readdir(dir)) != NULL) if (entry->d_name[0] != '.') n++;
    closedir(dir);
    return n;
}

static void check(const char *what, const char *name) {
    int n = threads();
    if (n > 1) {
        char line[512];
        int len = snprintf(line, sizeof line, "envguard: %s(%.200s) with %d threads\n", what, name, n);
        if (len > 0) write(2, line, (size_t)len);
        abort();
    }
}

int setenv(const char *name, const char *value, int overwrite) {
    static int (*real)(const char *, const char *, int);
    if (!real) real = (int (*)(const char *, const char *, int))dlsym(RTLD_NEXT, "setenv");
    check("setenv", name);
    return real(name, value, overwrite);
}

int putenv(char *string) {
    static int (*real)(char *);
    if (!real) real = (int (*)(char *))dlsym(RTLD_NEXT, "putenv");
    check("putenv", string);
    return real(string);
}

int unsetenv(const char *name) {
    static int (*real)(const char *);
    if (!real) real = (int (*)(const char *))dlsym(RTLD_NEXT, "unsetenv");
    check("unsetenv", name);
    return real(name);
}
"""


@pytest.fixture(scope="module")
def guard(tmp_path_factory) -> str:
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler (cc) is needed to build the environment guard (apt-get install gcc)"
    folder = tmp_path_factory.mktemp("envguard")
    (folder / "envguard.c").write_text(GUARD_C, encoding="utf-8")
    built = subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(folder / "envguard.so"), str(folder / "envguard.c"), "-ldl"],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    return str(folder / "envguard.so")


def guarded(guard: str, **extra: str) -> dict[str, str]:
    env = {**os.environ, **extra}
    env["LD_PRELOAD"] = guard + (" " + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    for name in ("GIT_PYTHON_GIT_EXECUTABLE", "GIT_PYTHON_REFRESH", "MEMCTL_AGENT", "OMP_WAIT_POLICY"):
        env.pop(name, None)  # as a client, a hook or cron starts memctl: nothing of memctl's set yet
    return env


def test_the_guard_catches_a_write_beside_a_thread(guard):
    """The guard itself: a Python process that adds a variable while a thread runs is aborted, named."""
    code = ("import os, threading, time\n"
            "t = threading.Thread(target=time.sleep, args=(0.5,)); t.start()\n"
            "os.environ['MEMCTL_GUARD_PROBE'] = '1'\n")
    done = subprocess.run([sys.executable, "-c", code], env=guarded(guard), capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "envguard: setenv(MEMCTL_GUARD_PROBE) with 2 threads" in done.stderr


def test_the_mcp_server_writes_no_variable_beside_its_threads(root, guard):
    """initialize and tools/list (answered by the relay's threads), then a write, a hybrid recall that
    embeds in the background with the default embedder, and near_dup: the server never aborts."""
    assert cli(root, "remember", "deploy-rule", "-d", "Deploys only on Tuesdays after the suite passes").exit_code == 0
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "remember", "arguments": {
            "name": "friday-freeze", "description": "金曜日のデプロイは禁止", "type": "project"}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "recall", "arguments": {"query": "When may we deploy?"}}},
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "near_dup", "arguments": {"text": "デプロイは金曜日に禁止", "facts": True}}},
    ]
    server = subprocess.Popen([sys.executable, "-m", "memctl", "mcp", "--root", str(root)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=guarded(guard))
    answers = {}
    try:
        for message in messages:
            server.stdin.write((json.dumps(message, ensure_ascii=False) + "\n").encode())
            server.stdin.flush()
            if "id" in message:
                line = server.stdout.readline()
                assert line, server.stderr.read().decode(errors="replace")[-2000:]
                answer = json.loads(line)
                answers[answer["id"]] = answer
        server.stdin.close()
        server.stdout.read()
        said = server.stderr.read().decode(errors="replace")
    finally:
        code = server.wait(timeout=120)
    assert "envguard:" not in said and code == 0, said[-2000:]
    assert len(answers[2]["result"]["tools"]) == 10
    assert [i for i in (3, 4, 5) if answers[i]["result"].get("isError")] == [], [answers[i]["result"]["content"] for i in (3, 4, 5)]
    assert answers[4]["result"]["structuredContent"]["hits"][0]["name"] == "deploy-rule"


def test_hybrid_recall_from_the_cli_writes_no_variable_beside_its_query_thread(root, guard):
    """`recall` embeds the query in a thread while the main thread reads the store (recall.embed_early)."""
    assert cli(root, "remember", "deploy-rule", "-d", "Deploys only on Tuesdays after the suite passes").exit_code == 0
    done = subprocess.run([sys.executable, "-m", "memctl", "--root", str(root), "recall", "When may we deploy?", "--json"],
                          env=guarded(guard, MEMCTL_NO_SERVER="1"), capture_output=True, text=True, timeout=300)
    assert "envguard:" not in done.stderr and done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)[0]["name"] == "deploy-rule"
