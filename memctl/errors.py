"""One error hierarchy and the exit codes the CLI documents.

Library code raises these; only the CLI turns them into a one-line message on
stderr (with a hint) and an exit code. Library messages and hints name arguments
and concepts, never a CLI flag: `arg` names the argument at fault as the Python
API spells it, and `kind` (with `details`) lets memctl/cli/hints.py word the
hint with the command's own options.
"""

from __future__ import annotations

OK = 0
FAILED = 1  # an error, a refusal, or problems found (doctor, index --check)
USAGE = 2  # bad input: names, values, options
NOT_FOUND = 3  # a fact, ledger or store that does not exist
LOCKED = 4  # the store lock could not be taken in time
INTERRUPTED = 130  # Ctrl-C (SIGINT), as a shell reports it: 128 + 2
TERMINATED = 143  # SIGTERM: 128 + 15

EXIT_CODES = {
    OK: "success",
    FAILED: "error, refused, or problems found",
    USAGE: "bad input (name, value, option); nothing was changed",
    NOT_FOUND: "fact, ledger or store not found",
    LOCKED: "the store lock was held by another process for too long",
}


# The same condition gets the same exit code from every command: (key, condition, code).
# docs/CLI.md prints this table (cli/reference.py); tests/test_validation.py triggers every
# condition through every command that can meet it and checks the code. Two commands keep
# their own meaning of 1 and so map it elsewhere: near-dup (1 is "near-duplicate": the
# conditions of exit 1 give 2 there) and `hook` (always 0: it never fails a prompt).
BY_CONDITION: tuple[tuple[str, str, int], ...] = (
    ("not-found", "a fact, ledger, STATE.md, job, file or store that does not exist (a fact looked up by a name no fact has, "
                  "whatever its form: titles are looked up too)", NOT_FOUND),
    ("bad-name", "a new name that breaks the naming rule (fact, ledger, column), or a path given as a name", USAGE),
    ("bad-value", "a malformed or out-of-range value: importance, date, duration, count, an unknown column", USAGE),
    ("unknown-type", "a fact or episode type that is not declared (the list is in the message, the closest one in the hint)", USAGE),
    ("bad-ref", "an episode ref that names no fact and no episode", USAGE),
    ("not-utf8", "text that is not valid UTF-8: an argument, a MEMCTL_* variable, stdin, a file given to read", USAGE),
    ("nul", "a NUL character in a value to be written", USAGE),
    ("usage", "an unknown option, a missing argument or option value", USAGE),
    ("exists", "a name or unique value that exists already", FAILED),
    ("damaged", "a file memctl will not write after: a ledger's last line without LF (rows: after printing the rest), "
                "conflict markers, a damaged index block", FAILED),
    ("locked", "the store lock, or a live git lock, held longer than MEMCTL_LOCK_TIMEOUT; run-job: the job running "
               "already, or another job of the store still running after MEMCTL_JOB_WAIT", LOCKED),
    ("no-git", "a write while commits are on, with git not found (MEMCTL_GIT, PATH), failing, or the store in no git "
               "repository: refused before anything changed (exit 0 means committed)", FAILED),
    ("link", "a symbolic link in the store where memctl reads or writes (it follows none; the line names it)", FAILED),
    ("untrusted", "a job (or other executable setting) a commit not made on this machine changed, until `memctl trust`",
     FAILED),
)


# The package index's "memctl" is an unrelated project: every install hint names this one.
DISTRIBUTION = "memctl-memory"


def install_hint(extra: str = "") -> str:
    """The command that brings a missing piece: the distribution by name, or the clone by path."""
    if extra:
        return f"pip install '{DISTRIBUTION}[{extra}]', or pip install '.[{extra}]' in a clone of memctl"
    return f"reinstall memctl: pip install --force-reinstall {DISTRIBUTION}, or pip install . in a clone"


class MemctlError(Exception):
    """Base class: a message, an optional hint, and an exit code."""

    exit_code = FAILED

    def __init__(self, message: str, hint: str | None = None, *, arg: str | None = None,
                 kind: str | None = None, **details: object):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.arg = arg  # the argument at fault, e.g. "min_score"
        self.kind = kind  # a stable code for the situation, e.g. "fact-exists"
        self.details = details  # values the CLI's wording of the hint may use

    def one_line(self) -> str:
        text = self.message.replace("\n", " ")
        if self.hint:
            text += f" (hint: {self.hint})"
        return text


