"""`memctl mcp`: the store as an MCP server over stdio, built on the official `mcp` SDK.

Each tool makes one library call (as a CLI command does) and returns a
JSON-able dict shaped like the command's --json output. A memctl error comes
back as an MCP tool error (isError) whose text is the CLI's line,
`memctl: error: <what> (hint: <what to do>)`, and the server keeps serving.
Each tool declares a title, the MCP hints (read-only, destructive, idempotent;
never open-world) and an outputSchema generated from its shape in jsonshape.py
(`mcp_<tool>`); its arguments are checked before the SDK's own validation, so a
bad one is a `memctl: error:` line too (mcp_input.argument_error).
Resources: MEMORY.md, one fact file by name, STATE.md, each listed only while
its file exists. The store is opened again for each call, so edits of
memctl.toml are seen without a restart. `serve` starts mcp_fast's relay before
importing the SDK: the handshake and tools/list are answered within a few
hundred milliseconds of the start.

The SDK runs each (synchronous) tool in a worker thread; the store lock and
the recall index's lock serialise what must be serialised, as between
processes. No `from __future__ import annotations` here: the SDK reads the
tools' annotations (with their descriptions) to build the input schemas.
"""

import functools
import os
import threading
import time
from pathlib import Path
from typing import Annotated, Any, Callable, Optional

from .. import __version__
from ..errors import BadInput, MemctlError, NotFound, install_hint
from ..fsutil import read_text, refuse_link

INSTRUCTIONS = """\
memctl is this agent's durable memory: facts (one markdown file each, indexed in MEMORY.md),
ledgers of events (episodes: decisions, errors, successes, feedback) and STATE.md, in git.
recall before work that past decisions may affect; remember what stays true (a user's rule,
a preference, a project fact); episode_add after a decision, a mistake or a success.
remember reports similar facts with scores: update (update=true) or supersede one instead
of writing a second copy."""


RESYNC_SECONDS = 2.0  # a fact file edited in place (no rename) is seen by `recall` within this time
# A tool call waits this long at most for texts to be embedded (a first recall on a large store
# embeds for minutes): then it answers from the vectors ready, says so, and the rest is embedded
# by a thread of the server (its progress logged on stderr). Clients time out at 10 s and more.
EMBED_SECONDS = 7.0


def _embed_seconds() -> float:
    """EMBED_SECONDS, or MEMCTL_EMBED_WAIT (seconds, >= 0) when set."""
    try:
        return max(0.0, float(os.environ.get("MEMCTL_EMBED_WAIT", "")))
    except ValueError:
        return EMBED_SECONDS
ACTIVE_SECONDS = 60.0  # after a recall, the index is kept synced in the background this long


def _stamp(paths: list[Path]) -> tuple:
    stamps = []
    for path in paths:
        try:
            st = os.stat(path)
            stamps.append((st.st_ino, st.st_size, st.st_mtime_ns))
        except FileNotFoundError:
            stamps.append(None)
    return tuple(stamps)


