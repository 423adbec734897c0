"""The `memctl` command.

`main()` first offers argv to the fast paths in fast.py (commands that
scripts call in loops, parsed by hand without building the Typer app); any
other command line goes to the Typer app in root.py. Nothing heavy is
imported here: this module is on the start-up path of every command.
"""

from __future__ import annotations


def main() -> None:
    standard_process()
    try:
        _main()
    except SystemExit as done:
        _exit_after_output(done.code)
    except KeyboardInterrupt as exc:  # before a command's own handler (while importing): one line, no traceback
        _exit_after_output(_interrupted(exc))
    _exit_after_output(0)


def _interrupted(exc: KeyboardInterrupt) -> int:
    import sys

    from .. import early, output
    from .fast import interrupted

    try:
        early.discard()  # a git started before the imports (sync's) does not outlive us
    except (OSError, KeyboardInterrupt):
        pass
    return interrupted(exc, output.wants_json(sys.argv[1:]))


def standard_process() -> None:
    """Give the process what every command takes for granted, as cron, launchd and hand-made services do
    not always: the standard descriptors open (one closed is /dev/null: else the first file memctl opened
    took its number, git's output went into it, and `print` met None), and Python's UTF-8 mode (under a
    Latin-1 or EUC-JP locale, arguments were decoded in that locale: Japanese text was committed as
    mojibake, or a git argument failed to encode). Either one missing: memctl runs itself again, in UTF-8
    mode (PYTHONUTF8=1 for its children too), UTF-8 arguments passed on byte for byte and any other read in
    the locale's encoding (_as_utf8); the output stays in that encoding where someone reads it so."""
    import os
    import sys

    if os.name != "posix":
        return
    reopened = False
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            os.set_inheritable(fd, True)  # (os.open's are not: the lowest free number is `fd` itself)
            reopened = True
    locale = sys.getfilesystemencoding()
    utf8 = sys.flags.utf8_mode or locale == "utf-8"
    if (reopened or not utf8) and not os.environ.get("MEMCTL_STARTED_AGAIN"):
        os.environ["PYTHONUTF8"] = "1"
        os.environ["MEMCTL_STARTED_AGAIN"] = "1"  # (never twice: the descriptors are open, UTF-8 mode is on)
        if not utf8 and (_writes_japanese(locale) or os.isatty(1)):
            # The output in the locale's encoding where someone reads it so: a terminal, and anything under EUC-JP or
            # Shift_JIS, as before (what such a locale cannot write is `?`); else UTF-8, lossless (cron's log files).
            os.environ["MEMCTL_OUTPUT_ENCODING"] = locale
        try:
            arguments = _original_arguments()
            if not utf8:  # text typed in the locale's own encoding (not UTF-8) is read as that, as before
                arguments = [_as_utf8(arg, locale) for arg in arguments]
            os.execv(sys.executable, [sys.executable, "-X", "utf8", *arguments])
        except (OSError, UnicodeError, LookupError):
            pass  # (no interpreter to run again, or arguments that cannot be given back: go on as we are)
    os.environ.pop("MEMCTL_STARTED_AGAIN", None)
    encoding = os.environ.pop("MEMCTL_OUTPUT_ENCODING", None)  # (the children's output is read as UTF-8)
    if encoding:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None and hasattr(stream, "reconfigure"):
                stream.reconfigure(encoding=encoding, errors="replace")


def _writes_japanese(encoding: str) -> bool:
    try:
        "日本語のメモ".encode(encoding)
        return True
    except (UnicodeError, LookupError):
        return False


def _as_utf8(argument: bytes, locale: str) -> bytes:
    """An argument as UTF-8: as it is when it is UTF-8 (cron or a legacy shell passing UTF-8 text), else read in
    the locale's encoding (a terminal really in EUC-JP or Latin-1) and written as UTF-8."""
    try:
        argument.decode("utf-8")
        return argument
    except UnicodeDecodeError:
        return argument.decode(locale, "surrogateescape").encode("utf-8", "surrogateescape")


def _original_arguments() -> list:
    """The interpreter's arguments after its own name, as the bytes it was given: /proc/self/cmdline where
    there is one (the C library decoded them, and Python's codec of the locale may not encode them back:
    glibc reads a byte 0x83 of EUC-JP as U+0083, which Python's euc_jp refuses), else encoded again."""
    import os
    import sys

    try:
        with open("/proc/self/cmdline", "rb") as handle:
            given = handle.read().split(b"\0")[:-1]
        if len(given) == len(sys.orig_argv):
            return given[1:]
    except OSError:
        pass
    return [os.fsencode(arg) for arg in sys.orig_argv[1:]]


def _exit_after_output(code) -> None:
    """Exit with `code` once what is left of the output is written: a failure to write it (`> /dev/full`,
    where a buffered write fails only at the end) is one line and exit 1, not Python's "Exception ignored"
    lines and exit 120 at shutdown, unless the command already failed (it said why)."""
    import os
    import sys

    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except OSError as exc:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())  # the bytes left in the buffer go nowhere, and shutdown flushes quietly
        os.close(null)
        # A reader that went away (`| head`) is a quiet end with the command's own code, as the commands' own
        # BrokenPipeError handlers make it: recall's 1 is "nothing found", near-dup's "a near-duplicate".
        if not code and sys.argv[1:2] != ["hook"] and not isinstance(exc, BrokenPipeError):  # (a hook exits 0 whatever happens: its contract, docs/AGENTS.md)
            from .. import errors, output

            exc.filename = errors.OUTPUT
            failed = errors.from_os_error(exc)
            output.failure(failed.message, failed.hint, 1, json=output.wants_json(sys.argv[1:]))
            code = 1
    sys.exit(code)


def _main() -> None:
    import sys

    from .. import early

    early.settle_environment()  # before any thread: later writes to the environment may crash getenv
    if "sync" in sys.argv[1:]:  # its `git status` runs while the rest is imported (memctl/early.py)
        import signal

        from ..errors import stop_raising

        stop_raising(signal.SIGTERM, signal.SIGHUP)  # (a kill then stops the gits it started: gitstore.finish)
        early.start_sync_status(sys.argv[1:])
    from .. import errors, output
    from .fast import run

    errors.set_reporter(output)  # the library's warnings become `memctl: warning: ...` lines
    bad = undecodable(sys.argv[1:])
    if bad is not None:  # (the one line of an error with --json too: an object, as every other error)
        output.failure(bad.message, bad.hint, bad.exit_code, json=output.wants_json(sys.argv[1:]))
        sys.exit(bad.exit_code)
    code = run(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from .root import app, load_commands

    load_commands(sys.argv[1:])
    app()


def undecodable(argv: list[str]):
    """BadInput for the first argument or MEMCTL_* variable that is not valid UTF-8, else None.

    Python hands such bytes over as lone surrogates (surrogateescape); refused here, once, no
    command ever meets them. A hook (`memctl hook ...`) is left to exit 0 as its contract says.
    """
    import os

    def broken(text: str) -> bool:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False

    from .. import errors

    if argv[:1] == ["hook"]:
        return None
    for number, arg in enumerate(argv, 1):
        if broken(arg):
            return errors.not_utf8(f"argument {number} ({repr(os.fsencode(arg))[2:-1]})")
    for name, value in os.environ.items():
        if name.startswith("MEMCTL_") and broken(value):
            return errors.not_utf8(f"the environment variable {name}")
    return None
