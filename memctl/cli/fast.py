"""Fast paths for the commands called in loops or on every prompt: `ledger append`, `near-dup`,
`recall`, `episode recall`, `context` and `hook prompt|session-start`; and `mcp`, whose tools
a client must have listed within 300 ms of starting it (bench/bench_mcp_start.py).

A cron job or an agent runs `memctl ledger append ...` once per record and
`memctl near-dup TEXT ...` once per candidate, so their start-up is a budget
(bench/bench_ledger.py and bench/bench_neardup.py measure it), and building the Typer app costs more than the work itself.
`run()` parses their plain forms by hand and returns None for anything else
(--help, an unknown or malformed option, `--`, a bad number), which then goes
to the Typer app and gets its usual handling and messages.

The commands' bodies live here and the Typer commands call them too, so both
paths do and print the same things; tests/cli/test_fast_path.py runs each
command line both ways and compares. Claude Code runs `memctl hook prompt` on
every prompt (memctl/integrations/hooks.py). MEMCTL_NO_FAST=1 turns the fast paths off.
Only light modules are imported before the work starts (no typer, click, rich).
"""

from __future__ import annotations

import sys

from ..values import env_on

NEW, DUPLICATE, NEAR_DUP_ERROR, SIMILAR = 0, 1, 2, 5  # near-dup's own exit codes (3, 4: as everywhere)
NEAR_DUP_EXIT = {"new": NEW, "near-duplicate": DUPLICATE, "similar": SIMILAR}


# ---------------------------------------------------------------- bodies

def ledger_append(store, name: str, values: list[str], *, unique: str | None, no_commit: bool, json: bool,
                  allow_secrets: bool = False) -> None:
    """`memctl ledger append NAME COL=VALUE... | -`."""
    from .. import ledger, output
    from ..errors import BadInput
    from ..store import will_commit

    will_commit(store, not no_commit)  # git that cannot commit refuses before stdin is read (exit 0 means committed)

    if values == ["-"]:
        from ..fsutil import read_input

        data = read_input(sys.stdin.buffer, "stdin")
        records = ledger.parse_ndjson(data) if json else ledger.parse_tsv(data, ledger.open_ledger(store, name).columns)
    elif "-" in values:
        raise BadInput("- (read stdin) cannot be mixed with col=value arguments")
    elif values:
        records = [ledger.record_from_assignments(values)]
    else:
        raise BadInput("nothing to append", hint="give col=value for each column, or - to read records from stdin")
    done = ledger.append(store, name, records, unique=unique, commit_changes=not no_commit, allow_secrets=allow_secrets,
                         by_user=True)
    rel = store.rel(done.path)
    if json:
        output.emit_json({"ledger": done.ledger, "path": rel, "appended": done.count, "commit": done.commit})
    else:
        output.info(f"{rel}: +{done.count}")


def mcp_serve(root: str | None, store: str | None) -> None:
    """`memctl mcp`: find the store as a hook does, and serve it on stdin/stdout (tools/list within
    300 ms of the start: no Typer here, and the SDK loads behind mcp_fast's relay)."""
    from ..integrations import claude_code, hooks, mcp_server

    found = claude_code.locate(root, store=store)
    if hooks.checked():
        hooks.say_checked(found, None)
    mcp_server.serve(found.root)


def near_dup_error(exc: BaseException, json: bool = False) -> int | None:
    """near-dup's contract: an error never exits 1 (which means "near-duplicate"): not found is 3 and
    a lock timeout 4 as everywhere (errors.BY_CONDITION), any other error 2."""
    from .. import errors, output
    from ..errors import LOCKED, NOT_FOUND, MemctlError
    from . import hints

    if isinstance(exc, MemctlError):
        code = exc.exit_code if exc.exit_code in (NOT_FOUND, LOCKED) else NEAR_DUP_ERROR
        output.failure(*hints.worded(exc), code, json=json)
        return code
    if isinstance(exc, UnicodeError):
        failure = errors.from_unicode_error(exc)
        output.failure(failure.message, failure.hint, NEAR_DUP_ERROR, json=json)
        return NEAR_DUP_ERROR
    if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError):  # a full disk: one line with its hint, as everywhere
        failure = errors.from_os_error(exc)
        output.failure(*hints.worded(failure), NEAR_DUP_ERROR, json=json)
        return NEAR_DUP_ERROR
    if isinstance(exc, ValueError):
        output.failure(f"{type(exc).__name__}: {exc}", None, NEAR_DUP_ERROR, json=json)
        return NEAR_DUP_ERROR
    return None


