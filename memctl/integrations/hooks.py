"""What Claude Code's hooks run: `memctl hook session-start` and `memctl hook prompt`.

Both sit on Claude Code's critical path, so they never fail a session or a
prompt: whatever goes wrong (no store found, input that is not JSON, a broken
file, the store lock held too long, the time limit) prints nothing on stdout,
one line on stderr, and exits 0. What they print on stdout is what Claude Code
adds to the model's context. Each reads the hook's JSON on stdin and finds its
store from the input's `cwd` first (claude_code.locate has the order).

`session-start` also starts the store's resident embedder when none runs
(`memctl embed-server --warm --idle 1800`, detached: it never holds up the
session, embeds the facts it lacks, and exits after 30 idle minutes).
`prompt` runs on every prompt and stays light: recall's own ranking (hybrid)
answered by that resident embedder when it is up and warm, else keyword recall
over the recall index (no model is ever loaded in the hook); only facts at or
above recall's relevance floor, a few lines within a small token budget, and
nothing at all when nothing is relevant. cli/fast.py runs both without building
the Typer app.

`--host codex|gemini|cursor` (written by `agent install <host>`) wraps what is printed in the
JSON that host reads instead of Claude Code's plain text (`hook_output`); the input is read the
same way (their hooks give `cwd` and `prompt` as Claude Code does; Cursor gives `workspace_roots`).
"""

from __future__ import annotations

import os
import sys
from typing import IO

from ..values import env_on

EVENTS = ("session-start", "prompt")
LOCK_WAIT = 1.0  # seconds SessionStart's housekeeping waits for the store lock before it leaves it be
TIMEOUT_SECONDS = 5.0  # MEMCTL_HOOK_TIMEOUT overrides; Claude Code's own limit is in the settings file
SESSION_BUDGET = 4000  # estimated tokens of the session-start bundle
# Claude Code saves hook output over 10,000 characters to a file and shows the model a 2 KB preview:
# whatever a hook prints stays within this many characters (not tokens), Japanese included.
MAX_CHARS = 9000
PROMPT_K = 3  # facts the prompt hook shows at most
PROMPT_BUDGET = 300  # estimated tokens of what the prompt hook prints
PROMPT_CHARS = 2000  # the prompt's first characters are what recall looks at (a pasted log can be huge)
LOGGED_CHARS = 200  # ... and what the access log keeps of it
# Without the resident embedder the prompt hook ranks by keywords: a hybrid call in the hook would
# load the model and, on a cold vector cache, embed every fact first; on every prompt that does not
# fit the hook's time limit (measured: bench/bench_hook.py, docs/AGENTS.md).
FALLBACK_MODE = "keyword"
RESIDENT_IDLE_SECONDS = 1800  # the resident embedder the SessionStart hook starts exits after this idle time
RESIDENT_ENV = "MEMCTL_HOOK_RESIDENT"  # "0": the SessionStart hook starts none (MEMCTL_NO_SERVER=1 too)
# `agent status` runs each installed hook with this set: the hook writes nothing (no access log) and
# says on stderr, in a line starting with CHECK_LINE, which store it reached (integrations/probe.py).
CHECK_ENV = "MEMCTL_AGENT_CHECK"
CHECK_LINE = "check: "
# What each host reads from a hook's stdout (docs/AGENTS.md): Claude Code takes plain text; Codex and
# Gemini CLI take JSON only, the text in hookSpecificOutput.additionalContext under their own event
# name; Cursor's sessionStart takes {"additional_context": ...} and its prompt hook cannot add context.
HOSTS = ("claude-code", "codex", "gemini", "cursor")
HOST_EVENTS = {
    "codex": {"session-start": "SessionStart", "prompt": "UserPromptSubmit"},
    "gemini": {"session-start": "SessionStart", "prompt": "BeforeAgent"},
    "cursor": {"session-start": "sessionStart"},
}


