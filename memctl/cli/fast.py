"""Fast paths for the commands scripts call in loops: `ledger append` and `near-dup`.

A cron job or an agent runs `memctl ledger append ...` once per record and
`memctl near-dup TEXT ...` once per candidate, so their start-up is a budget
(issues 3 and 5), and building the Typer app costs more than the work itself.
`run()` parses their plain forms by hand and returns None for anything else
(--help, an unknown or malformed option, `--`, a bad number), which then goes
to the Typer app and gets its usual handling and messages.

The commands' bodies live here and the Typer commands call them too, so both
paths do and print the same things; tests/cli/test_fast_path.py runs each
command line both ways and compares. MEMCTL_NO_FAST=1 turns the fast paths off.
Only light modules are imported before the work starts (no typer, click, rich).
"""

from __future__ import annotations

import os
import sys

NEW, DUPLICATE, NEAR_DUP_ERROR = 0, 1, 2  # near-dup's own exit codes


# ---------------------------------------------------------------- bodies

def ledger_append(store, name: str, values: list[str], *, unique: str | None, no_commit: bool, json: bool) -> None:
    """`memctl ledger append NAME COL=VALUE... | -`."""
    from .. import ledger, output
    from ..errors import BadInput

    if values == ["-"]:
        data = sys.stdin.buffer.read()
        records = ledger.parse_ndjson(data) if json else ledger.parse_tsv(data, ledger.open_ledger(store, name).columns)
    elif "-" in values:
        raise BadInput("- (read stdin) cannot be mixed with col=value arguments")
    elif values:
        records = [ledger.record_from_assignments(values)]
    else:
        raise BadInput("nothing to append", hint="give col=value for each column, or - to read records from stdin")
    done = ledger.append(store, name, records, unique=unique, commit_changes=not no_commit)
    rel = store.rel(done.path)
    if json:
        output.emit_json({"ledger": done.ledger, "path": rel, "appended": done.count, "commit": done.commit})
    else:
        output.info(f"{rel}: +{done.count}")


def near_dup_error(exc: BaseException) -> int | None:
    """near-dup's contract: any error exits 2, never 1 (which means "near-duplicate")."""
    from .. import output
    from ..errors import MemctlError

    if isinstance(exc, MemctlError):
        output.error(exc.one_line())
        return NEAR_DUP_ERROR
    if isinstance(exc, (UnicodeError, ValueError, OSError)) and not isinstance(exc, BrokenPipeError):
        output.error(f"{type(exc).__name__}: {exc}".replace("\n", " "))
        return NEAR_DUP_ERROR
    return None


def verdict_line(report, check) -> str:
    word = "near-duplicate" if check.duplicate else "new"
    sign = ">=" if check.duplicate else "<"
    return (
        f"{word}: best {check.best:.3f} {sign} {report.threshold:g} "
        f"({report.embedder}, threshold {report.threshold_origin}, {report.rows} rows, "
        f"{report.embedded} embedded, {report.via})"
    )


def near_dup_check(store, text: str | None, *, ledger: str | None, column: str | None, facts: bool, top: int | None,
                   threshold: float | None, stdin: bool, json: bool) -> int:
    """`memctl near-dup [check] TEXT | --stdin`; returns the exit code (0 new, 1 near-duplicate)."""
    from .. import neardup, output
    from ..errors import BadInput

    if stdin == (text is not None):
        raise BadInput("give TEXT or --stdin (one text per line), not both" if stdin else "nothing to check",
                       hint="memctl near-dup TEXT --ledger NAME --column COL")
    texts = [line for line in sys.stdin.read().splitlines() if line.strip()] if stdin else [text or ""]
    source = neardup.source_for(store, ledger=ledger, column=column, facts=facts)
    top = neardup.DEFAULT_TOP if top is None else top
    report = neardup.check(store, texts, source, top=top, threshold=threshold)
    for note in report.notes:
        output.info(note)
    if stdin:
        if json:
            output.emit_ndjson({**c.to_dict(), "embedder": report.embedder} for c in report.checks)
        else:
            output.emit_table(
                [{
                    "verdict": "near-duplicate" if c.duplicate else "new", "best": f"{c.best:.4f}",
                    "where": c.hits[0].where if c.hits else "", "hit": c.hits[0].text if c.hits else "", "text": c.text,
                } for c in report.checks],
                ["verdict", "best", "where", "hit", "text"],
            )
        output.info(f"{sum(c.duplicate for c in report.checks)} of {len(report.checks)} near-duplicate "
                    f"({report.embedder}, threshold {report.threshold:g})")
    else:
        found = report.checks[0]
        if json:
            data = report.to_dict()
            del data["checks"]
            output.emit_json({**found.to_dict(), **data})
        else:
            output.emit_table([{"score": f"{h.score:.3f}", "overlap": f"{h.overlap:.2f}", "where": h.where, "text": h.text}
                               for h in found.hits], ["score", "overlap", "where", "text"])
            output.info(verdict_line(report, found))
    return DUPLICATE if report.duplicate else NEW