def _read_text(source: str) -> str:
    """A file's text, or stdin's for `-`; not valid UTF-8, or a NUL, is bad input naming the source."""
    from ..errors import BadInput, NotFound, not_utf8

    from ..fsutil import read_input

    if source == "-":
        data = read_input(sys.stdin.buffer, "stdin")
    else:
        try:
            with open(source, "rb") as handle:
                data = read_input(handle, source)
        except FileNotFoundError:
            raise NotFound(f"no such file: {source}", hint="check the path (relative to the current folder)") from None
    name = "stdin" if source == "-" else source
    if b"\0" in data:  # it would reach the access log (docs/FORMAT.md, Limits)
        line = data.count(b"\n", 0, data.index(b"\0")) + 1
        raise BadInput(f"{name}:{line}: a NUL character", hint="remove it; queries are text", kind="nul")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise not_utf8(name, exc) from None


def verdict_line(report, check) -> str:
    word = check.verdict
    if check.judged:
        said = ", ".join(f"{h.where} {h.judge}" for h in check.hits if h.judge)
        how = f"judge: {said}; best {check.best:.3f}"
    elif word == "near-duplicate":
        how = f"best {check.best:.3f} >= {report.threshold:g}"
    elif word == "similar":
        how = f"best {check.best:.3f} in [{report.similar:g}, {report.threshold:g})"
    else:
        how = f"best {check.best:.3f} < {report.threshold if report.similar is None else report.similar:g}"
    return (
        f"{word}: {how} "
        f"({report.embedder}, threshold {report.threshold_origin}, {report.rows} rows, "
        f"{report.embedded} embedded, {report.via})"
    )


def near_dup_check(store, text: str | None, *, ledger: str | None, column: str | None, facts: bool, top: int | None,
                   threshold: float | None, stdin: bool, json: bool, similar: float | None = None,
                   explain: bool = False, judge_cmd: str | None = None) -> int:
    """`memctl near-dup [check] TEXT | --stdin`; returns the exit code (0 new, 1 near-duplicate, 5 similar)."""
    from .. import neardup, output
    from ..errors import BadInput

    if stdin == (text is not None):
        raise BadInput("give TEXT or --stdin (one text per line), not both" if stdin else "nothing to check",
                       hint="memctl near-dup TEXT --ledger NAME --column COL")
    texts = [line for line in _read_text("-").splitlines() if line.strip()] if stdin else [text or ""]
    source = neardup.source_for(store, ledger=ledger, column=column, facts=facts)
    top = neardup.DEFAULT_TOP if top is None else top
    report = neardup.check(store, texts, source, top=top, threshold=threshold, similar=similar, judge_cmd=judge_cmd)
    for note in report.notes:
        output.info(note)
    if stdin:
        if json:
            output.emit_ndjson({**c.to_dict(explain), "embedder": report.embedder} for c in report.checks)
        else:
            output.emit_table(
                [{
                    "verdict": c.verdict, "best": f"{c.best:.4f}",
                    "where": c.hits[0].where if c.hits else "", "hit": c.hits[0].text if c.hits else "", "text": c.text,
                } for c in report.checks],
                ["verdict", "best", "where", "hit", "text"],
            )
        band = "" if report.similar is None else f", {sum(c.verdict == 'similar' for c in report.checks)} similar"
        output.info(f"{sum(c.duplicate for c in report.checks)} of {len(report.checks)} near-duplicate{band} "
                    f"({report.embedder}, threshold {report.threshold:g})")
    else:
        found = report.checks[0]
        if json:
            data = report.to_dict()
            del data["checks"]
            output.emit_json({**found.to_dict(explain), **data})
        else:
            columns = ["score", "overlap", *(["verdict", "judge"] if explain else []), "where", "text"]
            output.emit_table([{"score": f"{h.score:.3f}", "overlap": f"{h.overlap:.2f}", "verdict": found.hit_verdict(h),
                                "judge": h.judge or "-", "where": h.where, "text": h.text} for h in found.hits], columns)
            if explain:
                output.info(explain_line(report))
            output.info(verdict_line(report, found))
    return NEAR_DUP_EXIT[report.verdict]