class HookTimeout(BaseException):
    """The time limit ran out (a BaseException, so no `except Exception` on the way swallows it)."""


def run(root: str | None, event: str, stdin: IO[bytes] | None = None, stdout: IO[str] | None = None,
        store: str | None = None, host: str | None = None) -> int:
    """Run one hook; always exit code 0 (see the module docstring). `store`: the one named at install;
    `host`: whose hook this is (the output's format, and the agent recorded), Claude Code's by default."""
    from .claude_code import AGENT_NAME

    stdout = stdout or sys.stdout
    os.environ.setdefault("MEMCTL_AGENT", host or AGENT_NAME)
    checking = checked()
    limit = _timeout()
    found, problem, printed, why = None, None, False, ""
    try:
        cancel = _guard(limit, event)
        try:
            payload = read_input(stdin or sys.stdin.buffer)
            asked = prompt_of(payload)
            text = ""
            if host not in (None, *HOSTS):
                from ..errors import BadInput

                raise BadInput(f"unknown host {host!r}: one of {', '.join(HOSTS)}", kind="unknown-host",
                               hint="`memctl agent install AGENT` writes each agent's hook commands")
            if event == "session-start":
                found = locate(root, payload, store)
                text = session_start(open_found(found), log=not checking)
            elif asked and host == "cursor":
                problem = "Cursor's prompt hook cannot add context (its sessionStart hook can)"
            elif asked:  # no prompt: nothing to do, not even finding the store
                found = locate(root, payload, store)
                text = prompt(open_found(found), asked, log=not checking)
        finally:
            cancel()  # before any handler below runs, so the alarm cannot fire inside one
        text = within(for_agent(text), MAX_CHARS)  # (already so: each part was escaped before it was sized)
        if text:
            stdout.write(hook_output(host, event, text))
            stdout.flush()
            printed = True
    except HookTimeout:
        problem, why = f"gave up after {limit:g} s (MEMCTL_HOOK_TIMEOUT)", "the full bundle took longer than the hook may"
    except Exception as exc:  # noqa: BLE001  (a hook never fails the prompt; the reason goes to stderr)
        problem, why = reason(exc), "the full bundle failed: `memctl doctor` says why"
    # The store was found but its bundle took too long (a ledger grown large since the last index) or failed
    # (a section of memctl.toml its reader refuses): the index, at least.
    index = index_alone(found, why) if problem and event == "session-start" and found is not None and not printed else ""
    index = within(for_agent(index), MAX_CHARS)
    if index:
        try:
            stdout.write(hook_output(host, event, index))
            stdout.flush()
            printed = True
            problem += "; printed MEMORY.md alone"
        except Exception:  # noqa: BLE001  (the output itself failed, a closed pipe, an encoding: nothing more to print)
            pass
    if problem:
        _note(event, problem, added=printed)
    if host == "gemini" and not printed:
        # Gemini CLI reads stderr as the hook's output when stdout is empty (shown to the user as a
        # message): an empty object keeps a note on stderr a log line, as for the other agents.
        stdout.write("{}\n")
        stdout.flush()
    if checking:
        say_checked(found, problem)
    return 0


def hook_output(host: str | None, event: str, text: str) -> str:
    """What the hook prints for `host`: the text itself for Claude Code, else one line of the JSON
    that host reads (HOST_EVENTS)."""
    import json

    if host in (None, "claude-code"):
        return text
    if host == "cursor":
        return json.dumps({"additional_context": text}, ensure_ascii=False) + "\n"
    output = {"hookEventName": HOST_EVENTS[host][event], "additionalContext": text}
    return json.dumps({"hookSpecificOutput": output}, ensure_ascii=False) + "\n"


