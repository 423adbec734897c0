"""`memctl sync` without the Typer app when there is nothing to do (memctl/sync_fast.py).

A sync job runs every few minutes and mostly finds the remote where this clone
is; building the Typer app and importing the merge machinery would cost more
than the git commands. `run()` takes the plain forms (`sync [--remote NAME]
[--no-push] [--json]`), asks `sync_fast.nothing_to_do`, and prints the summary
the Typer command prints (`summary()`, shared with it); anything else, and
every case with work to do, returns None and goes to the Typer command.
"""

from __future__ import annotations

import posixpath


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def summary(result, *, json: bool) -> None:
    """What came in, what went out, what was resolved how: stdout for data, stderr for the rest."""
    from .. import output

    if json:
        output.emit_json(result.to_dict())
        return
    from ..tsv import format_record

    # TSV lines of what another clone pushed (a file name, a ledger value): escaped as a ledger's fields,
    # and on a terminal each control character shown, not obeyed (an OSC 52 would write the clipboard).
    output.emit_content("".join(format_record(fields) + "\n" for fields in (
        *(("resolved", item.path, item.how) for item in result.resolved),
        *(("conflict", copy) for copy in result.conflicts),
        *(("duplicate", dup.ledger, f"{dup.column}={dup.value}", str(dup.count)) for dup in result.duplicates))))
    where = f"{result.remote}/{result.branch}"
    sent = f"{_n(result.outgoing, 'commit')} pushed" if result.pushed else (
        f"{_n(result.outgoing, 'commit')} not pushed (--no-push)" if result.outgoing else "nothing to push")
    output.info(f"{where}: {_n(result.incoming, 'commit')} in ({_n(len(result.files_in), 'file')}), {sent}"
                + (f", {_n(len(result.resolved), 'file')} resolved" if result.resolved else ""))
    if result.conflicts:
        output.warn(f"{_n(len(result.conflicts), 'fact')} changed on one side and changed, archived or deleted on the "
                    f"other: a version is kept aside in {posixpath.dirname(result.conflicts[0])}/",
                    hint="memctl conflicts; memctl resolve NAME --keep local|remote|both")
    if result.duplicates:
        output.warn(f"{_n(len(result.duplicates), 'unique value')} repeated by the rows this sync brought in "
                    "(appended on two machines while apart, or repeated by the remote itself)",
                    hint="; ".join(dict.fromkeys(f"memctl ledger dups {d.ledger} {d.column}" for d in result.duplicates)))


def run(argv: list[str]) -> int | None:
    """The exit code of `memctl [--root DIR] sync ...` when it had nothing to do; None otherwise."""
    from .. import early

    try:
        return _run(argv)
    finally:
        early.discard()  # a status started early and not used (another form, or work to do)


def _run(argv: list[str]) -> int | None:
    from ..early import root_option
    import signal

    from .fast import _options, interrupted, report

    split = root_option(argv)
    if split is None or split[1][:1] != ["sync"]:
        return None
    root, rest = split
    parsed = _options(rest[1:], {"--no-push", "--json"}, {"--remote"})
    if parsed is None or parsed[0]:
        return None  # --setup, --help, a stray argument: the Typer command
    opts = parsed[1]
    from .. import errors
    from ..store import load_store
    from ..sync_fast import nothing_to_do

    json = "--json" in opts
    try:
        # --no-push changes nothing here: with the remote at HEAD there is nothing to push. A SIGTERM or
        # SIGHUP (a closed terminal, `kill`) stops its git and ssh too, as Ctrl-C does (gitstore.finish).
        with errors.stops_raise(signal.SIGTERM, signal.SIGHUP):
            result = nothing_to_do(load_store(root), remote=opts.get("--remote"))
    except BrokenPipeError:
        return errors.OK
    except KeyboardInterrupt as exc:  # one line, 130 (143 for SIGTERM), as the Typer command says it
        return interrupted(exc, json)
    except Exception as exc:  # noqa: BLE001  (mapped exactly as the Typer command maps them)
        code = report(exc, json)
        if code is None:
            raise
        return code
    if result is None:
        return None
    summary(result, json=json)
    return errors.OK
