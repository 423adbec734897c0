"""`memctl mcp`'s relay (memctl/integrations/mcp_fast.py): initialize, tools/list and ping answered before
the SDK is imported must be exactly what the SDK answers, and everything else must reach the SDK."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from conftest import REPO
from memctl import __version__
from memctl.integrations import mcp_fast

pytest.importorskip("mcp")


def test_the_manifest_is_what_the_sdk_answers(root):
    """The recorded answers equal the SDK's own for the tools as defined now (regenerate:
    python -m memctl.integrations.mcp_fast)."""
    assert mcp_fast.MANIFEST.read_text(encoding="utf-8") == mcp_fast.dumped(mcp_fast.record(root))


def _exchange(root, messages: list[dict | bytes], relay: bool, expect: tuple[str, ...] = ()) -> list[dict]:
    """Send the messages to `memctl mcp` as raw JSON lines (bytes: a line as it is), read until every
    request has its reply, and the ids in `expect` (JSON: "null") theirs (at most 120 s), then close
    stdin: every line the server wrote."""
    import select

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop(mcp_fast.OFF_ENV, None)
    if not relay:
        env[mcp_fast.OFF_ENV] = "1"
    wanted = {json.dumps(m["id"]) for m in messages if isinstance(m, dict) and "id" in m} | set(expect)
    proc = subprocess.Popen([sys.executable, "-m", "memctl", "mcp", "--root", str(root)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    proc.stdin.write(b"".join(m if isinstance(m, bytes) else json.dumps(m, ensure_ascii=False).encode() + b"\n"
                              for m in messages))
    proc.stdin.flush()
    replies, buffer, deadline = [], b"", time.monotonic() + 120
    while wanted - {json.dumps(r.get("id")) for r in replies} and time.monotonic() < deadline:
        if select.select([proc.stdout], [], [], 1)[0]:
            chunk = os.read(proc.stdout.fileno(), 1 << 16)
            if not chunk:
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            replies += [json.loads(line) for line in lines]
    proc.stdin.close()
    proc.stdin = None  # communicate() must not flush it again
    rest, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    return replies + [json.loads(line) for line in (buffer + rest).splitlines()]


def _by_id(replies: list[dict]) -> dict:
    return {json.dumps(r.get("id")): r for r in replies}


INIT = {"capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}
SESSION = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "1999-01-01", **INIT}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": "list", "method": "tools/list"},
    {"jsonrpc": "2.0", "id": 3, "method": "ping"},
    {"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {"cursor": "x"}},  # the SDK's to answer
    {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "recall", "arguments": {"query": "デプロイ"}}},
    {"jsonrpc": "2.0", "id": 6, "method": "resources/list"},
    {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"_meta": {"progressToken": 9}}},
]


def test_the_relay_answers_as_the_sdk_does(root):
    """One session with and without the relay: the same replies, id by id, nothing lost or doubled (the
    relayed initialize's own answer never reaches the client); an unknown protocol version gets the latest."""
    fast, slow = _exchange(root, SESSION, relay=True), _exchange(root, SESSION, relay=False)
    assert len(fast) == len(slow) == 7
    assert _by_id(fast) == _by_id(slow)
    init = _by_id(fast)["1"]["result"]
    assert init["protocolVersion"] == mcp_fast.load()["latest"] and init["serverInfo"] == {"name": "memctl", "version": __version__}
    assert len(_by_id(fast)['"list"']["result"]["tools"]) == 10  # the nine of issue 26 and `get` (issue 27)


def test_a_client_that_does_not_start_with_initialize_talks_to_the_sdk(root):
    """A request before initialize, or a second initialize, is never answered from the manifest."""
    messages = [{"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocolVersion": "2025-06-18", **INIT}},
                {"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"protocolVersion": "2025-06-18", **INIT}},
                {"jsonrpc": "2.0", "id": 4, "method": "tools/list"}]
    fast, slow = _exchange(root, messages, relay=True), _exchange(root, messages, relay=False)
    assert _by_id(fast) == _by_id(slow) and len(fast) == 4
    assert "error" in _by_id(fast)["1"]


def test_a_line_that_is_not_json_or_not_unicode_gets_a_parse_error_not_silence(root):
    """Found with the MCP Inspector: the SDK drops such a line without a word, and the client waits out
    its own timeout. The relay answers JSON-RPC's parse error (under the request's id when it has one),
    and the session goes on."""
    lone = b'{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "recall", "arguments": {"query": "\\ud800"}}}\n'
    messages = [SESSION[0], SESSION[1], b"not json at all\n", b"\xff\xfe\xfd\n", lone,
                b'{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"reason": "\\udc00"}}\n', SESSION[3]]
    replies = _exchange(root, messages, relay=True, expect=("null",))
    nulls = [r for r in replies if r.get("id") is None]
    assert len(nulls) == 2 and all(r["error"]["code"] == -32700 and "not JSON in UTF-8" in r["error"]["message"] for r in nulls)
    by_id = _by_id(replies)
    assert by_id["9"]["error"]["code"] == -32700 and "not Unicode" in by_id["9"]["error"]["message"]
    assert by_id["3"]["result"] == {} and len(replies) == 5  # ping answered; the notification got nothing


@pytest.mark.parametrize("argv, expected", [
    (["mcp"], {"root": None, "store": None}),
    (["mcp", "--root", "/s"], {"root": "/s", "store": None}),
    (["mcp", "--root=/s", "--store", "/t"], {"root": "/s", "store": "/t"}),
    (["--root", "/g", "mcp"], {"root": "/g", "store": None}),
    (["--root", "/g", "mcp", "--root", "/s"], {"root": "/s", "store": None}),
    (["mcp", "--help"], None), (["mcp", "extra"], None), (["mcp", "--root"], None), (["mcp", "--bogus", "x"], None),
])
def test_memctl_mcp_skips_typer_for_its_plain_forms(argv, expected):
    """`memctl mcp` is on the fast path (no Typer: tools listed sooner); anything else is Typer's to report."""
    from memctl.cli import fast

    plan = fast._plan(argv)
    assert (plan[3]["mcp"] if plan else None) == expected


def test_a_batch_gets_an_invalid_request_error_not_silence(root):
    """A JSON-RPC batch (an array; MCP 2025-06-18 has no batching) was dropped by the SDK unanswered:
    the client waited out its timeout. It gets JSON-RPC's Invalid Request now, and the session goes on."""
    batch = (json.dumps([SESSION[2], SESSION[3]]) + "\n").encode("utf-8")
    replies = _exchange(root, [SESSION[0], SESSION[1], batch, SESSION[3]], relay=True, expect=("null",))
    nulls = [r for r in replies if r.get("id") is None]
    assert len(nulls) == 1 and nulls[0]["error"]["code"] == -32600 and "batch" in nulls[0]["error"]["message"]
    assert _by_id(replies)["3"]["result"] == {} and len(replies) == 3


def test_a_tool_call_whose_arguments_are_not_an_object_is_told_which_part_is_wrong(root):
    """The SDK answered `arguments: ["deploy"]` with a bare "Invalid request parameters": the client
    (or the model writing the call) could not tell what to change. Same code (-32602), a message that
    names the part; a call with no arguments, or null ones, still reaches the tool."""
    call = {"jsonrpc": "2.0", "method": "tools/call"}
    wrong = [{**call, "id": 10, "params": {"name": "recall", "arguments": ["deploy"]}},
             {**call, "id": 11, "params": "recall"},
             {**call, "id": 12, "params": {"name": 7, "arguments": {}}}]
    fine = [{**call, "id": 13, "params": {"name": "recall", "arguments": None}},
            {**call, "id": 14, "params": {"name": "recall", "arguments": {"query": "デプロイ"}}}]
    by_id = _by_id(_exchange(root, [SESSION[0], SESSION[1], *wrong, *fine], relay=True))
    said = {ident: by_id[ident]["error"] for ident in ("10", "11", "12")}
    assert {e["code"] for e in said.values()} == {-32602}
    assert said["10"]["message"] == ("Invalid params: tools/call: params.arguments must be a JSON object of the tool's "
                                     "arguments, not an array")
    assert said["11"]["message"] == "Invalid params: tools/call: params must be a JSON object, not a string"
    assert said["12"]["message"] == ("Invalid params: tools/call: params.name must be the tool's name as a string, "
                                     "not a number")
    assert by_id["13"]["result"]["isError"] and "query" in by_id["13"]["result"]["content"][0]["text"]
    assert by_id["14"]["result"]["isError"] is False


def test_requests_sent_before_the_end_of_input_are_all_answered(root):
    """`printf requests | memctl mcp`: the SDK cancelled what was in flight at the end of its input, so
    the tool calls were carried out (their rows committed) and never answered. Every request before
    the end of input gets its answer now, and the writes are the ones answered."""
    (root / "memctl.toml").write_text((root / "memctl.toml").read_text(encoding="utf-8") +
                                      '\n[ledgers.notes]\ncolumns = ["who", "text"]\n', encoding="utf-8")
    (root / "ledgers" / "notes.tsv").write_text("who\ttext\n", encoding="utf-8")
    calls = [{"jsonrpc": "2.0", "id": f"w{i}", "method": "tools/call",
              "params": {"name": "ledger_append", "arguments": {"name": "notes", "records": [{"who": "sh", "text": f"行{i}"}]}}}
             for i in range(5)]
    lines = [SESSION[0], SESSION[1], *calls, {"jsonrpc": "2.0", "id": 9, "method": "ping"}]
    env = {**os.environ, "PYTHONPATH": str(REPO), "MEMCTL_NO_COMMIT": "1"}
    env.pop(mcp_fast.OFF_ENV, None)
    done = subprocess.run([sys.executable, "-m", "memctl", "mcp", "--root", str(root)], env=env, capture_output=True,
                          input=b"".join(json.dumps(m, ensure_ascii=False).encode() + b"\n" for m in lines), timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    answered = _by_id([json.loads(line) for line in done.stdout.splitlines()])
    assert set(answered) == {"1", "9"} | {f'"w{i}"' for i in range(5)}, sorted(answered)
    assert all(not answered[f'"w{i}"']["result"].get("isError") for i in range(5))
    assert (root / "ledgers" / "notes.tsv").read_text(encoding="utf-8").count("sh\t行") == 5


@pytest.mark.parametrize("last", [
    {"jsonrpc": "2.0", "id": None, "method": "tools/list"},
    {"id": 5, "method": "ping"},
    {"jsonrpc": "2.0", "id": 1.0, "method": "tools/call", "params": {"name": "recall", "arguments": {"query": "x"}}},
    [{"jsonrpc": "2.0", "id": 2, "method": "ping"}],
])
def test_a_request_the_sdk_never_answers_does_not_hold_the_server_at_the_end_of_input(root, last):
    """Review of the change above: an invalid request (null or float id, no jsonrpc, a batch) is dropped by
    the SDK unanswered, and the server waited five minutes for its answer after the end of input."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop(mcp_fast.OFF_ENV, None)
    lines = [SESSION[0], SESSION[1], last]
    done = subprocess.run([sys.executable, "-m", "memctl", "mcp", "--root", str(root)], env=env, capture_output=True,
                          input=b"".join(json.dumps(m).encode() + b"\n" for m in lines),
                          timeout=mcp_fast.ANSWER_WAIT - 15)  # a hang guard: it would wait out ANSWER_WAIT
    assert done.returncode == 0, done.stderr.decode()