def for_agent(text: str) -> str:
    r"""`text` as the agent's context may hold it, whatever a pushed fact, index or STATE.md says: each
    control character but TAB and LF shown as `\x1b` (tsv.visible; a CR before LF is a line end), each
    invisible format character (U+200B, U+FEFF, a soft hyphen ...) as `\u200b`, and every `<` written
    `&lt;`. The host wraps what a hook prints in a tag of its own (Claude Code: a system reminder), so a
    `</system-reminder>` in a file another clone pushed would end that frame and let what follows pass
    for the host's or the user's words; an invisible character after the `<` would still read as one.
    Applying it twice changes nothing."""
    import unicodedata

    from ..tsv import visible

    text = visible(text.replace("\r\n", "\n"), keep="\t\n")
    if not text.isprintable():  # (TAB, LF, and the invisible ones visible() keeps)
        text = "".join(f"\\u{ord(c):04x}" if unicodedata.category(c) == "Cf" else c for c in text)
    return text.replace("<", "&lt;")


def within(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters at a line's end (the parts are already sized to fit:
    this only guards the limit)."""
    if len(text) <= limit:
        return text
    return text[: text.rfind("\n", 0, limit) + 1]


def reason(exc: BaseException) -> str:
    """An exception as one line: a memctl error in the CLI's words, anything else with its type."""
    from ..errors import MemctlError

    if isinstance(exc, MemctlError):
        from ..cli.hints import one_line

        return one_line(exc)
    return f"{type(exc).__name__}: {exc}"


def _note(event: str, message: str, added: bool = False) -> None:
    from .. import output

    output.info(f"hook {event}: {'' if added else 'nothing added: '}{message}".replace("\n", " "))


def _timeout() -> float:
    try:
        value = float(os.environ.get("MEMCTL_HOOK_TIMEOUT", "") or TIMEOUT_SECONDS)
    except ValueError:
        return TIMEOUT_SECONDS
    return value if 0 < value < 3600 else TIMEOUT_SECONDS


def _guard(seconds: float, event: str):
    """Raise HookTimeout in the main thread after `seconds`; exit 0 a second later if that did not stop it
    (a call stuck in C code never returns to the interpreter to see the signal). Returns the cancel function."""
    import _thread
    import signal
    import time

    def expire(signum, frame):
        raise HookTimeout()

    try:
        previous = signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    except (ValueError, AttributeError):  # not the main thread, or no SIGALRM here
        previous = None

    finished: list[bool] = []

    def backstop():
        time.sleep(seconds + 1.0)
        if not finished:
            _note(event, f"stopped after {seconds + 1:g} s")
            os._exit(0)

    # A bare thread: threading.Thread.start() waits until the thread runs, which on a busy
    # machine costs tens of milliseconds of every prompt.
    _thread.start_new_thread(backstop, ())

    def cancel():
        finished.append(True)
        if previous is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    return cancel


# ---------------------------------------------------------------- the hook's input

def read_input(stdin: IO[bytes]) -> dict:
    """The hook's JSON input from stdin ({} from a terminal, which is never read), refused past INPUT_LIMIT."""
    from ..fsutil import read_input as bounded

    return {} if stdin.isatty() else parse_input(bounded(stdin, "the hook input on stdin"))


def parse_input(data: bytes | str) -> dict:
    """The hook's JSON input: an object ({} for none); anything else is bad input."""
    import json

    from ..errors import BadInput
    from ..values import json_kind

    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError:
        raise BadInput("the hook input on stdin is not valid UTF-8") from None
    try:
        payload = json.loads(text) if text.strip() else {}
    except ValueError:
        raise BadInput("the hook input on stdin is not JSON") from None
    if not isinstance(payload, dict):
        raise BadInput(f"the hook input on stdin is {json_kind(payload)}, not a JSON object",
                       hint="an agent sends one JSON object, as docs/AGENTS.md shows")
    return payload


def prompt_of(payload: dict) -> str | None:
    """The input's `prompt`; None when there is none or it is blank (nothing to do)."""
    from ..errors import BadInput
    from ..values import json_kind

    prompt = payload.get("prompt")
    if prompt is not None and not isinstance(prompt, str):
        raise BadInput(f"the hook input's prompt is {json_kind(prompt)}, not text")
    return prompt if prompt and prompt.strip() else None