# ---------------------------------------------------------------- parsing

def _options(args: list[str], flags: set[str], valued: set[str]) -> tuple[list[str], dict[str, object]] | None:
    """Positionals and options, interspersed as click allows; None for anything it might read otherwise."""
    positional: list[str] = []
    options: dict[str, object] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "-" or not arg.startswith("-"):
            positional.append(arg)
        elif arg in flags:
            options[arg] = True
        else:
            name, eq, value = arg.partition("=")
            if name not in valued:
                return None  # --help, --, an unknown option, --flag=value
            if not eq:
                i += 1
                if i == len(args) or args[i].startswith("-"):
                    return None  # missing value, or one click would read differently
                value = args[i]
            options[name] = value
        i += 1
    return positional, options


def _root(argv: list[str]) -> tuple[str | None, list[str]] | None:
    """The root group's own options: only --root is taken here (--version, --help go to Typer)."""
    root, i = None, 0
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] == "--root" and i + 1 < len(argv):
            root, i = argv[i + 1], i + 2
        elif argv[i].startswith("--root="):
            root, i = argv[i][len("--root="):], i + 1
        else:
            return None
    return root, argv[i:]


def _ledger_append(args: list[str]):
    parsed = _options(args, {"--no-commit", "--json"}, {"--unique"})
    if parsed is None or not parsed[0]:
        return None
    positional, opts = parsed
    return ledger_append, None, dict(
        name=positional[0], values=positional[1:], unique=opts.get("--unique"),
        no_commit="--no-commit" in opts, json="--json" in opts,
    )


def _near_dup(args: list[str]):
    if args and args[0] == "check":
        args = args[1:]
    elif args and args[0] in ("scan", "calibrate"):
        return None
    parsed = _options(args, {"--facts", "--stdin", "--json"}, {"--ledger", "--column", "--top", "--threshold"})
    if parsed is None or len(parsed[0]) > 1 or not args:
        return None
    positional, opts = parsed
    try:
        top = int(opts["--top"]) if "--top" in opts else None
        threshold = float(opts["--threshold"]) if "--threshold" in opts else None
    except ValueError:
        return None
    return near_dup_check, near_dup_error, dict(
        text=positional[0] if positional else None, ledger=opts.get("--ledger"), column=opts.get("--column"),
        facts="--facts" in opts, top=top, threshold=threshold, stdin="--stdin" in opts, json="--json" in opts,
    )


def _plan(argv: list[str]):
    split = _root(argv)
    if split is None:
        return None
    root, rest = split
    if rest[:2] == ["ledger", "append"]:
        found = _ledger_append(rest[2:])
    elif rest[:1] == ["near-dup"]:
        found = _near_dup(rest[1:])
    else:
        return None
    return None if found is None else (root, *found)


def run(argv: list[str]) -> int | None:
    """Run argv here and return its exit code, or None when the Typer app should handle it."""
    if os.environ.get("MEMCTL_NO_FAST", "") not in ("", "0"):
        return None
    plan = _plan(argv)
    if plan is None:
        return None
    root, body, on_error, kwargs = plan
    from .. import errors, output
    from ..store import load_store

    try:
        return body(load_store(root), **kwargs) or errors.OK
    except BrokenPipeError:
        return errors.OK
    except KeyboardInterrupt:
        return 130  # as click does: no traceback
    except EOFError:
        sys.stderr.write("\nAborted!\n")  # as click does
        return errors.FAILED
    except Exception as exc:  # noqa: BLE001  (mapped exactly as the Typer commands map them)
        code = on_error(exc) if on_error else None
        if code is not None:
            return code
        if isinstance(exc, OSError):
            exc = errors.from_os_error(exc)
        if isinstance(exc, errors.MemctlError):
            output.error(exc.one_line())
            return exc.exit_code
        raise