def explain_line(report) -> str:
    """How the verdicts were reached: the bands, and the judge."""
    band = "no similar band" if report.similar is None else f"similar from {report.similar:g}"
    judge = f"; judge {report.judge!r} decides for the top hits in them" if report.judge else "; no judge"
    return f"bands: near-duplicate from {report.threshold:g} ({report.threshold_origin}), {band}{judge}"


def _hit_rows(hits, explain: bool) -> list[dict]:
    from .. import output

    return output.hits_json(hits, explain)


def _flat(row: dict) -> dict:
    """A JSON row as table cells: numbers with 3 decimals, the explain dicts spread out."""
    flat = {}
    for key, value in row.items():
        if isinstance(value, list):  # a chunk's heading path
            flat[key] = " > ".join(value)
        elif isinstance(value, dict):
            flat.update({k: "" if v is None else f"{v:.3f}" for k, v in value.items()})
        elif isinstance(value, float):
            flat[key] = f"{value:.3f}"
        else:
            flat[key] = value
    return flat


# What a narrow terminal leaves out of a recall table first, so that the description has room and the name
# and path stay whole: a source's description (the same for each of its hits: `source list` has it), what
# the order of the rows says already or --explain shows, the type; last a fact's path (it holds the name
# `show` takes) or a document's heading (its path:lines is the one way back to it).
RECALL_SPARE = ("source_description", "relevance", "rank", "score", "type")
EXPLAIN_COLUMNS = ["rank", "score", "relevance", "keyword", "vector", "bm25", "cosine",
                   "importance", "confidence", "recency", "frequency", "name", "path"]


def _never_one(command):
    """For a command whose exit 1 means "nothing found" (recall, as grep): a failure of its own (the
    embed server, a full disk, output its encoding cannot write) exits 2 instead, never 1; not found
    (3), a held lock (4) and an interruption keep theirs."""
    import functools

    @functools.wraps(command)
    def run(*args, **kwargs):
        from .. import errors

        try:
            return command(*args, **kwargs)
        except errors.MemctlError as exc:
            if exc.exit_code == errors.FAILED:
                exc.exit_code = errors.USAGE
            raise
        except OSError as exc:
            if isinstance(exc, BrokenPipeError):
                raise
            failure = errors.from_os_error(exc)
            failure.exit_code = errors.USAGE
            raise failure from None
        except UnicodeError as exc:
            failure = errors.from_unicode_error(exc)
            failure.exit_code = errors.USAGE
            raise failure from None

    return run