def _recall_index(after_sync: Callable[[Any], None] | None = None, *, keep_synced: bool = True):
    """`recall`'s index for a running server: one connection kept open, synced only when needed.

    `rindex.opened` brings the index up to date by stat-ing every fact file,
    which at 10,000 facts costs more than the query. A server answers many
    calls, so it syncs when a cheap signal says the store may have changed
    (the folders' and ledgers' stat: every memctl write and every rename-based
    save changes them) and at least every RESYNC_SECONDS (a fact file edited in
    place), and otherwise queries the connection it keeps. With `keep_synced`,
    for ACTIVE_SECONDS after a call a background thread does the periodic sync
    (then `after_sync(conn)`), so that an agent's next call, seconds later,
    does not pay for it; an idle server does nothing.
    """
    import sqlite3

    from .. import rindex

    state: dict[str, Any] = {"conn": None, "ino": None, "stamp": None, "synced": 0.0, "store": None,
                             "called": 0.0, "poller": None}
    lock = threading.Lock()

    def watched(s) -> list[Path]:
        from .. import access

        ledgers, pending = s.ledgers_dir, access.pending_path(s)
        return [s.memory_dir, s.archive_dir, ledgers, ledgers / "episodes.tsv", access.path_for(s),
                ledgers / "episode-tombstones.tsv", s.config_path, pending.parent, pending]

    def sync(s, stamp) -> None:
        with rindex.opened(s):
            pass  # synced under the index's own lock, as any memctl process does
        path = s.cache_dir / rindex.FILE
        ino = os.stat(path).st_ino
        if ino != state["ino"]:  # first call, or the index was rebuilt as a new file
            if state["conn"] is not None:
                state["conn"].close()
            state["conn"] = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
            state["ino"] = ino
        state["stamp"], state["synced"] = stamp, time.monotonic()

    def query(s, ask: Callable[[Any], Any]):
        with lock:
            stamp = _stamp(watched(s))
            if state["conn"] is None or stamp != state["stamp"] or time.monotonic() - state["synced"] > RESYNC_SECONDS:
                sync(s, stamp)
            state["store"], state["called"] = s, time.monotonic()
            if keep_synced and state["poller"] is None:
                state["poller"] = threading.Thread(target=poll, name="memctl-recall-sync", daemon=True)
                state["poller"].start()
            return ask(state["conn"])

    def poll() -> None:
        while True:
            time.sleep(RESYNC_SECONDS / 2)
            with lock:
                if time.monotonic() - state["called"] > ACTIVE_SECONDS:
                    state["poller"] = None
                    return
                if time.monotonic() - state["synced"] < RESYNC_SECONDS / 2:
                    continue  # a call synced just now
                s = state["store"]
                try:
                    sync(s, _stamp(watched(s)))
                    if after_sync is not None:
                        from .. import vcache

                        with vcache.answer_within(0.0):  # never embeds here, holding the lock: a thread does
                            after_sync(state["conn"])
                except Exception:  # noqa: BLE001 - the next call syncs again and reports what fails
                    state["synced"] = 0.0

    def forget_own_write(s) -> None:
        """After the server's own access-log row: not a change that needs a sync before the next call."""
        with lock:
            state["stamp"] = _stamp(watched(s))

    return query, forget_own_write


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, MemctlError):  # worded as the CLI words it: agents know the command line
        from ..cli import hints

        return f"memctl: error: {hints.one_line(exc, no_commit=False)}"  # (a tool has no --no-commit)
    return f"memctl: error: {type(exc).__name__}: {exc}".replace("\n", " ")


def _waiting_note(late) -> str:
    return (f"{late.waiting:,} texts are still being embedded in the background ({late.ready:,} are ready): until "
            "they are, only the ready ones are compared by meaning (recall ranks the others by keywords alone); "
            "ask again in a while for an answer over all of them")


def _redacted_note(redacted: dict[str, int]) -> str:
    found = sum(redacted.values())
    return (f"{found} secret{'s' if found != 1 else ''} redacted before writing ({', '.join(sorted(redacted))}): "
            "the stored text has [REDACTED:<kind>] in its place; allow_secrets=true stores the text as given")


def _tool_error(exc: BaseException):
    from mcp.types import CallToolResult, TextContent

    return CallToolResult(content=[TextContent(type="text", text=_error_text(exc))], is_error=True)


