"""The `memctl` command.

`main()` first offers argv to the fast paths in fast.py (commands that
scripts call in loops, parsed by hand without building the Typer app); any
other command line goes to the Typer app in root.py. Nothing heavy is
imported here: this module is on the start-up path of every command.
"""

from __future__ import annotations


def main() -> None:
    import sys

    from .. import early

    early.settle_environment()  # before any thread: later writes to the environment may crash getenv
    if "sync" in sys.argv[1:]:  # its `git status` runs while the rest is imported (memctl/early.py)
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
