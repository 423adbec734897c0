"""`memctl mcp --root STORE` as a real subprocess, driven by the mcp SDK's own stdio client."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import cli, git, memctl
from memctl.integrations import mcp_server

mcp = pytest.importorskip("mcp")
anyio = pytest.importorskip("anyio")

TOOLS = {"remember", "recall", "context", "show", "forget", "episode_add", "near_dup", "ledger_append", "state_show", "get"}


@contextlib.asynccontextmanager
async def session(command: str, args: list[str], env: dict[str, str] | None = None, cwd: str | None = None):
    """A client of the server; when anything fails, the error carries what the server wrote to its
    stderr (a server that died shows only "Connection closed" to its client)."""
    import tempfile

    params = mcp.StdioServerParameters(command=command, args=args, env={**os.environ, **(env or {})}, cwd=cwd)
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
        try:
            async with mcp.stdio_client(params, errlog=errlog) as (read, write):
                async with mcp.ClientSession(read, write) as client:
                    await client.initialize()
                    yield client
        except BaseException as exc:
            errlog.seek(0)
            said = errlog.read()
            exc.add_note("the server's stderr:\n" + (said[-4000:] or "(nothing)"))
            raise


def server(root: Path):
    """The server as a client starts it, but a recall waits for its background embedding as long as it
    takes (the default 7 s is a client's patience; a busy CI machine can take longer for a model load,
    and these tests are about the answers: tests/cli/test_first_embeddings.py is about the wait)."""
    return session(sys.executable, ["-m", "memctl", "mcp", "--root", str(root)], env={"MEMCTL_EMBED_WAIT": "300"})


async def call(client, tool: str, **arguments):
    result = await client.call_tool(tool, arguments)
    return result.is_error, (result.content[0].text if result.is_error else result.structured_content)


def check_round_trip(client_factory, root: Path) -> None:
    """The issue's test: tools listed, remember, recall finds it, git has the commit, a bad name is a tool error,
    and the server keeps serving."""

    async def run():
        async with client_factory() as client:
            listed = (await client.list_tools()).tools
            assert {t.name for t in listed} == TOOLS
            for t in listed:
                assert t.description and t.input_schema["type"] == "object"
                assert all(p.get("description") for p in t.input_schema["properties"].values()), t.name
            error, data = await call(client, "remember", name="deploy-window", type="project",
                                     description="Deploys run only on weekday mornings before 10:00",
                                     why="afternoon deploys broke the batch jobs")
            assert not error, data
            assert (data["action"], Path(data["path"]).name, data["similar"]) == ("created", "deploy-window.md", [])
            assert (root / data["path"]).is_file() and data["commit"]
            error, found = await call(client, "recall", query="when do deploys run?", k=3)
            assert not error and found["hits"][0]["name"] == "deploy-window"
            error, text = await call(client, "remember", name="../name", description="x")  # a path: refused in either layout
            assert error and text.startswith("memctl: error: invalid fact name '../name' (hint: ")
            error, similar = await call(client, "remember", name="deploy-window-2",
                                        description="Deploys run only on weekday mornings before 11:00")
            assert not error and similar["similar"][0]["name"] == "deploy-window"
            assert 0 < similar["similar"][0]["score"] < 1 and similar["similar"][0]["method"] == "keywords"
            error, text = await call(client, "remember", name="again", description="Deploys run only on weekday mornings before 10:00")
            assert error and "the same description is already in" in text and "(hint: " in text
            error, found = await call(client, "recall", query="deploys weekday", k=5)
            assert not error and {h["name"] for h in found["hits"]} == {"deploy-window", "deploy-window-2"}

    anyio.run(run)
    log = git(root, "log", "--format=%s")
    assert "memory: remember deploy-window\n" in log and "memory: remember deploy-window-2\n" in log
    assert "again" not in log


def test_mcp_round_trip(root):
    check_round_trip(lambda: server(root), root)


def test_every_tool_and_resource(root):
    cli(root, "ledger", "create", "themes", "--columns", "date,theme", "--unique", "theme")

    async def run():
        async with server(root) as client:
            error, data = await call(client, "remember", name="zenn-rate-limit", type="feedback",
                                     description="Zenn投稿は1日1件まで。書籍CTAを全記事に含める", tags=["zenn"], pin=True)
            assert not error, data
            error, shown = await call(client, "show", name="zenn-rate-limit")
            assert not error and shown["path"] == "memory/zenn-rate-limit.md" and "pinned: true" in shown["text"]
            error, bundle = await call(client, "context", query="Zennの投稿", budget=2000)
            assert not error and "zenn-rate-limit" in bundle["shown"] and "## Pinned facts" in bundle["text"]
            error, episode = await call(client, "episode_add", description="Chose TSV over SQLite", type="decision",
                                        outcome="grep keeps working")
            assert not error and episode["id"].startswith("ep-") and episode["type"] == "decision"
            forged = {"id": "fake", "ts": "garbage", "agent": "x", "type": "nonsense", "description": "forged",
                      "outcome": "", "importance": "99", "tags": "", "refs": ""}  # episode_add's checks, bypassed
            error, text = await call(client, "ledger_append", name="episodes", records=[forged])
            assert error and "episode id 'fake' is not ep-" in text and "episode add" in text
            error, text = await call(client, "ledger_append", name="episodes", records=[{**forged, "id": "ep-20261130090000-0a1b"}])
            assert error and "episode ts 'garbage'" in text
            error, appended = await call(client, "ledger_append", name="themes",
                                         records=[{"date": "2026-11-30", "theme": "MCPサーバーのテスト方法"}])
            assert not error and appended["appended"] == 1 and appended["commit"]
            error, text = await call(client, "ledger_append", name="themes",
                                     records=[{"date": "2026-12-01", "theme": "MCPサーバーのテスト方法"}])
            assert error and text.startswith("memctl: error: ")
            error, verdict = await call(client, "near_dup", text="MCPサーバーのテスト方法", ledger="themes", column="theme")
            assert not error and verdict["verdict"] == "near-duplicate" and verdict["hits"][0]["text"] == "MCPサーバーのテスト方法"
            error, text = await call(client, "state_show")
            assert error and "no state/STATE.md yet" in text and "(hint: memctl state update)" in text
            error, forgotten = await call(client, "forget", name="zenn-rate-limit", reason="rule lifted")
            assert not error and forgotten["path"] == "memory/archive/zenn-rate-limit.md"
            error, text = await call(client, "show", name="no-such-fact")
            assert error and text.startswith("memctl: error: no fact named 'no-such-fact'")

            uris = {str(r.uri) for r in (await client.list_resources()).resources}
            assert uris == {"memctl://index"}  # no STATE.md yet: not listed
            templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
            assert templates == {"memctl://facts/{name}"}
            index = (await client.read_resource("memctl://index")).contents[0].text
            assert index == (root / "memory" / "MEMORY.md").read_text(encoding="utf-8")
            fact = (await client.read_resource("memctl://facts/zenn-rate-limit")).contents[0].text
            assert fact == (root / "memory" / "archive" / "zenn-rate-limit.md").read_text(encoding="utf-8")
            with pytest.raises(mcp.MCPError, match="no state/STATE.md yet"):
                await client.read_resource("memctl://state")
            cli(root, "state", "update")
            uris = {str(r.uri) for r in (await client.list_resources()).resources}
            assert uris == {"memctl://index", "memctl://state"}
            state = (await client.read_resource("memctl://state")).contents[0].text
            assert state == (root / "state" / "STATE.md").read_text(encoding="utf-8")
            error, snapshot = await call(client, "state_show")
            assert not error and snapshot["path"] == "state/STATE.md" and "facts" in snapshot["numbers"]

    anyio.run(run)


def test_remember_refuses_a_type_memctl_toml_does_not_declare(root):
    """The tool calls the same library function as the CLI: the same one line, nothing written."""
    index = (root / "memory" / "MEMORY.md").read_text(encoding="utf-8")

    async def run():
        async with server(root) as client:
            error, text = await call(client, "remember", name="deploy-window", type="feeback",
                                     description="Deploys run only on weekday mornings")
            assert error and text == ("memctl: error: unknown fact type 'feeback'; the types are user | feedback | project | "
                                      "reference | procedure (hint: did you mean 'feedback'? to add a type, declare it in "
                                      "memctl.toml: [facts] types)")
            error, data = await call(client, "remember", name="deploy-window", type="feedback",
                                     description="Deploys run only on weekday mornings")
            assert not error and data["action"] == "created"

    anyio.run(run)
    after = (root / "memory" / "MEMORY.md").read_text(encoding="utf-8")
    assert after != index and "## feedback\n" in after and "feeback" not in after


def test_reads_by_the_server_keep_git_status_clean(root):
    """Issue 23.10: the MCP tools' access rows wait in .memctl/ (git status stays clean); `maintain` commits them."""
    assert memctl(root, "remember", "deploy", "-d", "deploys happen on Tuesdays").returncode == 0

    async def run():
        async with server(root) as client:
            error, found = await call(client, "recall", query="deploys Tuesdays")
            assert not error and found["hits"][0]["name"] == "deploy"
            error, _ = await call(client, "show", name="deploy")
            assert not error
            assert git(root, "status", "--porcelain", "--untracked-files=all") == ""

    anyio.run(run)
    rows = json.loads(memctl(root, "audit", "--json").stdout)
    assert [r["command"] for r in rows] == ["mcp-recall", "used:mcp"]
    assert memctl(root, "maintain").returncode == 0
    assert git(root, "log", "-1", "--format=%s").strip() == "ledger: append access (+2)"
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""


