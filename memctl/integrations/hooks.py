"""What Claude Code's hooks run: `memctl hook session-start` and `memctl hook prompt`.

Both sit on Claude Code's critical path, so they never fail a session or a
prompt: whatever goes wrong (no store, a broken file, the store lock held too
long, the time limit) prints nothing on stdout, one line on stderr, and exits 0.
What they print on stdout is what Claude Code adds to the model's context.

`prompt` runs on every prompt and stays light: keyword recall over the recall
index (no embedding model is loaded), only facts at or above recall's
relevance floor, a few lines within a small token budget, and nothing at all
when nothing is relevant. cli/fast.py runs both without building the Typer app.
"""

from __future__ import annotations

import os
import sys
from typing import IO

EVENTS = ("session-start", "prompt")
TIMEOUT_SECONDS = 5.0  # MEMCTL_HOOK_TIMEOUT overrides; Claude Code's own limit is in the settings file
SESSION_BUDGET = 4000  # estimated tokens of the session-start bundle
PROMPT_K = 3  # facts the prompt hook shows at most
PROMPT_BUDGET = 300  # estimated tokens of what the prompt hook prints
PROMPT_CHARS = 2000  # the prompt's first characters are what recall looks at (a pasted log can be huge)
LOGGED_CHARS = 200  # ... and what the access log keeps of it
# Keyword: a hybrid call embeds the prompt and, on a cold vector cache, every fact first; on every
# prompt that does not fit the hook's time limit (measured: bench/bench_hook.py, docs/AGENTS.md).
PROMPT_MODE = "keyword"


class HookTimeout(BaseException):
    """The time limit ran out (a BaseException, so no `except Exception` on the way swallows it)."""


def run(root: str | None, event: str, stdin: IO[bytes] | None = None, stdout: IO[str] | None = None) -> int:
    """Run one hook; always exit code 0 (see the module docstring)."""
    from .claude_code import AGENT_NAME

    stdout = stdout or sys.stdout
    os.environ.setdefault("MEMCTL_AGENT", AGENT_NAME)
    limit = _timeout()
    try:
        cancel = _guard(limit, event)
        try:
            if event == "session-start":
                text = session_start(find_store(root))
            else:
                data = (stdin or sys.stdin.buffer).read()
                prompt_text = parse_prompt(data)
                text = prompt(find_store(root), prompt_text) if prompt_text else ""
        finally:
            cancel()  # before any handler below runs, so the alarm cannot fire inside one
        if text:
            stdout.write(text)
            stdout.flush()
    except HookTimeout:
        _note(event, f"gave up after {limit:g} s (MEMCTL_HOOK_TIMEOUT)")
    except Exception as exc:  # noqa: BLE001  (a hook never fails the prompt; the reason goes to stderr)
        _note(event, getattr(exc, "one_line", lambda: f"{type(exc).__name__}: {exc}")())
    return 0


def _note(event: str, message: str) -> None:
    from .. import output

    output.info(f"hook {event}: nothing added: {message}".replace("\n", " "))


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


# ---------------------------------------------------------------- which store

def find_store(root: str | None):
    """The store (see claude_code.resolve_root for the order in which it is looked for)."""
    from ..store import open_store
    from .claude_code import resolve_root

    return open_store(resolve_root(root))


# ---------------------------------------------------------------- SessionStart

def session_start(store) -> str:
    """The session-start bundle (`memctl context`), or nothing when the store has nothing to show."""
    from .. import context

    # Claude Code already loads the MEMORY.md of its own memory directory: the bundle leaves it out there.
    bundle = context.build(store, budget=SESSION_BUDGET, log=True, include_index=store.layout != "claude")
    return bundle.text if bundle.included else ""


# ---------------------------------------------------------------- UserPromptSubmit

def parse_prompt(data: bytes) -> str | None:
    """The `prompt` field of the hook's JSON input; None when there is none (nothing to do)."""
    import json

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("the hook input on stdin is not valid UTF-8") from None
    try:
        payload = json.loads(text) if text.strip() else None
    except ValueError:
        raise ValueError("the hook input on stdin is not JSON") from None
    prompt = payload.get("prompt") if isinstance(payload, dict) else None
    return prompt if isinstance(prompt, str) and prompt.strip() else None


def prompt(store, text: str) -> str:
    """Lines for the facts relevant to a prompt, or "" when none reaches the floor.

    Relevance and its floor are recall's own (`[recall] min_score`, docs/RECALL.md):
    absolute, so "nothing relevant" means the same here as for `memctl recall`.
    """
    from .. import recall, textnorm

    query = text[:PROMPT_CHARS]
    _, (hits,) = recall.recall(store, [query], k=PROMPT_K, source="facts", mode=PROMPT_MODE, log=False)
    header = "Facts from memctl that may bear on this prompt (open the file for the whole fact):"
    lines, shown = [header], []
    used = textnorm.estimate_tokens(header) + 1
    for hit in hits:
        line = f"- {hit.item.key}: {hit.item.description} ({store.root / hit.item.path})"
        cost = textnorm.estimate_tokens(line) + 1
        if used + cost > PROMPT_BUDGET:
            break
        lines.append(line)
        shown.append(hit.item.key)
        used += cost
    if not shown:
        return ""
    recall.log_access(store, "hook-prompt", [(query[:LOGGED_CHARS], shown)])
    return "\n".join(lines) + "\n"