class Refused(MemctlError):
    """The request is valid but would break a rule (duplicate, exists, ...)."""

    exit_code = FAILED


class BadInput(MemctlError):
    exit_code = USAGE


class NotFound(MemctlError):
    exit_code = NOT_FOUND


class LockTimeout(MemctlError):
    exit_code = LOCKED


class GitError(MemctlError):
    exit_code = FAILED


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped the command: `message` says what was kept (one line for the CLI).

    A KeyboardInterrupt, not a MemctlError: code that catches library errors and goes on (remember's
    optional embedding check, say) must not swallow a person's Ctrl-C.
    """

    def __init__(self, message: str, exit_code: int = INTERRUPTED):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def _terminated(signum, frame) -> None:
    raise Interrupted("terminated", 128 + signum)


def stop_raising(*numbers: int) -> None:
    """From now on, these signals raise Interrupted in the main thread (see stops_raise), unless ignored
    (nohup's stays): for a command whose gits start before its imports (sync), which a SIGTERM then must
    not outlive."""
    import signal  # noqa: PLC0415

    for number in numbers:
        if signal.getsignal(number) is not signal.SIG_IGN:
            signal.signal(number, _terminated)


def stops_raise(*numbers: int):
    """A context manager: while it is open in the main thread, these signals (SIGTERM by default) raise
    Interrupted("terminated", 128 + the signal) instead of ending the process at once, so the command
    cleans up first (saves what it embedded, kills the judge it started)."""
    import contextlib  # noqa: PLC0415
    import signal  # noqa: PLC0415
    import threading  # noqa: PLC0415

    @contextlib.contextmanager
    def held():
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        wanted = [n for n in numbers or (signal.SIGTERM,) if signal.getsignal(n) is not signal.SIG_IGN]  # nohup's stays
        previous = {number: signal.signal(number, _terminated) for number in wanted}
        try:
            yield
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)

    return held()


def stops_noted(*numbers: int, replay: bool = True):
    """A context manager: while it is open in the main thread, these signals (SIGINT, SIGTERM, SIGHUP by
    default; one ignored, as nohup's SIGHUP, stays ignored) are only noted, and the `stop_if_asked` it
    gives raises them where the caller chooses: a SIGTERM or SIGHUP as Interrupted("terminated",
    128 + the signal), a Ctrl-C alone as KeyboardInterrupt. Leaving the block raises one noted and not
    yet raised, in place of any other exception (a timeout must not turn a stop into an answer).
    Without `replay`, they are dropped (the command is stopping already: a second Ctrl-C must not cut
    its save short).

    For a stretch that must not be cut anywhere (a save), or that starts threads and processes
    (runcmd): raised from a handler where it lands, a signal can land inside threading's or
    subprocess's own locks (a thread's start: a RuntimeError where Interrupted was meant), or in
    some object's __del__, which swallows it. A Python-level handler, not a signal mask: the kernel
    may hand a signal to any thread (an engine's own among them), Python always to the main one."""
    import contextlib  # noqa: PLC0415
    import signal  # noqa: PLC0415
    import threading  # noqa: PLC0415

    noted = _NOTED  # (one list for blocks inside blocks: runcmd's inside the judge's sees a stop the outer noted)

    def stop_if_asked() -> None:
        got = set(noted)
        noted.clear()
        if not got or not replay:
            return
        ending = sorted(got - {signal.SIGINT})
        if ending:
            raise Interrupted("terminated", 128 + ending[0])
        raise KeyboardInterrupt

    @contextlib.contextmanager
    def held():
        if threading.current_thread() is not threading.main_thread():
            yield lambda: None
            return

        wanted = [n for n in numbers or (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
                  if signal.getsignal(n) not in (signal.SIG_IGN, None)]
        previous = {}
        try:  # (a signal while they are put in place is raised by the handler before; those in place go back)
            for number in wanted:
                previous[number] = signal.signal(number, lambda signum, frame: noted.append(signum))
            yield stop_if_asked
        finally:
            _put_back(previous)
            stop_if_asked()

    return held()


_NOTED: list[int] = []  # the signals stops_noted's blocks noted in the main thread and have not raised yet


def _put_back(handlers: dict) -> None:
    """Put each handler back, all of them even when one, back a moment ago, raises for a signal that
    came meanwhile (a Ctrl-C between two of them): that exception after the last."""
    import signal  # noqa: PLC0415

    raised: BaseException | None = None
    for number, handler in handlers.items():
        while True:
            try:
                signal.signal(number, handler)
                break
            except BaseException as exc:  # (setting a handler twice is harmless)  # noqa: BLE001
                raised = raised or exc
    if raised is not None:
        raise raised


def interrupted_line(exc: BaseException) -> tuple[str, int]:
    """The one line and the exit code for a KeyboardInterrupt that reached the CLI."""
    if isinstance(exc, Interrupted):
        return exc.message, exc.exit_code
    return "interrupted", INTERRUPTED


class OSFailure(MemctlError):
    """The operating system refused a read or write (disk full, file too large, no permission, ...)."""

    exit_code = FAILED


_OS_HINTS = {
    "ENOSPC": "free some space, then run the command again; the change was not made",
    "EDQUOT": "free some space (disk quota), then run the command again; the change was not made",
    "EFBIG": "the file size limit (ulimit -f) was reached; raise it, then run the command again",
    "EACCES": "check the permissions of that path",
    "EPERM": "check the permissions of that path",
    "EROFS": "the file system is read-only; memctl needs to write there",
    "EISDIR": "a folder is where memctl expects a file: move it away",
    "ENOTDIR": "a file is where memctl expects a folder: move it away",
    "EEXIST": "something is already at that path where memctl makes a folder (a file named like it): move it away",
    "ELOOP": "a symbolic link loops, or is where memctl refuses to follow one",
}


OUTPUT = "<stdout>"  # the file name an error writing the output carries (output._printing sets it)
OUT_OF_SPACE = ("ENOSPC", "EDQUOT", "EFBIG")  # a full disk, a quota, the file size limit (ulimit -f)


def out_of_space(exc: BaseException) -> bool:
    """Whether `exc` is a write that failed for want of space (OUT_OF_SPACE), as an OSError or as the
    OSFailure (kind "out-of-space") one was worded into."""
    if isinstance(exc, OSError):
        import errno as errno_mod  # noqa: PLC0415

        return errno_mod.errorcode.get(exc.errno or 0, "") in OUT_OF_SPACE
    return isinstance(exc, MemctlError) and exc.kind == "out-of-space"


def from_os_error(exc: OSError) -> OSFailure:
    """One line for an OSError: what failed and on which path, with a hint by errno."""
    import errno as errno_mod  # noqa: PLC0415
    import os  # noqa: PLC0415

    name = errno_mod.errorcode.get(exc.errno or 0, "")
    reason = exc.strerror or os.strerror(exc.errno) if exc.errno else str(exc)
    where = exc.filename if exc.filename is not None else ""
    if exc.filename2 is not None:
        where = f"{where} -> {exc.filename2}"
    message = f"{reason}: {os.fsdecode(where)}" if where else reason
    hint = _OS_HINTS.get(name)
    if where == OUTPUT:  # the output (`> /dev/full`), written last
        message = f"{reason} while printing the output"
        hint = ("free some space for the output; what the command changed before printing is done (`git log -1` shows a commit)"
                if name in ("ENOSPC", "EDQUOT", "EFBIG") else "what the command changed before printing is done")
    return OSFailure(message + (f" ({name})" if name else ""), hint=hint,
                     kind="out-of-space" if name in OUT_OF_SPACE else None)


def undeclared_type(what: str, given: str | None, declared: tuple[str, ...], where: str, *, of: str = "") -> BadInput:
    """A `what` ("fact", "episode") type not in `declared`: the list in the message (`of`: whose
    type it is, when the caller did not give it), the closest declared type (when one is close)
    and where to declare more (`where`) in the hint."""
    import difflib  # noqa: PLC0415  (only for this error)

    closest = difflib.get_close_matches(given, declared, n=1) if isinstance(given, str) else []
    hint = (f"did you mean {closest[0]!r}? " if closest else "") + f"to add a type, declare it in memctl.toml: {where}"
    whose = f" ({of})" if of else ""
    return BadInput(f"unknown {what} type {given!r}{whose}; the types are {' | '.join(declared)}", hint=hint)


def from_unicode_error(exc: UnicodeError) -> MemctlError:
    """A UnicodeError that reached the command line: text that could not be written in the output's encoding
    (PYTHONIOENCODING=ascii, a Latin-1 terminal: 1, the store is fine), else input that is not UTF-8 (2)."""
    encoding = (getattr(exc, "encoding", "") or "").lower().replace("-", "").replace("_", "")
    if isinstance(exc, UnicodeEncodeError) and encoding not in ("utf8", ""):
        return Refused(f"the output cannot be written in its encoding ({exc.encoding}): {exc.reason}",
                       hint="use a UTF-8 locale (LANG=C.UTF-8), or unset PYTHONIOENCODING", kind="output-encoding")
    return not_utf8("the input", exc)


def not_utf8(what: str, exc: UnicodeError | None = None) -> BadInput:
    """Text that is not valid UTF-8 (an argument, stdin, a file, an environment value): bad input."""
    detail = f" ({exc.reason} at position {exc.start})" if isinstance(exc, (UnicodeDecodeError, UnicodeEncodeError)) else ""
    return BadInput(f"{what} is not valid UTF-8{detail}", hint="check the file's, the terminal's or the caller's encoding")


# ---------------------------------------------------------------- warnings

# Library code never writes to stderr: it calls warn(), inform() or progress() below. They go to
# Python's logging (the `memctl` logger, imported only then), or, once the CLI has named itself with
# set_reporter(), to the CLI's `memctl: warning: ...` lines: the CLI need not import logging on
# every start (start-up is a budget, bench/bench_startup.py).
_reporter = None


def set_reporter(reporter) -> None:
    """Send warnings to `reporter` (anything with warn(message, hint), info(message) and
    progress(total, what), such as memctl.output); None sends them to logging again."""
    global _reporter
    _reporter = reporter


def warn(message: str, hint: str | None = None, *, for_want_of_space: bool = False) -> None:
    """Something the user should know that does not stop the command (a skipped file, an uncommitted write).
    `for_want_of_space`: a cache not written on a full disk; inside space_warnings_held() it waits for the end."""
    held = _SPACE_WARNINGS.get() if for_want_of_space and _SPACE_WARNINGS is not None else None
    if held is not None:
        held.append((message, hint))
        return
    if _reporter is not None:
        _reporter.warn(message, hint=hint)
        return
    import logging  # noqa: PLC0415

    logging.getLogger("memctl").warning(message + (f" (hint: {hint})" if hint else ""))


_SPACE_WARNINGS = None  # a ContextVar (the held warnings' list), made by the first held write: start-up is a budget


def space_warnings_held(function):
    """A decorator for a write that a cache precedes (remember's embedding check saves the vector cache
    before the fact is written): the cache's warning that it was not saved for want of space waits for
    the write's end, and is shown when it succeeds or fails for another reason; when the write fails
    for want of space too, the error's one line says it all (docs/RELIABILITY.md: one line)."""
    import functools  # noqa: PLC0415

    @functools.wraps(function)
    def held(*args, **kwargs):
        global _SPACE_WARNINGS
        if _SPACE_WARNINGS is None:
            from contextvars import ContextVar  # noqa: PLC0415

            _SPACE_WARNINGS = ContextVar("memctl_held_space_warnings", default=None)
        if _SPACE_WARNINGS.get() is not None:  # (inside another held write: that one decides)
            return function(*args, **kwargs)
        waiting: list[tuple[str, str | None]] = []
        token = _SPACE_WARNINGS.set(waiting)
        failed = None
        try:
            return function(*args, **kwargs)
        except BaseException as exc:
            failed = exc
            raise
        finally:
            _SPACE_WARNINGS.reset(token)
            if failed is None or not out_of_space(failed):
                for message, hint in waiting:
                    warn(message, hint)

    return held


def inform(message: str) -> None:
    """A note on what a long step is doing (e.g. how many texts it embeds)."""
    if _reporter is not None:
        _reporter.info(message)
        return
    import logging  # noqa: PLC0415

    logging.getLogger("memctl").info(message)


def waiting(what: str):
    """A context manager: when the block takes more than a moment, the reporter says once what is waited
    for (a remote that may hang); else nothing."""
    if _reporter is not None:
        return _reporter.waiting(what)
    import contextlib  # noqa: PLC0415

    return contextlib.nullcontext()


def progress(total: int, what: str):
    """A context manager yielding advance(n): the reporter's progress bar, else nothing to show."""
    if _reporter is not None:
        return _reporter.progress(total, what)
    import contextlib  # noqa: PLC0415

    return contextlib.nullcontext(lambda n: None)
