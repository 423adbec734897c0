"""The `memctl` command.

`main()` first offers argv to the fast paths in fast.py (commands that
scripts call in loops, parsed by hand without building the Typer app); any
other command line goes to the Typer app in root.py. Nothing heavy is
imported here: this module is on the start-up path of every command.
"""

from __future__ import annotations


def main() -> None:
    import sys

    from .fast import run

    code = run(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from .root import app, load_commands

    load_commands(sys.argv[1:])
    app()
