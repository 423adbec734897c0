"""Bounded input (issue 29.5, docs/FORMAT.md "Limits", docs/RELIABILITY.md "What a clone trusts"):
whatever a remote pushes or a client sends, no reader hangs, nothing is read whole past its limit,
and no NUL is stored. Real stores, real `memctl` subprocesses, each with a timeout (a hang fails the
test instead of hanging the suite), the MCP server driven by the SDK's own stdio client.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import access_log, git
from memctl import fact as fact_mod
from memctl.fsutil import FACT_LIMIT, INDEX_LIMIT, ROW_LIMIT, STATE_LIMIT

T = 60  # seconds for any one command: a reader that hangs on the input fails here


def run(root: Path, *args: str, input: str | bytes | None = None, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "memctl", "--root", str(root), *args]
    done = subprocess.run(argv, input=input.encode("utf-8") if isinstance(input, str) else input, capture_output=True,
                          timeout=T, cwd=root.parent)
    out, err = done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace")
    assert done.returncode in ok, f"memctl {' '.join(args)} -> {done.returncode}\n{out}\n{err}"
    assert "Traceback" not in err, err
    return subprocess.CompletedProcess(argv, done.returncode, out, err)


def commit_all(root: Path, message: str) -> None:
    """What a pull from a hostile remote leaves: the file committed as it came."""
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message)


def alias_bomb() -> str:
    """The issue's file: 426 bytes whose frontmatter stands for 9**9 (387 million) strings."""
    lines = ["---", "name: bomb", "description: 426 bytes of a billion laughs.", "metadata:", "  type: project",
             "  a: &a [x, x, x, x, x, x, x, x, x]"]
    for prev, name in zip("abcdefgh", "bcdefghi"):
        lines.append(f"  {name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    text = "\n".join(lines) + "\n---\nboom\n"
    assert len(text.encode()) == 426, len(text.encode())
    return text


@pytest.fixture
def bombed(root):
    run(root, "remember", "deploy-window", "--description", "Deploys run only on weekday mornings before 10:00", "--type", "project")
    (root / "memory" / "bomb.md").write_text(alias_bomb(), encoding="utf-8")
    commit_all(root, "a fact from the remote")
    return root


SKIPPED = "memory/bomb.md:6: a YAML anchor or alias (&name, *name) in the frontmatter"


def test_an_alias_bomb_hangs_no_reader_and_is_reported_as_damaged_in_one_line(bombed):
    """Old code: `memctl list` ran for minutes at 1.3 GB (the parse cache wrote the expanded values)."""
    started = time.monotonic()
    listed = run(bombed, "list")
    assert "deploy-window" in listed.stdout and "bomb" not in listed.stdout
    assert [line for line in listed.stderr.splitlines() if "bomb.md" in line] == [
        f"memctl: warning: skipped {SKIPPED}: memctl does not read them (write each value out) (hint: run `memctl doctor`)"]
    recalled = run(bombed, "recall", "deploys weekday")
    assert "deploy-window" in recalled.stdout
    checked = run(bombed, "doctor", ok=(1,))
    assert [line for line in checked.stdout.splitlines() if "bomb.md" in line] == [
        f"{SKIPPED.replace(':6:', ':6: error:')}: memctl does not read them (write each value out)"]
    run(bombed, "index")
    assert "bomb.md" not in (bombed / "memory" / "MEMORY.md").read_text(encoding="utf-8")
    run(bombed, "context")
    run(bombed, "remember", "after-bomb", "--description", "a write beside the bomb")
    prompt = run(bombed, "hook", "prompt", input=json.dumps({"prompt": "when do deploys run on weekday mornings?"}))
    assert "deploy-window" in prompt.stdout
    run(bombed, "hook", "session-start", input='{"source": "startup"}')
    assert time.monotonic() - started < 8 * T  # every reader answered: none hung
    cache = bombed / ".memctl" / "facts.json"
    assert cache.stat().st_size < 100_000  # old code: 663 MB


def test_anchors_are_found_by_the_scanner_not_by_the_characters():
    """`&` and `*` in text are fine (the C loader alone reads them); only YAML's anchors and aliases are refused."""
    text = "---\nname: rnd\ndescription: 'R&D: *bold* & more'\nmetadata:\n  tags: [a&b, '*x']\n---\nbody & *stars* &a *a\n"
    assert fact_mod.parse(text, "rnd").front["description"] == "R&D: *bold* & more"
    for front, line in (("a: &x 1\nb: *x\n", 2), ("name: n\nmetadata:\n  m: &base {a: 1}\n  n:\n    <<: *base\n", 4)):
        with pytest.raises(fact_mod.FactParseError) as caught:
            fact_mod.parse(f"---\n{front}---\n", "x")
        assert caught.value.line == line and "anchor or alias" in caught.value.message
    shared = ["a", "b"]  # one list in two places: written twice, never as an anchor and an alias
    rendered = fact_mod.render(fact_mod.Fact("s", {"name": "s", "description": "d", "metadata": {"tags": shared, "also": shared}}))
    assert "&" not in rendered and fact_mod.parse(rendered, "s").front["metadata"]["also"] == ["a", "b"]


def test_a_fact_file_over_its_limit_is_skipped_unread_and_never_written(root):
    run(root, "remember", "small", "--description", "a fact of normal size")
    big = root / "memory" / "huge.md"
    big.write_text("---\nname: huge\ndescription: twenty megabytes from a remote\n---\n" + "x" * (20 << 20), encoding="utf-8")
    commit_all(root, "a huge fact from the remote")
    size = big.stat().st_size
    reason = f"{size} bytes; a fact file may be at most 1 MiB (docs/FORMAT.md, Limits), so memctl does not read it"
    listed = run(root, "list")
    assert "small" in listed.stdout and f"memctl: warning: skipped memory/huge.md: {reason}" in listed.stderr
    assert f"memory/huge.md: error: {reason}" in run(root, "doctor", ok=(1,)).stdout
    assert "small" in run(root, "recall", "normal size fact").stdout
    shown = run(root, "show", "huge", ok=(1,))
    assert f"fact 'huge' cannot be read: memory/huge.md: {reason}" in shown.stderr
    body = "y" * FACT_LIMIT
    refused = run(root, "remember", "too-long", "--description", "a body past the limit", "--body", "-", input=body, ok=(2,))
    assert "would be" in refused.stderr and "a fact file may be at most 1 MiB" in refused.stderr
    assert not (root / "memory" / "too-long.md").exists()
    run(root, "remember", "long-enough", "--description", "a body within the limit", "--body", "-", input="z" * (FACT_LIMIT - 4096))


def test_index_files_over_their_limit_are_refused_by_writers_and_named_by_doctor(root):
    run(root, "remember", "small", "--description", "a fact of normal size")
    index = root / "memory" / "MEMORY.md"
    index.write_text(index.read_text(encoding="utf-8") + "".join(f"- line {i} of a MEMORY.md from a remote\n" for i in range(120_000)),
                     encoding="utf-8")
    commit_all(root, "a 100,000-line index from the remote")
    size = index.stat().st_size
    assert size > INDEX_LIMIT
    line = f"memory/MEMORY.md is {size} bytes; an index file may be at most 4 MiB (docs/FORMAT.md, Limits), so memctl does not read it"
    refused = run(root, "remember", "another", "--description", "a write after the pull", ok=(1,))
    assert refused.stderr.splitlines() == [f"memctl: error: {line} (hint: shorten the file, or move it out of the store)"]
    assert not (root / "memory" / "another.md").exists() and git(root, "status", "--porcelain") == ""
    assert line in run(root, "index", ok=(1,)).stderr
    context = run(root, "context")
    assert f"memctl: warning: left out of the context: {line}" in context.stderr and context.stdout.startswith("# memctl context")
    assert f"memory/MEMORY.md: error: {line.split(' is ', 1)[1]}" in run(root, "doctor", ok=(1,)).stdout

    git(root, "checkout", "HEAD~1", "--", "memory/MEMORY.md")
    topic = root / "memory" / "memory-index" / "project.md"
    topic.parent.mkdir()
    topic.write_bytes(b"- x\n" * (INDEX_LIMIT // 4 + 1))
    commit_all(root, "a huge topic file")
    refused = run(root, "remember", "another", "--description", "a write after the pull", ok=(1,))
    assert "memory/memory-index/project.md is" in refused.stderr and "may be at most 4 MiB" in refused.stderr
    assert "memory/memory-index/project.md: error:" in run(root, "doctor", ok=(1,)).stdout


def test_a_ledger_line_over_its_limit_is_refused_naming_the_file_and_line(root):
    run(root, "ledger", "create", "notes", "--columns", "k,v")
    run(root, "ledger", "append", "notes", "k=a", "v=first")
    with open(root / "ledgers" / "notes.tsv", "ab") as handle:
        handle.write(b"b\t" + b"v" * (2 * ROW_LIMIT) + b"\n")
    commit_all(root, "a 2 MiB ledger line from the remote")
    rows = run(root, "ledger", "rows", "notes", ok=(1,))
    assert rows.stderr.splitlines() == ["memctl: error: ledgers/notes.tsv:3 is a line of more than 1 MiB, the limit for a ledger "
                                        "line (docs/FORMAT.md, Limits), so memctl does not read it (hint: cut the line short, "
                                        "or move it out of the ledger)"]
    assert "ledgers/notes.tsv:3: error: a line of more than 1 MiB" in run(root, "doctor", ok=(1,)).stdout
    columns = ",".join(f"c{i}" for i in range(20))
    run(root, "ledger", "create", "wide", "--columns", columns)
    record = json.dumps({f"c{i}": "w" * (60 << 10) for i in range(20)})
    refused = run(root, "ledger", "append", "wide", "-", "--json", input=record + "\n", ok=(2,))
    assert "a ledger line may be at most 1 MiB" in refused.stderr
    assert (root / "ledgers" / "wide.tsv").read_text(encoding="utf-8") == columns.replace(",", "\t") + "\n"


def test_a_nul_from_stdin_is_refused_and_one_in_the_access_log_does_not_fail_doctor(root):
    run(root, "remember", "small", "--description", "a fact of normal size")
    run(root, "recall", "normal size")
    before = access_log(root)  # the committed rows and the ones reads left pending in .memctl/access/
    refused = run(root, "recall", "--queries", "-", input=b"normal\nsi\x00ze\n", ok=(2,))
    assert refused.stderr.splitlines() == ["memctl: error: stdin:2: a NUL character (hint: remove it; queries are text)"]
    assert access_log(root) == before
    run(root, "hook", "prompt", input=json.dumps({"prompt": "normal\u0000size fact"}))  # a hook never fails: the NUL is dropped
    assert "\0" not in access_log(root) and "normalsize fact" in access_log(root)
    run(root, "maintain")  # the pending rows into ledgers/access.tsv
    access = root / "ledgers" / "access.tsv"
    with open(access, "ab") as handle:  # what an older memctl logged from an MCP query
        handle.write(b"2026-01-01T00:00:00+00:00\tmcp\tmcp-recall\tgo\x00od\tsmall\n")
    checked = run(root, "doctor")
    line = access.read_bytes().count(b"\n")
    assert f"ledgers/access.tsv:{line}: warning: a NUL byte" in checked.stdout


# ---------------------------------------------------------------- MCP

mcp = pytest.importorskip("mcp")
anyio = pytest.importorskip("anyio")


def test_mcp_inputs_over_their_limit_or_with_a_nul_get_an_error_at_once(bombed):
    """Old code: a 10 MB near_dup text had no answer within 750 s; a NUL in a recall query was stored."""
    index = bombed / "memory" / "MEMORY.md"
    access = bombed / "ledgers" / "access.tsv"

    async def call(client, tool, **arguments):
        started = time.monotonic()
        result = await client.call_tool(tool, arguments)
        return result.is_error, result.content[0].text if result.content else "", time.monotonic() - started

    async def scenario():
        params = mcp.StdioServerParameters(command=sys.executable, args=["-m", "memctl", "mcp", "--root", str(bombed)],
                                           env=dict(os.environ))
        async with mcp.stdio_client(params) as (read, write), mcp.ClientSession(read, write) as client:
            await client.initialize()
            with anyio.fail_after(T):
                error, text, took = await call(client, "near_dup", text="重複 " * ((10 << 20) // 7), facts=True)
                assert error and "the argument text is" in text and "the limit is 64 KiB" in text and took < 5, (text, took)
                error, text, took = await call(client, "recall", query="deploy " * 20_000)
                assert error and "the argument query is" in text and took < 5, text
                before = access.read_bytes() if access.exists() else b""
                error, text, _ = await call(client, "recall", query="deploy\u0000window")
                assert error and text == "memctl: error: the argument query contains a NUL character (hint: remove it; memctl stores text)"
                assert (access.read_bytes() if access.exists() else b"") == before
                error, text, _ = await call(client, "remember", name="nul-body", description="a body with a NUL", body="a\u0000b")
                assert error and "the argument body contains a NUL character" in text
                error, text, _ = await call(client, "ledger_append", name="episodes", records=[{"k": "v" * (70 << 10)}])
                assert error and "the argument records[0].k is" in text
                error, text, _ = await call(client, "recall", query="deploys weekday mornings")  # the bomb is skipped
                assert not error and "deploy-window" in text
                error, text, _ = await call(client, "context")
                assert not error and "deploy-window" in text
                shown = await client.read_resource("memctl://index")
                assert "deploy-window" in shown.contents[0].text
                index.write_text(index.read_text(encoding="utf-8") + "- x\n" * (INDEX_LIMIT // 4), encoding="utf-8")
                with pytest.raises(Exception, match="an index file may be at most 4 MiB"):
                    await client.read_resource("memctl://index")

    anyio.run(scenario)
    assert not (bombed / "memory" / "nul-body.md").exists()
    stored = [p for p in bombed.rglob("*") if p.is_file() and not {".git", ".memctl"} & set(p.relative_to(bombed).parts)]
    assert not [p for p in stored + list((bombed / ".memctl" / "access").glob("*.tsv")) if b"\0" in p.read_bytes()]
    # The old code: a NUL stored from an MCP query failed doctor from then on. Here doctor names the bomb and
    # the oversized index (exit 1) and nothing else: no NUL anywhere, no traceback.
    after = run(bombed, "doctor", ok=(1,))
    assert "NUL" not in after.stdout + after.stderr and "bomb.md" in after.stdout, after.stdout + after.stderr


def test_numbers_too_big_for_a_double_or_a_count_are_one_line(root):
    """helper-72: `ledger rows --tail 99999999999999999999` and a 400-digit number given to `state update
    --from-json` were tracebacks (OverflowError), a 5,000-digit one a ValueError naming a Python function."""
    run(root, "ledger", "create", "themes", "--columns", "date,theme")
    run(root, "ledger", "append", "themes", "date=2026-05-01", "theme=a")
    rows = run(root, "ledger", "rows", "themes", "--tail", "9" * 20)
    assert rows.stdout == "2026-05-01\ta\n"
    head = git(root, "rev-parse", "HEAD")
    for digits, said in ((400, "'done' must be a finite number, not a whole number of 401 digits"), (5000, "a number of over 4300 digits")):
        refused = run(root, "state", "update", "--from-json", "-", input='{"done": 1' + "0" * digits + "}", ok=(2,))
        assert refused.stderr.startswith(f"memctl: error: stdin: {said}") and refused.stderr.count("\n") == 1
    assert git(root, "rev-parse", "HEAD") == head


def test_an_endless_input_is_refused_at_its_limit(root, tmp_path):
    """helper-72: `state update --from-json -`, `remember --body -`, `ledger append -`, `--queries FILE` read the
    whole input first: `< /dev/zero` grew until MemoryError (a traceback) or the machine ran out of memory."""
    from memctl.fsutil import INPUT_LIMIT

    run(root, "ledger", "create", "themes", "--columns", "date,theme")
    head = git(root, "rev-parse", "HEAD")
    endless = b"0" * (INPUT_LIMIT + 10)
    for args, name in ((("state", "update", "--from-json", "-"), "stdin"), (("remember", "z", "-d", "x", "--body", "-"), "--body from stdin"),
                       (("ledger", "append", "themes", "-"), "stdin")):
        refused = run(root, *args, input=endless, ok=(1,))
        assert refused.stderr.startswith(f"memctl: error: {name} is over 64 MiB: more than a command reads at once"), refused.stderr
    big = tmp_path / "queries.txt"
    big.write_bytes(endless)
    refused = run(root, "recall", "--queries", str(big), ok=(2,))  # (recall's 1 is "nothing relevant")
    assert f"{big} is over 64 MiB" in refused.stderr and refused.stderr.count("\n") == 1
    assert git(root, "rev-parse", "HEAD") == head


def test_a_state_md_over_its_limit_is_named_not_read_and_replaced_by_the_next_update(root, pinned_clock):
    """helper-81: a pushed 185 MB STATE.md (1.5 MB on the remote) was read whole by `state show`, `state
    check`, `doctor` and `context` (900 MB each); a 2 GB one would have exhausted the machine."""
    run(root, "state", "update")
    state = root / "state" / "STATE.md"
    state.write_bytes(state.read_bytes() + b"| filler | 1 |\n" * (STATE_LIMIT // 15 + 1))
    commit_all(root, "a huge STATE.md from the remote")
    size = state.stat().st_size
    reason = f"{size} bytes; a STATE.md may be at most 4 MiB (docs/FORMAT.md, Limits), so memctl does not read it"
    shown = run(root, "state", "show", ok=(1,))
    assert shown.stderr.splitlines()[0].startswith(f"memctl: error: state/STATE.md is {reason}"), shown.stderr
    context = run(root, "context")
    assert f"memctl: warning: left out state/STATE.md: {reason}" in context.stderr and "| filler |" not in context.stdout
    assert f"state/STATE.md: error: {reason} (the next `memctl state update` replaces it)" in run(root, "doctor", ok=(1,)).stdout
    run(root, "state", "update")
    assert state.stat().st_size < 10_000 and "too-big" not in run(root, "doctor", "--json", ok=(0, 1)).stdout
    # Its history: the huge version is left out, unread (`state history`, the ui's state page), with a warning.
    history = run(root, "state", "history", "--json")
    assert len(json.loads(history.stdout)) == 2 and "| filler |" not in history.stdout, history.stdout
    assert ("memctl: warning: left out 1 committed version of state/STATE.md over 4 MiB: a STATE.md may be at most "
            "4 MiB (docs/FORMAT.md, Limits), so memctl does not read it") in history.stderr, history.stderr