def test_recall_sees_what_other_processes_write(root):
    """The server keeps its recall index open; a write by another memctl shows up in the next call."""

    async def run():
        async with server(root) as client:
            error, found = await call(client, "recall", query="backup schedule")
            assert not error and found["hits"] == []
            done = memctl(root, "remember", "backup-schedule", "-d", "The backup schedule runs nightly at 02:00")
            assert done.returncode == 0, done.stderr
            error, found = await call(client, "recall", query="backup schedule")
            assert [h["name"] for h in found["hits"]] == ["backup-schedule"]
            memctl(root, "forget", "backup-schedule", "--reason", "moved")
            error, found = await call(client, "recall", query="backup schedule")
            assert found["hits"] == []

    anyio.run(run)


def test_not_a_store_fails_before_serving(tmp_path):
    result = memctl(None, "mcp", "--root", str(tmp_path))
    assert result.returncode == 3
    assert result.stderr == f"memctl: error: {tmp_path} is not a memctl store (hint: run `memctl init` there)\n"


def _names(found) -> list[str]:
    return [h["name"] for h in found["hits"]]


def test_hybrid_recall_sees_every_write_while_keeping_its_vectors(root, tmp_path):
    """In the default (hybrid) mode: a fact remembered through the server, one remembered by the CLI in
    another process, one that arrives by `git pull`, one edited in place, then forgotten ones, and the
    index and vector cache deleted under the running server."""

    async def run():
        async with server(root) as client:
            error, found = await call(client, "recall", query="backup schedule")
            assert not error and found == {"query": "backup schedule", "hits": [], "notes": []}
            error, _ = await call(client, "remember", name="backup-schedule", type="project",
                                  description="The backup schedule runs nightly at 02:00")
            assert not error
            error, found = await call(client, "recall", query="backup schedule")
            assert not error and _names(found) == ["backup-schedule"] and found["notes"] == []
            done = memctl(root, "remember", "release-train", "-d", "リリーストレインは毎週木曜の午後に出発する")
            assert done.returncode == 0, done.stderr
            error, found = await call(client, "recall", query="リリーストレインはいつ出発する？")
            assert not error and _names(found)[0] == "release-train"

            other = tmp_path / "clone"
            subprocess.run(["git", "clone", "-q", str(root), str(other)], check=True)
            done = memctl(other, "remember", "oncall-rota", "-d", "The on-call rota changes every Monday at noon")
            assert done.returncode == 0, done.stderr
            subprocess.run(["git", "-C", str(root), "pull", "-q", "--ff-only", str(other), "HEAD"], check=True,
                           env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1"})
            error, found = await call(client, "recall", query="on-call rota Monday")
            assert not error and _names(found)[0] == "oncall-rota"

            path = root / "memory" / "oncall-rota.md"
            with open(path, "r+", encoding="utf-8") as handle:  # in place: same inode, no folder change
                text = handle.read()
                handle.seek(0)
                handle.write(text.replace("The on-call rota changes every Monday at noon",
                                          "The pager duty swaps on Thursdays after lunch"))
            time.sleep(mcp_server.RESYNC_SECONDS + 0.2)
            error, found = await call(client, "recall", query="pager duty swaps")
            assert not error and _names(found)[0] == "oncall-rota"

            error, _ = await call(client, "forget", name="backup-schedule", reason="moved to the ops repo")
            assert not error
            done = memctl(root, "forget", "release-train", "--reason", "no more trains")
            assert done.returncode == 0, done.stderr
            error, found = await call(client, "recall", query="backup schedule")
            assert not error and "backup-schedule" not in _names(found)
            error, found = await call(client, "recall", query="リリーストレインはいつ出発する？")
            assert not error and "release-train" not in _names(found)

            shutil.rmtree(root / ".memctl")
            error, found = await call(client, "recall", query="pager duty swaps")
            assert not error and _names(found)[0] == "oncall-rota"

    anyio.run(run)


QUERIES = ["when does the payment service deploy?", "Zennの投稿ルール", "会議室は何階？", "cat food", "deploy freeze",
           "書籍の宣伝"]


def test_hybrid_recall_equals_the_cli(root):
    """The server's default-mode answers are the CLI's `recall --json`: same names, same relevance, in order."""
    for name, description in [
        ("deploy-friday", "Never deploy the payment service on Fridays"),
        ("zenn-limit", "Zenn投稿は1日1件まで。書籍CTAを全記事に含める"),
        ("tokyo-office", "東京オフィスの会議室は3階にある"),
        ("cat-food", "The office cat eats salmon kibble twice a day"),
        ("freeze", "Code freeze starts two days before each release"),
        ("old-freeze", "Code freeze used to start a week before each release"),
    ]:
        assert cli(root, "remember", name, "-d", description, "--force").exit_code == 0
    assert cli(root, "forget", "old-freeze", "--reason", "shorter now").exit_code == 0
    assert cli(root, "episode", "add", "Moved the deploy freeze to Thursdays", "--type", "decision").exit_code == 0

    def cli_answer(query: str, *options: str):
        done = memctl(root, "recall", query, "--json", "--explain", "--no-log", *options)
        assert done.returncode in (0, 1), done.stderr
        rows = json.loads(done.stdout)
        assert all(r["signals"]["vector"] is not None for r in rows)  # the CLI answered in hybrid mode
        return [(r["name"], r["relevance"]) for r in rows]

    async def run():
        async with server(root) as client:
            for options, arguments in [((), {}), (("--all",), {"include_all": True}), (("--source", "all"), {"source": "all"})]:
                for query in QUERIES:
                    error, found = await call(client, "recall", query=query, **arguments)
                    assert not error and found["notes"] == []
                    assert [(h["name"], h["relevance"]) for h in found["hits"]] == cli_answer(query, *options), (query, options)
            assert any(h["name"] == "old-freeze" for h in (await call(client, "recall", query="deploy freeze",
                                                                          include_all=True))[1]["hits"])

    anyio.run(run)


def test_the_index_is_kept_synced_between_calls(root):
    """After a call the server syncs the recall index in the background (an in-place edit reaches the
    index before the next call asks); it stops ACTIVE_SECONDS after the last call."""
    import sqlite3

    assert cli(root, "remember", "pager", "-d", "The pager rotates every Monday").exit_code == 0

    def indexed() -> str:
        with contextlib.closing(sqlite3.connect(root / ".memctl" / "recall.sqlite")) as conn:
            return conn.execute("SELECT description FROM docs WHERE key='pager' AND kind='fact'").fetchone()[0]

    async def run():
        async with server(root) as client:
            error, found = await call(client, "recall", query="pager rotation")
            assert not error and _names(found) == ["pager"]
            path = root / "memory" / "pager.md"
            with open(path, "r+", encoding="utf-8") as handle:  # in place: no folder or ledger changes
                text = handle.read()
                handle.seek(0)
                handle.write(text.replace("The pager rotates every Monday", "The pager swaps each Thursday"))
            assert indexed() == "The pager rotates every Monday"
            deadline = time.monotonic() + 3 * mcp_server.RESYNC_SECONDS
            while indexed() != "The pager swaps each Thursday" and time.monotonic() < deadline:
                await anyio.sleep(0.1)
            assert indexed() == "The pager swaps each Thursday"  # synced with no call in between
            error, found = await call(client, "recall", query="pager swaps Thursday")
            assert not error and _names(found) == ["pager"]

    anyio.run(run)


# What each tool declares to clients (issue 26): read-only tools run without a prompt in Codex and Gemini.
HINTS = {  # tool: (readOnlyHint, destructiveHint, idempotentHint)
    "recall": (True, False, True), "context": (True, False, True), "show": (True, False, True),
    "near_dup": (True, False, True), "state_show": (True, False, True), "get": (True, False, True),
    "remember": (False, False, False), "episode_add": (False, False, False), "ledger_append": (False, False, False),
    "forget": (False, True, False),
}


def test_every_tool_declares_its_hints_and_returns_what_its_output_schema_says(root):
    """Hints and titles, descriptions without source indentation, and every tool called for real: its
    structuredContent checked against its own outputSchema; a secret redacted by a write tool is reported."""
    import jsonschema
    from secret_fakes import GITHUB_CLASSIC

    cli(root, "ledger", "create", "themes", "--columns", "date,theme", "--unique", "theme")
    cli(root, "state", "update")

    async def run():
        async with server(root) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            assert set(listed) == TOOLS == set(HINTS)
            for name, t in listed.items():
                a = t.annotations
                assert (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint) == (*HINTS[name], False), name
                assert t.title and a.title == t.title, name
                assert not any(line.startswith(" ") for line in t.description.splitlines()), t.description
                assert t.output_schema["type"] == "object" and t.output_schema["properties"], name
                assert all(p.get("description") for p in t.input_schema["properties"].values()), name
                jsonschema.Draft202012Validator.check_schema(t.output_schema)
            results = {}
            secret = f"use {GITHUB_CLASSIC} for the GitHub API"
            for tool, arguments in [
                ("remember", dict(name="deploy-friday", description="本番デプロイは金曜に行わない", type="feedback", body=secret)),
                ("remember", dict(name="deploy-friday-2", description="本番デプロイは金曜日に行わない", force=True)),
                ("recall", dict(query="デプロイ", k=3)),
                ("context", dict(query="デプロイ", budget=1000)),
                ("show", dict(name="deploy-friday")),
                ("episode_add", dict(description=f"rotated the token: {secret}", type="decision")),
                ("near_dup", dict(text="本番デプロイは金曜に行わない", facts=True)),
                ("ledger_append", dict(name="themes", records=[{"date": "2026-11-30", "theme": secret}])),
                ("state_show", {}),
                ("forget", dict(name="deploy-friday-2", reason="a copy")),
            ]:
                result = await client.call_tool(tool, arguments)
                assert not result.is_error, (tool, result.content[0].text)
                jsonschema.validate(result.structured_content, listed[tool].output_schema)
                assert json.loads(result.content[0].text) == result.structured_content
                results.setdefault(tool, []).append(result.structured_content)
            first, second = results["remember"]
            assert first["redacted"] == {"github-token": 1} and "github-token" in first["notes"][0]
            assert "redacted" not in second and second["similar"][0]["name"] == "deploy-friday"
            for tool in ("episode_add", "ledger_append"):
                assert results[tool][0]["redacted"] == {"github-token": 1}, tool
                assert any("1 secret redacted before writing (github-token)" in n for n in results[tool][0]["notes"])
            assert "redacted" not in results["recall"][0] and results["recall"][0]["hits"]
            assert results["state_show"][0]["path"] == "state/STATE.md" and "---" in results["state_show"][0]["text"]

    anyio.run(run)
    assert GITHUB_CLASSIC not in (root / "memory" / "deploy-friday.md").read_text(encoding="utf-8")
    assert GITHUB_CLASSIC not in git(root, "log", "-p")


def test_argument_errors_are_memctl_errors(root):
    """Missing, ill-typed and out-of-range arguments and an unknown tool: a tool error in memctl's words
    with the argument's own description as the hint; nothing written, and the server keeps serving."""
    head = git(root, "rev-parse", "HEAD")

    async def run():
        async with server(root) as client:
            cases = [
                ("recall", {}, "memctl: error: recall: the argument query is required "
                               "(hint: query is a text: What to look for, in Japanese or English.)"),
                ("recall", {"query": "x", "k": 500}, "memctl: error: recall: the argument k must be an integer from 1 to 100, "
                                                     "not 500 (hint: k is an integer from 1 to 100: How many hits.)"),
                ("recall", {"query": "x", "k": "たくさん"}, "memctl: error: recall: the argument k must be an integer from 1 "
                                                          "to 100, not \"たくさん\" (hint: k is an integer from 1 to 100: How many hits.)"),
                ("recall", {"query": None}, "memctl: error: recall: the argument query must be a text, not null "
                                            "(hint: query is a text: What to look for, in Japanese or English.)"),
                # A value inside a list: where it is, and what that place takes (the list itself was fine).
                ("ledger_append", {"name": "themes", "records": [{"topic": 1, "memo": "y"}]},
                 "memctl: error: ledger_append: the argument records[0].topic must be a text, not 1 (hint: records is a "
                 "list: Records to append: one object per row, a text value for every column.)"),
                ("remember", {"name": "a", "description": "x", "importance": 2},
                 "memctl: error: remember: the argument importance must be a number from 0 to 1 or null, not 2 "
                 "(hint: importance is a number from 0 to 1 or null: 0-1 (default by type).)"),
                ("forget", {"name": "a"}, "memctl: error: forget: the argument reason is required "
                                          "(hint: reason is a text: Why it is forgotten: one line, kept in the archived file.)"),
                # Not coerced: `true` and "2" were taken as k=1 and k=2; a misspelt argument was dropped.
                ("recall", {"query": "x", "k": True}, "memctl: error: recall: the argument k must be an integer from 1 "
                                                      "to 100, not true (hint: k is an integer from 1 to 100: How many hits.)"),
                ("recall", {"query": "x", "k": "2"}, "memctl: error: recall: the argument k must be an integer from 1 "
                                                     "to 100, not \"2\" (hint: k is an integer from 1 to 100: How many hits.)"),
                ("remember", {"name": "a", "description": "x", "pin": "yes"},
                 "memctl: error: remember: the argument pin must be true or false, not \"yes\" "
                 "(hint: pin is true or false: Pin the fact: always in the session-start context.)"),
                ("recall", {"query": "x", "kk": 3}, "memctl: error: recall: no argument named 'kk' (hint: its arguments "
                                                    "are query, k, source, mode, type, tag, since, include_all, min_score)"),
                ("recal", {"query": "x"}, "memctl: error: no tool named 'recal' (hint: the tools are remember, recall, "
                                          "context, show, get, forget, episode_add, near_dup, ledger_append, state_show)"),
            ]
            for tool, arguments, expected in cases:
                result = await client.call_tool(tool, arguments)
                assert result.is_error and result.content[0].text == expected, result.content[0].text
                assert "pydantic" not in result.content[0].text and "validation error" not in result.content[0].text
            error, found = await call(client, "recall", query="x")
            assert not error and found["hits"] == []
            # "" for an option left unset (some clients send it) is the default; an unknown mode is an error
            error, found = await call(client, "recall", query="x", mode="", since="")
            assert not error and found["hits"] == [], found
            error, text = await call(client, "recall", query="x", mode="fuzzy")
            assert error and text == "memctl: error: unknown --mode 'fuzzy' (hint: keyword, vector or hybrid)", text
            # a client's `_meta` sent inside the arguments is its metadata, not a misspelt argument
            error, found = await call(client, "recall", query="x", _meta={"progressToken": 7})
            assert not error and found["hits"] == [], found

    anyio.run(run)
    assert git(root, "rev-parse", "HEAD") == head


def test_recall_answers_from_documents_and_get_returns_their_lines(root, tmp_path):
    """Issue 27: MCP recall with a document source, and `get` for the lines a hit names (only a source's files)."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "release.md").write_text("# Releasing\n\n## Freezes\n\nThe December freeze starts on the fifteenth.\n",
                                      encoding="utf-8")
    assert memctl(root, "source", "add", "notes", str(notes / "*.md"), "-d", "Team notes").returncode == 0
    assert memctl(root, "source", "index", "--no-embed").returncode == 0

    async def run():
        import jsonschema

        async with server(root) as client:
            schemas = {t.name: t.output_schema for t in (await client.list_tools()).tools}
            error, found = await call(client, "recall", query="december freeze", source="docs", mode="keyword")
            jsonschema.validate(found, schemas["recall"])
            assert not error, found
            (hit,) = found["hits"]
            assert (hit["heading"], hit["source_description"], hit["start"], hit["end"]) == (
                ["Releasing", "Freezes"], "Team notes", 3, 5)
            error, lines = await call(client, "get", spec=hit["path"])
            assert not error and lines["text"] == "## Freezes\n\nThe December freeze starts on the fifteenth.\n"
            jsonschema.validate(lines, schemas["get"])
            # The path alone: the whole document, as `show PATH` prints it (the tool's description says so).
            error, whole = await call(client, "get", spec=hit["path"].rsplit(":", 1)[0])
            assert not error and (whole["start"], whole["end"]) == (1, 5) and whole["text"].startswith("# Releasing\n"), whole
            jsonschema.validate(whole, schemas["get"])
            error, text = await call(client, "get", spec=f"{root / 'memctl.toml'}:1-2")
            assert error and "is in no declared source" in text

    anyio.run(run)