# ---------------------------------------------------------------- which store

def locate(root: str | None, payload: dict, store: str | None):
    """Where the hook's store is (claude_code.locate): from the hook input's cwd first."""
    from .claude_code import locate as locate_store

    cwd = payload.get("cwd")
    roots = payload.get("workspace_roots")  # Cursor's hooks say where they work this way
    if not (isinstance(cwd, str) and cwd) and isinstance(roots, list) and roots and isinstance(roots[0], str):
        cwd = roots[0]
    return locate_store(root, cwd=cwd if isinstance(cwd, str) and cwd else None, store=store)


def open_found(found):
    from ..store import open_store

    return open_store(found.root)


def checked() -> bool:
    """Whether `agent status` runs this (MEMCTL_AGENT_CHECK)."""
    return os.environ.get(CHECK_ENV, "") not in ("", "0")


def say_checked(found, problem: str | None) -> None:
    """Under MEMCTL_AGENT_CHECK (`agent status`): one line on stderr saying which store was reached, and
    what went wrong (probe.py reads it)."""
    import json

    from .. import output

    output.info(CHECK_LINE + json.dumps({"store": str(found.root) if found else None,
                                         "found_by": found.found_by if found else None, "error": problem},
                                        ensure_ascii=False))


# ---------------------------------------------------------------- SessionStart

def session_start(store, log: bool = True) -> str:
    """The session-start bundle (`memctl context`), or nothing when the store has nothing to show."""
    from .. import context
    from ..claude_memory import take_in_now
    from ..facts import relist_claude_index

    if log:  # not under `agent status`, which writes nothing
        # What Claude Code wrote in its directory last session: its own commit; then an index line of
        # memctl's that its whole-file write of MEMORY.md dropped, put back. Neither waits long for a
        # lock another process holds: without them the bundle is still printed.
        take_in_now(store, wait=LOCK_WAIT)
        relist_claude_index(store, wait=LOCK_WAIT)
    # Claude Code already loads the MEMORY.md of its own memory directory: the bundle leaves it out there.
    bundle = context.build(store, budget=SESSION_BUDGET, log=log, include_index=store.layout != "claude",
                           max_chars=MAX_CHARS, state_root=True, shown_as=for_agent)  # (sized as printed)
    if log:
        start_resident(store)
    return bundle.text if bundle.included else ""


def index_alone(found, why: str) -> str:
    """What a session-start that ran out of time or failed still gives: MEMORY.md as it is, under a heading
    saying `why` (not in a Claude Code directory, whose MEMORY.md Claude Code loads itself); "" when there
    is none to read."""
    from ..fsutil import read_index

    try:
        store = open_found(found)
        if store.layout == "claude":
            return ""
        text = read_index(store.index_path, "MEMORY.md")
    except Exception:  # noqa: BLE001  (a hook never fails: without it, nothing is added, as before)
        return ""
    return f"# memctl context (MEMORY.md alone: {why})\n\n{text}" if text.strip() else ""


def start_resident(store) -> bool:
    """Start the store's resident embedder, detached, unless one runs or it is turned off (RESIDENT_ENV,
    MEMCTL_NO_SERVER); True when one was started. Never waits for it, never fails the hook."""
    from ..embed import server

    if os.environ.get(RESIDENT_ENV, "") == "0" or env_on("MEMCTL_NO_SERVER"):
        return False
    try:
        return server.start(store, RESIDENT_IDLE_SECONDS)
    except OSError as exc:  # a read-only .memctl/, no fork: the prompt hook ranks by keywords
        _note("session-start", f"no resident embedder: {exc}")
        return False


# ---------------------------------------------------------------- UserPromptSubmit

PROMPT_HEADER = "Facts from memctl that may bear on this prompt (open the file for the whole fact):"
PROMPT_HEADER_DOCUMENTS = ("Facts and document passages from memctl that may bear on this prompt"
                           " (open the file, at those lines, for the whole text):")


