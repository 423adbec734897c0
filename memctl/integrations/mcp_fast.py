"""`memctl mcp`'s first answers, given before the SDK is imported (it takes a second and more).

A client lists the tools right after `initialize`, and Codex or Claude Code send their first
model request without waiting long: the tools must be there within 300 ms of the start
(bench/bench_mcp_start.py). So `relay()` puts this module between the client and the SDK:
fd 0 and fd 1 become pipes to the SDK's stdio transport, and two threads carry the messages.
Until and after the SDK is up, the client's `initialize` (the handshake era's, first), `tools/list`
(without a cursor) and `ping` are answered here from MANIFEST: the SDK's own answers, recorded per
protocol version from the very tool definitions of mcp_server.py (`record`, `python -m
memctl.integrations.mcp_fast`; tests/cli/test_mcp_fast.py holds the file equal to what the SDK
answers). Everything else goes to the SDK unchanged, in order; the `initialize` answered here is
passed on too (under its own id, its answer dropped), so the SDK's session is in the same state
as if it had answered. A first message that is not `initialize` (the 2026 stateless era) turns
the relay into a plain pipe. Only json, os, threading are imported here.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any, Callable

MANIFEST = Path(__file__).with_name("mcp_manifest.json")
REPLAY_ID = "memctl-relayed-initialize"
END = b"memctl-relay-end\n"  # not JSON: never a line the SDK writes
FAST_METHODS = ("tools/list", "ping")
OFF_ENV = "MEMCTL_MCP_NO_RELAY"  # 1: the SDK reads stdin itself (how the manifest is checked)
ANSWER_WAIT = 60.0  # seconds: at the client's end of input, the longest wait for the SDK's next answer


def load() -> dict[str, Any] | None:
    """The recorded answers, or None when the file is missing or unreadable (then there is no relay)."""
    try:
        return json.loads(MANIFEST.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def answer(manifest: dict[str, Any], message: Any, version: str | None, version_text: str) -> tuple[bytes | None, str | None]:
    """(the reply to send, the negotiated version) when `message` is answered from the manifest, else (None, version)."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or "id" not in message:
        return None, version
    method, params, ident = message.get("method"), message.get("params"), message["id"]
    if not isinstance(ident, (str, int)) or isinstance(ident, bool):
        return None, version
    if method == "initialize" and version is None:
        if not (isinstance(params, dict) and isinstance(params.get("protocolVersion"), str)
                and isinstance(params.get("capabilities"), dict) and isinstance(params.get("clientInfo"), dict)
                and isinstance(params["clientInfo"].get("name"), str)
                and isinstance(params["clientInfo"].get("version"), str)):
            return None, version  # the SDK words the error
        requested = params["protocolVersion"]
        version = requested if requested in manifest["versions"] else manifest["latest"]
        result = json.loads(json.dumps(manifest["versions"][version]["initialize"]))
        result["serverInfo"]["version"] = version_text
    elif method in FAST_METHODS and version is not None and (params is None or params == {} or (
            isinstance(params, dict) and set(params) == {"_meta"} and isinstance(params["_meta"], dict)
            and set(params["_meta"]) <= {"progressToken"})):
        result = manifest["versions"][version][method]
    else:
        return None, version
    reply = {"jsonrpc": "2.0", "id": ident, "result": result}
    return (json.dumps(reply, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8"), version


def unreadable(line: bytes) -> tuple[Any, bytes | None]:
    """(the message, None), or (None, the error to answer) for a line that is not JSON in UTF-8 or
    holds a text that is not Unicode (a lone surrogate, `"\\ud800"`): JSON-RPC's parse error (-32700),
    under the request's id when there is one. A notification is answered by nothing; a blank line passes."""
    if not line.strip():
        return None, None
    try:
        message = json.loads(line)
    except ValueError:  # UnicodeDecodeError included
        ident, why = None, "not JSON in UTF-8"
    else:
        if isinstance(message, list):  # a JSON-RPC batch: MCP 2025-06-18 has none, and the SDK drops it unanswered
            reply = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid Request: a batch (a JSON "
                     "array) is not supported: send one request a line"}}
            return None, (json.dumps(reply, separators=(",", ":")) + "\n").encode("utf-8")
        try:
            json.dumps(message, ensure_ascii=False).encode("utf-8")
            return (message, None) if (wrong := _wrong_call(message)) is None else (None, wrong)
        except UnicodeEncodeError:
            ident = message.get("id") if isinstance(message, dict) else None
            if isinstance(message, dict) and "id" not in message:
                return None, b""  # a notification: dropped, as there is nobody to answer
            why = "a text in it is not Unicode (a lone surrogate such as \\ud800)"
    if not isinstance(ident, (str, int)) or isinstance(ident, bool):
        ident = None
    reply = {"jsonrpc": "2.0", "id": ident, "error": {"code": -32700, "message": f"Parse error: {why}"}}
    return None, (json.dumps(reply, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def _wrong_call(message: Any) -> bytes | None:
    """The error to answer a `tools/call` whose params or arguments are not JSON objects (-32602), or
    None: the SDK answers those with a bare "Invalid request parameters" that does not say which."""
    if not (isinstance(message, dict) and message.get("method") == "tools/call" and "id" in message):
        return None
    from ..values import json_kind

    params = message.get("params")
    if not isinstance(params, dict):
        why = f"params must be a JSON object, not {json_kind(params)}"
    elif not isinstance(params.get("name"), str):
        why = f"params.name must be the tool's name as a string, not {json_kind(params.get('name'))}"
    elif not isinstance(params.get("arguments", {}), (dict, type(None))):
        why = f"params.arguments must be a JSON object of the tool's arguments, not {json_kind(params['arguments'])}"
    else:
        return None
    ident = message["id"] if isinstance(message["id"], (str, int)) and not isinstance(message["id"], bool) else None
    reply = {"jsonrpc": "2.0", "id": ident, "error": {"code": -32602, "message": f"Invalid params: tools/call: {why}"}}
    return (json.dumps(reply, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def relay(version_text: str) -> Callable[[], None] | None:
    """Start the relay (see the module's doc); returns `finish`, to call when the SDK has returned,
    or None when there is no manifest or MEMCTL_MCP_NO_RELAY=1 (the SDK then reads stdin itself)."""
    if os.environ.get(OFF_ENV, "") not in ("", "0"):
        return None
    manifest = load()
    if manifest is None:
        return None
    client_in, client_out = os.dup(0), os.dup(1)
    sdk_in, to_sdk = os.pipe()
    from_sdk, sdk_out = os.pipe()
    os.dup2(sdk_in, 0)
    os.dup2(sdk_out, 1)
    os.close(sdk_in)  # sdk_out is kept: `finish` writes END through it after the SDK's last line
    lock = threading.Lock()
    # Requests the SDK has not answered yet, by id: at the end of the client's input the SDK's input is
    # closed only once they are answered (the SDK cancels what is in flight at its end of input, and a
    # write it had done went unanswered: `printf requests | memctl mcp`).
    pending: set[str] = set()
    settled = threading.Condition()
    sdk_gone = threading.Event()

    def to_client(data: bytes) -> None:
        with lock:
            _write_all(client_out, data)

    def track(message: Any, *, answers: bool) -> None:
        """Follow one message (a batch is not followed: the SDK answers none of it)."""
        if not isinstance(message, dict):
            return
        ident = message.get("id")
        if answers and "id" in message and ("result" in message or "error" in message):
            done = json.dumps(ident)
        elif not answers and message.get("method") == "notifications/cancelled" and isinstance(message.get("params"), dict):
            done = json.dumps(message["params"].get("requestId"))
        else:  # a request the SDK will answer: JSON-RPC 2.0, an id that is a string or an integer, a method
            if (not answers and message.get("jsonrpc") == "2.0" and isinstance(message.get("method"), str)
                    and isinstance(ident, (str, int)) and not isinstance(ident, bool)):
                with settled:
                    pending.add(json.dumps(ident))
            return
        with settled:
            pending.discard(done)
            settled.notify_all()

    def from_client() -> None:
        version: str | None = None
        first = True
        try:
            with open(client_in, "rb", buffering=1 << 16) as stream:
                for line in stream:
                    if first or version is not None:
                        message, refused = unreadable(line)
                        if refused is not None:  # the SDK drops such a line unanswered: the client would wait
                            to_client(refused)
                            continue
                        answered, negotiated = answer(manifest, message, version, version_text)
                        if answered is not None:
                            to_client(answered)
                            if version is None:  # the initialize: the SDK's session must see it too
                                message = {**message, "id": REPLAY_ID}
                                line = json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n"
                                version = negotiated
                            else:
                                continue
                        first = False
                    if not (first or version is not None):  # a plain pipe: read only to follow the requests
                        try:
                            message = json.loads(line)
                        except ValueError:
                            message = None
                    track(message, answers=False)
                    _write_all(to_sdk, line)
            with settled:  # every request answered (or the SDK gone, or no answer for a while) before the end of input
                while pending and not sdk_gone.is_set():
                    before = len(pending)
                    settled.wait_for(lambda: len(pending) < before or sdk_gone.is_set(), timeout=ANSWER_WAIT)
                    if len(pending) >= before:
                        break  # nothing answered for ANSWER_WAIT seconds: the SDK will not answer those
        except OSError:  # the SDK is gone: nothing more to carry
            pass
        finally:
            os.close(to_sdk)  # the SDK reads the end of input, and stops

    def from_server() -> None:
        try:
            carry()
        finally:
            sdk_gone.set()
            with settled:
                settled.notify_all()

    def carry() -> None:
        with open(from_sdk, "rb", buffering=1 << 16) as stream:
            for line in stream:
                if line == END:
                    return
                if b'"id"' in line:
                    try:
                        track(json.loads(line), answers=True)
                    except ValueError:
                        pass
                if REPLAY_ID.encode() in line:
                    try:
                        message = json.loads(line)
                    except ValueError:
                        message = None
                    if isinstance(message, dict) and message.get("id") == REPLAY_ID:
                        if "error" in message:  # never seen: the checks above are the SDK's
                            sys.stderr.write(f"memctl: warning: the SDK refused the relayed initialize: {message['error']}\n")
                        continue
                try:
                    to_client(line)
                except OSError:  # the client is gone
                    return

    reader = threading.Thread(target=from_client, name="memctl-mcp-from-client", daemon=True)
    writer = threading.Thread(target=from_server, name="memctl-mcp-to-client", daemon=True)
    reader.start()
    writer.start()

    def finish() -> None:
        """After the SDK returned: everything it wrote reaches the client before the process ends."""
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        _write_all(sdk_out, END)  # after everything the SDK wrote (it flushes each message)
        writer.join(timeout=5)
        os.dup2(client_out, 1)

    return finish


def record(root: Path) -> dict[str, Any]:
    """The SDK's answers to initialize, tools/list and ping at each handshake protocol version, for the
    server mcp_server.build makes (serverInfo.version is set when answering)."""
    import anyio
    import mcp_types
    from mcp.shared.message import SessionMessage
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

    from . import mcp_server

    low = mcp_server.build(root)._lowlevel_server

    async def one(version: str) -> dict[str, Any]:
        send_in, read_in = anyio.create_memory_object_stream(8)
        send_out, read_out = anyio.create_memory_object_stream(8)
        answers: dict[str, Any] = {}
        init = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "memctl-record", "version": "0"}}
        async with anyio.create_task_group() as group:
            group.start_soon(low.run, read_in, send_out, low.create_initialization_options())
            for number, (method, params) in enumerate([("initialize", init), ("tools/list", None), ("ping", None)], 1):
                request = {"jsonrpc": "2.0", "id": number, "method": method, **({"params": params} if params else {})}
                await send_in.send(SessionMessage(mcp_types.jsonrpc_message_adapter.validate_python(request)))
                reply = json.loads((await read_out.receive()).message.model_dump_json(by_alias=True, exclude_unset=True))
                answers[method] = reply["result"]
                if method == "initialize":
                    answers[method]["serverInfo"]["version"] = ""
                    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
                    await send_in.send(SessionMessage(mcp_types.jsonrpc_message_adapter.validate_python(note)))
            await send_in.aclose()
        return answers

    versions = {version: anyio.run(one, version) for version in HANDSHAKE_PROTOCOL_VERSIONS}
    return {"latest": LATEST_HANDSHAKE_VERSION, "versions": versions}


def dumped(manifest: dict[str, Any]) -> str:
    return json.dumps(manifest, ensure_ascii=False, indent=1, sort_keys=True) + "\n"


if __name__ == "__main__":  # regenerate the manifest: python -m memctl.integrations.mcp_fast
    import tempfile

    from ..store import init_store

    with tempfile.TemporaryDirectory() as tmp:
        init_store(Path(tmp))
        MANIFEST.write_text(dumped(record(Path(tmp))), encoding="utf-8")
    print(f"wrote {MANIFEST}")