@_never_one
def recall_cmd(store, query: str | None, *, queries: str | None = None, k: int = 10, source: str = "facts",
               mode: str | None = None, fact_type: str | None = None, tag: str | None = None, since: str | None = None,
               agent: str | None = None, include_all: bool = False, explain: bool = False, paths: bool = False,
               min_score: float | None = None, no_log: bool = False, json: bool = False) -> int:
    """`memctl recall` and `memctl episode recall`: 0 with hits, 1 when nothing reaches the floor (like grep)."""
    from .. import output, tsv
    from .. import recall as recall_mod
    from ..errors import BadInput

    if queries is not None:
        if query is not None:
            raise BadInput("give a QUERY or --queries FILE, not both")
        text = _read_text(queries)
        asked = [line.strip() for line in text.splitlines() if line.strip()]
        if not asked:
            raise BadInput(f"no queries in {queries}", hint="one query a line")
    elif query is not None:
        asked = [query]
    else:
        raise BadInput("give a QUERY or --queries FILE", hint='memctl recall "deploy schedule"')
    corpus, results = recall_mod.recall(
        store, asked, k=k, source=source, mode=mode, fact_type=fact_type, tag=tag, since=since, agent=agent,
        include_all=include_all, min_score=min_score, log=not no_log,
    )
    for note in corpus.notes:
        output.warn(note)
    found = any(results)
    if queries is not None:
        output.emit_ndjson({"query": q, "hits": _hit_rows(hits, explain)} for q, hits in zip(asked, results))
    elif paths:
        where = dict.fromkeys(h.item.path.split(":")[0] if h.item.kind == "fact" else h.item.path for h in results[0])
        if json:
            output.emit_json([{"path": path} for path in where])
        else:  # one line a path: a TAB, newline or backslash in a name escaped as in the table (`show` takes either)
            output.emit_content("".join(tsv.escape(path) + "\n" for path in where))
    elif json:
        output.emit_json(_hit_rows(results[0], explain))
    elif found and explain and output.stdout_is_tty():
        from .explain import blocks

        output.emit_lines(blocks(_hit_rows(results[0], explain), output.terminal_width()))
    elif found:
        columns = EXPLAIN_COLUMNS if explain else ["rank", "score", "relevance", "name", "type", "description", "path"]
        if any(h.item.kind == "chunk" for h in results[0]):  # a document's lines: where, under which headings, from what
            columns = [c for c in columns if c != "name"] + ["heading", "source_description"]
        chunks = "heading" in columns
        output.emit_table([_flat(r) for r in _hit_rows(results[0], explain)], columns,
                          spare=RECALL_SPARE + ("heading" if chunks else "path",))
    if not found and query is not None and not (json or paths):
        output.tty_note(_nothing_relevant(corpus))
    return 0 if found else 1  # like grep: nothing relevant prints nothing and exits 1


def _nothing_relevant(corpus) -> str:
    """What a person at a terminal reads when nothing reached the floor (a script reads exit 1 alone)."""
    said = f"nothing reached the relevance floor {corpus.min_score:g}"
    nearest = int(corpus.nearest[0] * 100) / 100 if corpus.nearest else 0.0  # (rounded down: the option shows it)
    if nearest >= 0.1:  # (a nonsense query's 0.06 is nothing near it)
        return f"{said} (the nearest was {nearest:.2f}: --min-score {nearest:.2f} shows it)"
    return f"{said} (nothing near it)"


def context_cmd(store, *, query: str | None = None, budget: int = 4000, k: int = 5, mode: str | None = None,
                min_score: float | None = None, no_index: bool = False, no_log: bool = False, json: bool = False) -> int:
    """`memctl context`."""
    from .. import context as context_mod
    from .. import output

    bundle = context_mod.build(store, query=query, budget=budget, k=k, mode=mode, min_score=min_score, log=not no_log,
                               include_index=not no_index)
    if json:
        output.emit_json(bundle.to_dict())
    else:
        output.emit_content(bundle.text)
    if bundle.dropped:
        output.info(f"{len(bundle.dropped)} lower-ranked parts left out to stay within {budget} tokens")
    return 0


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


def _ledger_append(args: list[str]):
    parsed = _options(args, {"--no-commit", "--json", "--allow-secrets"}, {"--unique"})
    if parsed is None or not parsed[0]:
        return None
    positional, opts = parsed
    return ledger_append, None, dict(
        name=positional[0], values=positional[1:], unique=opts.get("--unique"),
        no_commit="--no-commit" in opts, json="--json" in opts, allow_secrets="--allow-secrets" in opts,
    )


def _near_dup(args: list[str]):
    if args and args[0] == "check":
        args = args[1:]
    elif args and args[0] in ("scan", "calibrate"):
        return None
    parsed = _options(args, {"--facts", "--stdin", "--json", "--explain"}, {"--ledger", "--column", "--top", "--threshold", "--similar", "--judge-cmd"})
    if parsed is None or len(parsed[0]) > 1 or not args:
        return None
    positional, opts = parsed
    try:
        top = int(opts["--top"]) if "--top" in opts else None
        threshold = float(opts["--threshold"]) if "--threshold" in opts else None
        similar = float(opts["--similar"]) if "--similar" in opts else None
    except ValueError:
        return None
    return near_dup_check, near_dup_error, dict(
        text=positional[0] if positional else None, ledger=opts.get("--ledger"), column=opts.get("--column"),
        facts="--facts" in opts, top=top, threshold=threshold, stdin="--stdin" in opts, json="--json" in opts,
        similar=similar, explain="--explain" in opts, judge_cmd=opts.get("--judge-cmd"),
    )