def prompt(store, text: str, log: bool = True) -> str:
    """Lines for the facts relevant to a prompt, or "" when none reaches the floor.

    Relevance and its floor are recall's own (`[recall] min_score`, docs/RECALL.md):
    absolute, so "nothing relevant" means the same here as for `memctl recall`.
    """
    from .. import recall, textnorm
    from ..private import hide

    query = text[:PROMPT_CHARS]
    asked = hide(query, " ")[0]  # private words neither find a fact nor dilute the others' relevance
    if not asked.strip():
        return ""
    hits = ranked(store, asked)
    header = (PROMPT_HEADER_DOCUMENTS if any(h.item.kind == "chunk" for h in hits) else PROMPT_HEADER)
    lines, shown = [header], []
    used, chars = textnorm.estimate_tokens(header) + 1, len(header) + 1
    for hit in hits:
        line = _prompt_line(store, hit)
        cost = textnorm.estimate_tokens(line) + 1
        chars += len(line) + 1
        if used + cost > PROMPT_BUDGET or chars > MAX_CHARS:
            break
        lines.append(line)
        shown.append(hit.item.key)
        used += cost
    if not shown:
        return ""
    if log:
        recall.log_access(store, "hook-prompt", [(query, shown)], query_chars=LOGGED_CHARS)  # redacted, then cut
    return "\n".join(lines) + "\n"


def _prompt_line(store, hit) -> str:
    """A fact: its name, description and file. A document's lines (a source that opted in): the
    headings above them (else the file's name), their first words, where they are, and the source's
    description. One line each, whatever a pushed file holds: a line break in a description would
    start a line of the agent's context of its own (`</system-reminder>`), an ESC would reach the
    terminal of whoever runs the hook by hand."""
    item = hit.item
    if item.kind != "chunk":
        return for_agent(_one_line(f"- {item.key}: {item.description} ({store.root / item.path})"))
    place = hit.to_dict()  # a chunk's file, heading path and source description, as --json gives them
    headings = " > ".join(place["heading"]) or os.path.basename(place["file"])
    about = f"; {place['source_description']}" if place["source_description"] else ""
    return for_agent(_one_line(f"- {headings}: {item.description} ({item.path}{about})"))


def _one_line(text: str) -> str:
    """`text` with each run of line-breaking white space (str.splitlines' breaks, TAB) one space, and
    other control and bidi characters shown escaped (tsv.visible)."""
    import re

    from ..tsv import visible

    return visible(re.sub("[\t\n\v\f\r\x1c-\x1e\x85\u2028\u2029]+", " ", text))


def ranked(store, query: str) -> list:
    """The prompt's best facts at or above the floor: recall's ranking in the store's mode, answered by
    the resident embedder when it is up and has the facts' vectors (recall.served), else by keywords."""
    from .. import recall, rindex

    options = {"k": PROMPT_K, "source": "facts", "mode": None, "fact_type": None, "tag": None, "since": None,
               "agent": None, "include_all": False, "min_score": None}
    with rindex.opened(store, episodes=False) as conn:  # (facts alone: a year's episodes need not be read first)
        found = recall.served(store, conn, [query], options)
        if found is None:
            found = recall.answer(store, conn, [query], **{**options, "mode": FALLBACK_MODE})
    return found[1][0] + _prompt_documents(store, query)


def _prompt_documents(store, query: str) -> list:
    """Chunks of the sources that opted in (`prompt = true`, docs/SOURCES.md), by keywords: no model here."""
    if not store.config.raw.get("sources"):
        return []
    from .. import docindex, sources

    hits = []
    for name in sources.trusted(store, [n for n, s in sources.declared(store).items() if s.prompt]):
        hits += docindex.answer(store, [query], source=name, k=PROMPT_K, mode=FALLBACK_MODE)[1][0]
    return hits
