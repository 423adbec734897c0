"""memctl's block in Codex's config.toml, edited as text so every other byte of the file stays.

Codex's config.toml is written by hand, with comments and its own layout, and Python has no TOML
writer that keeps them (tomllib only reads). So memctl owns one marked block at the end of the
file: `# >>> memctl ...` to `# <<< memctl <<<`, holding `[mcp_servers.memctl]` and the tables of
its read tools. Install appends or replaces that block; uninstall removes exactly it, and the
marker says what install had to add around it (a newline the file lacked, or the whole file), so
the file comes back byte for byte. Every text written is parsed with tomllib first: what would not
be valid TOML (an inline `mcp_servers = {...}`, a hand-written `[mcp_servers.memctl]`) is refused
and nothing is written.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..errors import BadInput, Refused

BEGIN = "# >>> memctl: written by `memctl agent install codex`; `memctl agent uninstall codex` removes it"
END = "# <<< memctl <<<"
NEWLINE_ADDED = " (newline added)"  # the file lacked a final newline: uninstall takes it back
CREATED = " (file created)"  # the file did not exist: uninstall removes it
_BLOCK = re.compile("(?P<begin>^" + re.escape(BEGIN) + r"(?P<flags>[^\r\n]*)\r?\n).*?^" + re.escape(END) + r"(?:\r?\n)?",
                    re.MULTILINE | re.DOTALL)


def parse(text: str, path: Path) -> dict[str, Any]:
    """The TOML document; BadInput naming the file, line and column when it is not valid TOML."""
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{path}: not valid TOML ({exc})", hint="fix the file by hand; nothing was written") from None


def _string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string


def block(server: dict[str, Any], read_tools: tuple[str, ...], flags: str = "") -> str:
    """memctl's block: the server table, its environment, and `approval_mode = "approve"` per read tool
    (the other tools keep Codex's own approval)."""
    lines = [BEGIN + flags, f"[mcp_servers.{server['name']}]", f"command = {_string(server['command'])}",
             "args = [" + ", ".join(_string(a) for a in server["args"]) + "]"]
    env = ", ".join(f"{key} = {_string(value)}" for key, value in server["env"].items())
    lines.append(f"env = {{ {env} }}")
    for tool in read_tools:
        lines += ["", f"[mcp_servers.{server['name']}.tools.{tool}]", 'approval_mode = "approve"']
    return "\n".join(lines + [END]) + "\n"


def split(text: str) -> tuple[str, str | None, str]:
    """(the text without memctl's block, the block, its flags); block None when there is none."""
    found = _BLOCK.search(text)
    if not found:
        return text, None, ""
    flags = found.group("flags")
    before, after = text[: found.start()], text[found.end():]
    if NEWLINE_ADDED in flags and before.endswith("\n") and not after:
        before = before[: -2 if before.endswith("\r\n") else -1]
    return before + after, found.group(0), flags


def with_block(text: str | None, server: dict[str, Any], read_tools: tuple[str, ...], path: Path) -> str:
    """The file's text with memctl's block in it (appended, or replacing the one there)."""
    rest, _, flags = split(text or "")
    newline = "\r\n" if "\r\n" in rest else "\n"  # a file written on Windows keeps its line ends
    if text is None:
        flags = CREATED
    elif rest and not rest.endswith("\n"):
        flags = NEWLINE_ADDED
    elif CREATED not in flags:
        flags = ""
    others = parse(rest, path).get("mcp_servers")
    if isinstance(others, dict) and set(others.get(server["name"]) or {}) - {"tools"}:  # (your tools' approvals: kept)
        raise Refused(f"{path} already has an [mcp_servers.{server['name']}] table that memctl did not write; "
                      "nothing was written", hint="remove or rename that table, then install again")
    found = _BLOCK.search(text or "")
    if found is not None:  # replaced where it is: tables of yours after it (a tool's approval) stay after it
        new = text[: found.start()] + block(server, read_tools, found.group("flags")).replace("\n", newline) + text[found.end():]
    else:
        new = rest + (newline if flags == NEWLINE_ADDED else "") + block(server, read_tools, flags).replace("\n", newline)
    parse(new, path)  # e.g. an inline `mcp_servers = {...}` cannot take a new table
    return new


def without_block(text: str, path: Path, name: str) -> tuple[str | None, bool]:
    """(the file's text without memctl's block, None when install created the file; whether there was one).
    Refused when tables of yours outside the block belong to memctl's server (a tool's
    `approval_mode` you set): alone, without the server's table, they stop Codex from starting."""
    rest, found, flags = split(text)
    if found is None:
        return text, False
    servers = parse(rest, path).get("mcp_servers")
    left = servers.get(name) if isinstance(servers, dict) else None
    if isinstance(left, dict) and left:
        tables = [f"[mcp_servers.{name}.tools.{tool}]" for tool in (left.get("tools") or {})] or [f"[mcp_servers.{name}]"]
        raise Refused(f"{path} has {', '.join(tables)} outside memctl's block: without memctl's server they stop Codex "
                      "from starting; nothing was removed", hint="delete those tables by hand, then uninstall again")
    return (None if CREATED in flags and not rest else rest), True


def server(text: str, path: Path, name: str) -> dict[str, Any] | None:
    """The `[mcp_servers.NAME]` table of the file, if any."""
    servers = parse(text, path).get("mcp_servers")
    entry = servers.get(name) if isinstance(servers, dict) else None
    return entry if isinstance(entry, dict) else None