def build(root: Path):
    """The MCPServer for the store at `root` (not started)."""
    import inspect

    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
    from pydantic import Field

    from .. import jsonshape, resident
    from ..state import state_path
    from ..store import open_store
    from . import mcp_input

    server = MCPServer("memctl", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")

    def store():
        return open_store(root)

    def tool(title: str, *, read_only: bool = False, destructive: bool = False, idempotent: bool = False):
        """Register fn as a tool: its title and hints (docs/AGENTS.md, "The MCP server"), its docstring as the
        description, and the outputSchema of its shape `mcp_<name>` (memctl/jsonshape.py)."""
        from mcp.types import ToolAnnotations

        def register(fn: Callable[..., dict[str, Any]]):
            @functools.wraps(fn)
            def call(**kwargs):
                from .. import output, secrets, vcache

                try:
                    mcp_input.check(kwargs)  # sizes and NUL, before any work
                    with vcache.answer_within(_embed_seconds()) as late, secrets.tallied() as redacted:
                        result = fn(**kwargs)
                except (MemctlError, UnicodeError, ValueError, OSError) as exc:
                    return _tool_error(exc)
                notes = [*result.get("notes", [])]
                if redacted:
                    result["redacted"] = dict(sorted(redacted.items()))
                    notes.append(_redacted_note(redacted))
                if late.waiting:
                    notes.append(_waiting_note(late))
                if notes or "notes" in result:
                    result["notes"] = notes
                return output.json_safe(result)  # (the SDK would write NaN, which is no JSON)

            server.add_tool(call, name=fn.__name__, title=title, description=inspect.cleandoc(fn.__doc__ or ""),
                            annotations=ToolAnnotations(title=title, read_only_hint=read_only,
                                                        destructive_hint=destructive, idempotent_hint=idempotent,
                                                        open_world_hint=False))
            # The SDK would publish a generic object for dict[str, Any]: the documented shape instead.
            server._tool_manager.get_tool(fn.__name__).fn_metadata.output_schema = jsonshape.json_schema(f"@mcp_{fn.__name__}")
            return fn

        return register

    def resource(uri: str, name: str, description: str):
        def register(fn):
            @functools.wraps(fn)
            def read(**kwargs):
                try:
                    return fn(**kwargs)
                except NotFound as exc:
                    raise ResourceNotFoundError(_error_text(exc)) from None
                except (MemctlError, UnicodeError, ValueError, OSError) as exc:
                    raise ResourceError(_error_text(exc)) from None

            server.resource(uri, name=name, description=description, mime_type="text/markdown")(read)
            return fn

        return register

    vectors_for, refresh_vectors = resident.kept_vectors()
    index_query, own_write = _recall_index(after_sync=refresh_vectors)
    Text = Optional[str]
    Tags = Optional[list[str]]
    AllowSecrets = Annotated[bool, Field(description="Store the text as given; by default a secret in it (an API key, a token, "
                                                     "a password) is redacted.")]

    @tool("Remember a fact")
    def remember(
        name: Annotated[str, Field(description="Fact name: 1-80 ASCII letters, digits, - or _, not - first (the file is NAME.md).")],
        description: Annotated[Text, Field(description="One line: what MEMORY.md shows. Required for a new fact.")] = None,
        type: Annotated[Text, Field(description="user | feedback | project | reference | procedure.")] = None,
        why: Annotated[Text, Field(description="The **Why:** line of the body.")] = None,
        how: Annotated[Text, Field(description="The **How to apply:** line of the body.")] = None,
        body: Annotated[Text, Field(description="Free text of the body.")] = None,
        tags: Annotated[Tags, Field(description="Tags.")] = None,
        importance: Annotated[Optional[float], Field(description="0-1 (default by type).", ge=0, le=1)] = None,
        confidence: Annotated[Optional[float], Field(description="0-1: stated 1.0, inferred 0.7, observed 0.5.", ge=0, le=1)] = None,
        source: Annotated[Text, Field(description="Where it came from: session, URL, episode id.")] = None,
        expires: Annotated[Text, Field(description="The last day the fact holds (YYYY-MM-DD, local time; from the next day recall leaves it out), or an ISO-8601 time; an empty text with update=true clears it.")] = None,
        supersedes: Annotated[Tags, Field(description="Names of facts this one replaces (they are archived).")] = None,
        pin: Annotated[bool, Field(description="Pin the fact: always in the session-start context.")] = False,
        update: Annotated[bool, Field(description="Change an existing fact; fields not given are kept.")] = False,
        force: Annotated[bool, Field(description="Write even if a live fact has the same description.")] = False,
        strict: Annotated[bool, Field(description="Refuse near matches too, not only exact ones.")] = False,
        allow_secrets: AllowSecrets = False,
    ) -> dict[str, Any]:
        """Write one fact file and its MEMORY.md line, and commit them. Returns the near-duplicate check:
        `similar` lists live facts close to the description, each with its score and method (keywords or
        the embedder); an identical description is refused (update or supersede that fact instead)."""
        from .. import api

        s = store()
        change = api.remember(
            s, name, description, type=type, body=body, why=why, how=how, importance=importance,
            confidence=confidence, tags=tuple(tags) if tags is not None else None, source=source, expires=expires,
            supersedes=tuple(supersedes or ()), pinned=True if pin else None, update=update, force=force, strict=strict,
            allow_secrets=allow_secrets,
        )
        return {
            "action": change.action, "name": change.fact.name, "path": s.rel(change.fact.path), "commit": change.commit,
            "similar": [{"name": h.fact.name or h.fact.stem, **h.to_dict(s)} for h in change.similar],
            "superseded": [s.rel(f.path) for f in change.archived],
        }

    @tool("Recall facts and episodes", read_only=True, idempotent=True)
    def recall(
        query: Annotated[str, Field(description="What to look for, in Japanese or English.")],
        k: Annotated[int, Field(description="How many hits.", ge=1, le=100)] = 10,
        source: Annotated[str, Field(description="facts | episodes | docs (every document source) | a source's name | all.")] = "facts",
        mode: Annotated[Text, Field(description="keyword | vector | hybrid (default from memctl.toml).")] = None,
        type: Annotated[Text, Field(description="Only this fact or episode type.")] = None,
        tag: Annotated[Text, Field(description="Only items with this tag.")] = None,
        since: Annotated[Text, Field(description="Only items updated since this date (YYYY-MM-DD) or ISO-8601 time.")] = None,
        include_all: Annotated[bool, Field(description="Include superseded, archived and expired facts.")] = False,
        min_score: Annotated[Optional[float], Field(description="Relevance floor, 0-1 (default: [recall] min_score).", ge=0, le=1)] = None,
    ) -> dict[str, Any]:
        """Find facts and episodes by words and meaning, ranked by relevance, importance, confidence,
        recency and frequency. Each hit has its name, path, description, score and absolute relevance;
        `hits` is empty when nothing reaches the relevance floor."""
        from .. import recall as recall_mod

        s = store()
        since, mode = since or None, mode or None  # (a client may send "" for an option it leaves unset)
        recall_mod.embed_early(s, [query], mode)  # encoding the query overlaps the keyword search
        corpus, hits = recall_mod.Corpus(), []
        if source in ("facts", "episodes", "all"):
            corpus, (hits,) = index_query(s, lambda conn: recall_mod.answer(
                s, conn, [query], k=k, source=source, mode=mode, fact_type=type, tag=tag, since=since,
                include_all=include_all, min_score=min_score, vectors_for=vectors_for))
        if source not in ("facts", "episodes"):  # document chunks: their own index (docs/SOURCES.md)
            from .. import docindex

            found, (chunks,) = docindex.answer(s, [query], source=source, k=k, mode=mode, since=since, fact_type=type,
                                               tag=tag, include_all=include_all, min_score=min_score)
            corpus.notes += found.notes
            hits = recall_mod.order(hits + chunks, k)
        recall_mod.log_access(s, "mcp-recall", [(query, [h.item.key for h in hits])])
        own_write(s)
        from .. import output  # the CLI's hit shape (docs/JSON.md)

        return {"query": query, "hits": output.hits_json(hits), "notes": corpus.notes}

    @tool("Session context bundle", read_only=True, idempotent=True)
    def context(
        query: Annotated[Text, Field(description="Add the best facts and episodes for this query.")] = None,
        budget: Annotated[int, Field(description="Token budget (estimated).", ge=50)] = 4000,
        k: Annotated[int, Field(description="Facts and episodes to add for the query.", ge=1, le=50)] = 5,
    ) -> dict[str, Any]:
        """The session-start bundle: pinned facts, STATE.md, the best facts and episodes for a query,
        the MEMORY.md index and facts that may be stale, within a token budget (`text` holds it)."""
        from .. import context as context_mod

        return context_mod.build(store(), query=query, budget=budget, k=k).to_dict()

    @tool("Show a fact", read_only=True, idempotent=True)
    def show(name: Annotated[str, Field(description="Fact name or file stem (archived facts too).")]) -> dict[str, Any]:
        """One fact: its metadata, body and the file's full text (recorded as a use: it counts in recall)."""
        from .. import facts
        from .. import recall as recall_mod

        s = store()
        found = facts.find(s, name)
        recall_mod.log_access(s, "used:mcp", [("", [found.name or found.stem])])
        from .. import output  # the CLI's fact shape (docs/JSON.md), and the file's text

        return {**output.fact_json(s, found), "text": read_text(s.root, found.path)}

    @tool("Get a document's lines", read_only=True, idempotent=True)
    def get(spec: Annotated[str, Field(description="PATH:START-END, as a recall hit's path gives it; or PATH alone, for the whole document.")]) -> dict[str, Any]:
        """Lines of a document in a declared source (docs/SOURCES.md): the file as it is now (a passage is
        recorded as a use of it, as `show` of a fact is); at most 5,000 lines."""
        from .. import api

        source, path, start, end, text = api.passage(store(), spec, log="used:mcp")
        return {"path": path, "start": start, "end": end, "source": source.name,
                "source_description": source.description, "text": text}

    @tool("Forget a fact (archive it)", destructive=True)
    def forget(
        name: Annotated[str, Field(description="Fact name or file stem.")],
        reason: Annotated[str, Field(description="Why it is forgotten: one line, kept in the archived file.")],
    ) -> dict[str, Any]:
        """Move a fact to the archive with the reason (never deleted), update MEMORY.md, commit."""
        from .. import facts

        s = store()
        change = facts.forget(s, name, reason)
        return {"action": change.action, "name": change.fact.name, "path": s.rel(change.fact.path), "commit": change.commit}

    @tool("Add an episode")
    def episode_add(
        description: Annotated[str, Field(description="What happened, in one line.")],
        type: Annotated[str, Field(description="decision | error | success | feedback | conflict | prompt | reply | tool, or a type declared in memctl.toml ([episodes] types).")],
        outcome: Annotated[str, Field(description="What came of it.")] = "",
        importance: Annotated[Optional[float], Field(description="0-1 (default by type).", ge=0, le=1)] = None,
        tags: Annotated[Tags, Field(description="Tags.")] = None,
        refs: Annotated[Tags, Field(description="What it refers to: fact names, episode ids, or scheme:value (commit:SHA, https://...).")] = None,
        allow_secrets: AllowSecrets = False,
    ) -> dict[str, Any]:
        """Append one episode (a decision, error, success or feedback) to the episodes ledger, and commit."""
        from .. import episodes

        episode = episodes.add(store(), description, type, outcome=outcome, importance=importance,
                               tags=tags or (), refs=refs or (), allow_secrets=allow_secrets)
        return episode.to_dict()

    @tool("Check for near-duplicates", read_only=True, idempotent=True)
    def near_dup(
        text: Annotated[str, Field(description="The text to check.")],
        ledger: Annotated[Text, Field(description="Check against this ledger's column (with `column`).")] = None,
        column: Annotated[Text, Field(description="The ledger column (default: its unique column).")] = None,
        facts: Annotated[bool, Field(description="Check against the live facts (name: description, as recall embeds them).")] = False,
        top: Annotated[int, Field(description="How many hits.", ge=1, le=100)] = 5,
        threshold: Annotated[Optional[float], Field(description="Score at or above which a hit is a near-duplicate.", ge=-1, le=1)] = None,
    ) -> dict[str, Any]:
        """Is this text a near-duplicate of a ledger row or a fact? The verdict, the best score, the
        threshold and the top hits, each with its score, lexical overlap and where it lives."""
        from .. import neardup

        s = store()
        report = neardup.check(s, [text], neardup.source_for(s, ledger=ledger, column=column, facts=facts),
                               top=top, threshold=threshold)
        data = report.to_dict()
        del data["checks"]
        return {**report.checks[0].to_dict(), **data}

    @tool("Append to a ledger")
    def ledger_append(
        name: Annotated[str, Field(description="The ledger's name.")],
        records: Annotated[list[dict[str, str]], Field(description="Records to append: one object per row, a text value for every column.")],
        unique: Annotated[Text, Field(description="Refuse records whose value in this column is already in the ledger.")] = None,
        allow_secrets: AllowSecrets = False,
    ) -> dict[str, Any]:
        """Append records to a ledger (all or none), and commit."""
        from .. import ledger

        s = store()
        done = ledger.append(s, name, records, unique=unique, allow_secrets=allow_secrets, by_user=True)
        return {"ledger": done.ledger, "path": s.rel(done.path), "appended": done.count, "commit": done.commit}

    @tool("Show STATE.md", read_only=True, idempotent=True)
    def state_show(name: Annotated[Text, Field(description="The state scope (state/NAME/STATE.md); default state/STATE.md.")] = None) -> dict[str, Any]:
        """The current STATE.md: when it was updated, its numbers and its text."""
        from .. import state

        s = store()
        path, text, snapshot = state.show(s, name)
        from .. import output  # the CLI's state shape (docs/JSON.md), and the file's text

        return {**output.state_json(s.rel(path), snapshot), "text": text}

    @resource("memctl://index", "MEMORY.md", "The memory index: one line per live fact.")
    def index() -> str:
        from .. import facts

        s = store()
        refuse_link(s.root, s.index_path)  # never a file outside the store (docs/RELIABILITY.md)
        if not s.index_path.is_file():
            raise NotFound(f"no {s.rel(s.index_path)}", hint="memctl index")
        return facts.index_text(s, errors="strict")  # refused over its size limit

    @resource("memctl://facts/{name}", "fact", "One fact file by name or stem.")
    def fact(name: str) -> str:
        from .. import facts

        s = store()
        return read_text(s.root, facts.find(s, name).path)

    @resource("memctl://state", "STATE.md", "The state snapshot (state/STATE.md).")
    def state_file() -> str:
        from .. import state

        return state.show(store())[1]

    listed_resources, called_tool = server.list_resources, server.call_tool

    async def list_resources():
        """Only the resources that exist now: MEMORY.md and STATE.md appear once written."""
        def exists(path: Callable[[], Path]) -> bool:
            try:
                return path().is_file()
            except (MemctlError, OSError):  # a link where STATE.md should be is not a resource either
                return False

        s = store()
        present = {"memctl://index": exists(lambda: s.index_path), "memctl://state": exists(lambda: state_path(s))}
        return [r for r in await listed_resources() if present.get(str(r.uri), True)]

    async def call_tool(name: str, arguments: dict[str, Any], context=None):
        """An unknown tool or a bad argument: a tool error in memctl's words, before the SDK's validation."""
        from pydantic import ValidationError

        found = server._tool_manager.get_tool(name)
        if found is None:
            known = ", ".join(t.name for t in server._tool_manager.list_tools())
            return _tool_error(BadInput(f"no tool named {name!r}", hint=f"the tools are {known}", kind="unknown-tool"))
        try:
            mcp_input.strictly(name, found.parameters, arguments or {})
            found.fn_metadata.validate_arguments(arguments)
        except BadInput as exc:
            return _tool_error(exc)
        except ValidationError as exc:
            return _tool_error(mcp_input.argument_error(name, found.parameters, exc))
        return await called_tool(name, arguments, context)

    server.list_resources, server.call_tool = list_resources, call_tool
    return server


def _sdk_found() -> bool:
    """Whether the SDK can be imported, without importing it (a second and more; see mcp_fast)."""
    import importlib.util

    try:
        return importlib.util.find_spec("mcp") is not None
    except (ImportError, ValueError):  # a module set to None in sys.modules, a broken parent
        return False


def serve(root: str | os.PathLike | None) -> None:
    """Run the server on stdin/stdout until the client closes stdin."""
    # recall's cosines are one (1 x 384) x (384 x N) product: memory-bound, 0.2 ms on one thread at
    # 10,000 facts, while OpenBLAS's spinning worker threads make it 20 ms when the cores are busy
    # (bench/bench_hook.py). Read when numpy loads, so set before anything imports it.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from ..store import open_store
    from .claude_code import resolve_root

    path = resolve_root(root)
    store = open_store(path)  # a store that is not one fails here, as a CLI error, before serving
    if not _sdk_found():
        raise MemctlError("the MCP server needs the mcp package, which is not installed", hint=install_hint())
    from . import mcp_fast

    # What sets variables is done before the relay's threads start (early.settle_environment says why):
    # the agent's name, and the embedder's choice (a sentence-transformers model sets HF_HUB_OFFLINE).
    os.environ.setdefault("MEMCTL_AGENT", "mcp")
    from .. import embed

    try:
        embed.choose(embed.settings_for(store))
    except MemctlError:  # a bad [embedding] section: each recall reports it, as before
        pass
    finish = mcp_fast.relay(__version__)  # initialize and tools/list answered while the SDK loads
    import signal

    from .. import errors, output, runcmd, vcache

    output.log_progress()  # stderr is the client's log of this server: a line every few seconds

    def terminated(signum: int, frame: Any) -> None:
        raise errors.Interrupted("terminated", errors.TERMINATED)

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        try:
            import mcp.server.mcpserver  # noqa: F401
        except ImportError:
            raise MemctlError("the MCP server needs the mcp package, which is not installed", hint=install_hint()) from None
        build(path).run("stdio")
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM
        runcmd.kill_running()  # a judge a tool call started would outlive os._exit (it has a session of its own)
        vcache.stop_background()  # the embedding thread saves what it finished
        message, code = errors.interrupted_line(exc)
        output.failure(message, None, code)
        # The SDK reads stdin in a thread that returns only when the client closes it: exit now.
        os._exit(code)
    finally:
        vcache.stop_background()
        signal.signal(signal.SIGTERM, previous)
        if finish is not None:
            finish()