def _numbers(opts: dict, ints: tuple[str, ...] = (), floats: tuple[str, ...] = ()) -> dict | None:
    """The numeric options converted, or None when one would be a usage error (Typer reports it)."""
    out = {}
    try:
        for name in ints:
            if name in opts:
                out[name] = int(str(opts[name]))
        for name in floats:
            if name in opts:
                out[name] = float(str(opts[name]))
    except ValueError:
        return None
    return out


def _parse(args: list[str], flags: set[str], valued: set[str], alias: tuple[str, str],
           ints: tuple[str, ...] = (), floats: tuple[str, ...] = ()):
    """(positional, options, numbers), or None for whatever Typer should report (an option given
    under both its names, a number that does not parse)."""
    parsed = _options(args, flags, valued)
    if parsed is None or alias[0] in parsed[1] and alias[1] in parsed[1]:
        return None
    numbers = _numbers(parsed[1], ints, floats)
    return None if numbers is None else (*parsed, numbers)


def _recall(args: list[str]):
    parsed = _parse(args, {"--all", "--explain", "--paths", "--no-log", "--json"},
                    {"--k", "--source", "--mode", "--type", "-t", "--tag", "--since", "--min-score", "--queries"},
                    ("--type", "-t"), ("--k",), ("--min-score",))
    if parsed is None or len(parsed[0]) > 1:
        return None
    positional, opts, numbers = parsed
    return recall_cmd, None, dict(
        query=positional[0] if positional else None, queries=opts.get("--queries"), k=numbers.get("--k", 10),
        source=opts.get("--source", "facts"), mode=opts.get("--mode"), fact_type=opts.get("--type", opts.get("-t")),
        tag=opts.get("--tag"), since=opts.get("--since"), include_all="--all" in opts, explain="--explain" in opts,
        paths="--paths" in opts, min_score=numbers.get("--min-score"), no_log="--no-log" in opts, json="--json" in opts,
    )


def _episode_recall(args: list[str]):
    parsed = _parse(args, {"--explain", "--no-log", "--json"},
                    {"--agent", "--type", "-t", "--since", "--k", "--mode", "--min-score"},
                    ("--type", "-t"), ("--k",), ("--min-score",))
    if parsed is None or len(parsed[0]) != 1:
        return None
    positional, opts, numbers = parsed
    return recall_cmd, None, dict(
        query=positional[0], source="episodes", agent=opts.get("--agent"), fact_type=opts.get("--type", opts.get("-t")),
        since=opts.get("--since"), k=numbers.get("--k", 10), mode=opts.get("--mode"),
        min_score=numbers.get("--min-score"), explain="--explain" in opts, no_log="--no-log" in opts,
        json="--json" in opts,
    )


def _context(args: list[str]):
    parsed = _parse(args, {"--no-index", "--no-log", "--json"}, {"--query", "-q", "--budget", "--k", "--mode", "--min-score"},
                    ("--query", "-q"), ("--budget", "--k"), ("--min-score",))
    if parsed is None or parsed[0]:
        return None
    _, opts, numbers = parsed
    return context_cmd, None, dict(
        query=opts.get("--query", opts.get("-q")), budget=numbers.get("--budget", 4000), k=numbers.get("--k", 5),
        mode=opts.get("--mode"), min_score=numbers.get("--min-score"), no_index="--no-index" in opts,
        no_log="--no-log" in opts, json="--json" in opts,
    )


def _hook_options(args: list[str]) -> dict | None:
    """A hook's options as installed: `--host NAME` and `--store PATH` (or --opt=VALUE), each at most
    once, in either order; {"store": ..., "host": ...} (None for one not given), or None for anything else."""
    found: dict = {"store": None, "host": None}
    rest = list(args)
    while rest:
        word = rest.pop(0)
        name, eq, value = word.partition("=")
        if name not in ("--store", "--host") or found[name[2:]] is not None:
            return None
        if not eq:
            if not rest:
                return None
            value = rest.pop(0)
        if not value:
            return None
        found[name[2:]] = value
    return found


def _mcp(root: str | None, args: list[str]):
    parsed = _options(args, set(), {"--root", "--store"})
    if parsed is None or parsed[0]:
        return None
    opts = parsed[1]
    return {"root": opts.get("--root") or root, "store": opts.get("--store")}


def _plan(argv: list[str]):
    from ..early import root_option

    split = root_option(argv)
    if split is None:
        return None
    root, rest = split
    if rest[:1] == ["hook"]:
        from ..integrations.hooks import EVENTS

        # A hook finds its store itself and never fails: it is not a body of the kind below.
        options = _hook_options(rest[2:])
        return (root, None, None, {"event": rest[1], **options}) if (
            len(rest) > 1 and rest[1] in EVENTS and options is not None) else None
    if rest[:1] == ["mcp"]:  # a server: it reports its errors itself, like a hook
        found_mcp = _mcp(root, rest[1:])
        return None if found_mcp is None else (root, None, None, {"mcp": found_mcp})
    if root is not None and not root.strip():
        return None  # `--root ""`: Typer's callback says so (a hook or the MCP server above still finds its store)
    if rest[:2] == ["ledger", "append"]:
        found = _ledger_append(rest[2:])
    elif rest[:1] == ["near-dup"]:
        found = _near_dup(rest[1:])
    elif rest[:1] == ["recall"]:
        found = _recall(rest[1:])
    elif rest[:2] == ["episode", "recall"]:
        found = _episode_recall(rest[2:])
    elif rest[:1] == ["context"]:
        found = _context(rest[1:])
    else:
        return None
    return None if found is None else (root, *found)


def run(argv: list[str]) -> int | None:
    """Run argv here and return its exit code, or None when the Typer app should handle it."""
    if env_on("MEMCTL_NO_FAST"):
        return None
    if "sync" in argv:  # `memctl sync` with nothing to do (fastsync.py)
        from .fastsync import run as run_sync

        code = run_sync(argv)
        if code is not None:
            return code
    plan = _plan(argv)
    if plan is None:
        return None
    root, body, on_error, kwargs = plan
    if body is None and "mcp" in kwargs:
        from .. import errors

        try:
            mcp_serve(**kwargs["mcp"])
        except Exception as exc:  # noqa: BLE001  (mapped as the Typer command maps them)
            code = report(exc, False)
            if code is None:
                raise
            return code
        return errors.OK
    if body is None:
        from ..integrations import hooks

        return hooks.run(root, kwargs["event"], store=kwargs["store"], host=kwargs["host"])
    from .. import errors, output
    from ..store import load_store

    output.set_json(bool(kwargs.get("json")))
    try:
        return body(load_store(root), **kwargs) or errors.OK
    except BrokenPipeError:
        return errors.OK
    except KeyboardInterrupt as exc:  # one line, no traceback
        return interrupted(exc, bool(kwargs.get("json")))
    except EOFError:
        sys.stderr.write("\nAborted!\n")  # as click does
        return errors.FAILED
    except Exception as exc:  # noqa: BLE001  (mapped exactly as the Typer commands map them)
        json = bool(kwargs.get("json"))
        code = on_error(exc, json) if on_error else None
        if code is None:
            code = report(exc, json)
        if code is None:
            raise
        return code


def interrupted(exc: KeyboardInterrupt, json: bool) -> int:
    """A Ctrl-C (or a SIGTERM while embedding) that reached the command: one line on stderr, and
    its exit code (130, 143): what an embedding finished is kept (vcache)."""
    import signal

    from .. import errors, output

    try:  # stopping already: a second Ctrl-C must not cut the line short
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # pragma: no cover - not the main thread
        pass
    message, code = errors.interrupted_line(exc)
    output.failure(message, None, code, json=json)
    return code


def report(exc: Exception, json: bool) -> int | None:
    """An error as the Typer commands report it (one line, or the JSON object): its exit code;
    None for an exception that is a bug (the caller re-raises it)."""
    from .. import errors, output
    from . import hints

    if isinstance(exc, OSError):
        exc = errors.from_os_error(exc)
    elif isinstance(exc, UnicodeError):
        exc = errors.from_unicode_error(exc)
    if not isinstance(exc, errors.MemctlError):
        return None
    output.failure(*hints.worded(exc), exc.exit_code, json=json)
    return exc.exit_code
