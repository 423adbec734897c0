"""Scheduled jobs: the `schedule` group (render, install, uninstall, status), `run-job` and `maintain`."""

from __future__ import annotations

import contextlib
from typing import Annotated, Optional

import typer

from .. import jobs, output, runjob, trust
from .root import app
from .common import JsonOpt, NoCommitOpt, store_from
from ..errors import FAILED, BadInput, MemctlError
from ..fsutil import shell_word
from ..tsv import visible

schedule_app = typer.Typer(
    help="Scheduled jobs ([jobs.NAME] in memctl.toml): launchd plists on macOS, crontab lines elsewhere.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(schedule_app, name="schedule")

SchedulerOpt = Annotated[
    str, typer.Option("--scheduler", help="auto (launchd on macOS, cron elsewhere), launchd or cron.", metavar="NAME")
]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Print what would change; change nothing.")]


def check_command(words: tuple[str, ...]) -> str | None:
    """Why `memctl WORDS` would not parse (unknown command, bad option, missing argument), or None.

    Each group parses its own words as it would when run (near-dup's TEXT form included);
    nothing is invoked.
    """
    import typer.core
    import typer.main

    from .root import _click, load_commands

    group = getattr(_click, "Group", None) or typer.core.TyperGroup
    root = typer.main.get_command(load_commands())
    ctx = _click.Context(root, info_name="memctl", resilient_parsing=False)
    cmd, args, path = root, list(words), ["memctl"]
    try:
        while isinstance(cmd, group):
            if not args:
                return f"{' '.join(path)} needs a subcommand"
            name, sub, args = cmd.resolve_command(ctx, args)
            if sub is None:
                return f"no such command {name!r}"
            path.append(name)
            ctx = sub.make_context(name, list(args), parent=ctx)
            cmd = sub
            args = [*getattr(ctx, "_protected_args", getattr(ctx, "protected_args", [])), *ctx.args]
    except _click.exceptions.NoArgsIsHelpError:
        return f"{' '.join(path)} needs a subcommand"
    except _click.exceptions.UsageError as exc:
        return exc.format_message()
    except (typer.Exit, getattr(_click.exceptions, "Exit", typer.Exit)):
        return None  # --help or --version: it runs
    return None


@schedule_app.command("render")
def render(ctx: typer.Context, json: JsonOpt = False) -> None:
    """Write one plist per job into launchd/ (machine-local, not committed) and print the crontab lines."""
    store = store_from(ctx)
    done = jobs.render(store, check_command=check_command)
    if json:
        output.emit_json({
            "written": [store.rel(p) for p in done.written], "removed": [store.rel(p) for p in done.removed],
            "unchanged": [store.rel(p) for p in done.unchanged], "crontab": done.crontab, "warnings": list(done.warnings),
        })
        return
    output.emit_text(done.crontab)
    for warning in done.warnings:
        output.warn(warning)
    total = len(done.written) + len(done.unchanged)
    output.info(f"launchd/: {total} plists ({len(done.written)} written, {len(done.unchanged)} unchanged, {len(done.removed)} removed)"
                if total or done.removed else "no jobs declared in memctl.toml ([jobs.NAME])")


def _show_plan(plan: jobs.Plan, dry_run: bool, json: bool, removing: bool = False, approved: list | None = None,
               digest: str | None = None) -> None:
    if json:
        output.emit_json({"scheduler": plan.scheduler, "changed": plan.changed, "dry_run": dry_run,
                          "steps": [s.describe() for s in plan.steps], "crontab": plan.crontab_after,
                          "notes": list(plan.notes), "warnings": list(plan.warnings),
                          "approved": [s.key for s in approved or ()], "waiting_digest": digest})
    elif dry_run and plan.scheduler == "cron":
        output.emit_text(plan.crontab_after or "")
    elif dry_run:
        output.emit_lines(s.describe() for s in plan.steps)
    for note in plan.notes:
        output.info(note)
    for warning in plan.warnings:
        output.warn(warning)
    if dry_run:
        output.info("dry run: nothing changed" if plan.changed else "dry run: already as planned; nothing would change")
    else:
        output.info(f"{plan.scheduler}: {len(plan.steps)} change{'' if len(plan.steps) == 1 else 's'} made" if plan.changed
                    else f"{plan.scheduler}: {'nothing to remove' if removing else 'already up to date'}; nothing changed")


@schedule_app.command("install")
def install(
    ctx: typer.Context, dry_run: DryRunOpt = False, scheduler: SchedulerOpt = "auto",
    expect: Annotated[Optional[str], typer.Option("--expect", metavar="DIGEST", help=(
        "Install only if the jobs it would approve are still what `--dry-run` showed with this digest."))] = None,
    json: JsonOpt = False,
) -> None:
    """Load the jobs: launchctl bootstrap (macOS) or this store's block in your crontab (other lines kept).
    Installing approves the jobs that wait for approval (`memctl trust`); `--dry-run` says which."""
    store = store_from(ctx)
    with jobs.scheduler_lock() if not dry_run else contextlib.nullcontext():
        plan = jobs.plan_install(store, scheduler=scheduler, dry_run=dry_run, check_command=check_command)
        would = jobs.waiting(store) if dry_run else []  # what the real install would approve, said before it does
        trust.check_expected(would, expect, jobs=True)  # (a real install checks in jobs.install, twice)
        approved = [] if dry_run else jobs.install(store, plan, expect=expect)
    digest = trust.digest(would)
    _show_plan(plan, dry_run, json, approved=approved, digest=digest)
    for setting in approved:
        output.info(f"approved {trust.describe(setting)} on this machine (it waited: {setting.why})")
    for setting in would:
        output.info(f"would approve {trust.describe(setting)} on this machine (it waits: {setting.why}; "
                    f"`memctl trust --list` shows it)")
    if digest:
        output.info(f"`memctl schedule install --expect {digest}` installs and approves exactly these")


@schedule_app.command("uninstall")
def uninstall(ctx: typer.Context, dry_run: DryRunOpt = False, scheduler: SchedulerOpt = "auto", json: JsonOpt = False) -> None:
    """Unload this store's jobs (launchctl bootout, or remove its crontab block)."""
    store = store_from(ctx)
    with jobs.scheduler_lock() if not dry_run else contextlib.nullcontext():
        plan = jobs.plan_install(store, scheduler=scheduler, remove=True, dry_run=dry_run)
        if not dry_run:
            jobs.apply(store, plan)
    _show_plan(plan, dry_run, json, removing=True)


@schedule_app.command("status")
def status(
    ctx: typer.Context,
    name: Annotated[Optional[str], typer.Argument(help="Only this job.", metavar="[NAME]")] = None,
    tail: Annotated[int, typer.Option("--tail", help="Also print the last N lines of each job's log.", min=0, max=1000)] = 0,
    json: JsonOpt = False,
) -> None:
    """Each job's schedule, last run, last exit code, last success and state (read from logs/NAME.log)."""
    store = store_from(ctx)
    found = jobs.statuses(store, name, tail=tail if not json else max(tail, jobs.TAIL_LINES))
    if json:
        output.emit_json([s.to_dict() for s in found])
        return
    output.emit_table(
        [{**s.to_dict(), "last_exit": "" if s.last_exit is None else s.last_exit} for s in found],
        ["job", "schedule", "last_run", "last_exit", "last_success", "state"],
    )
    for s in found:
        if tail and s.tail:
            # A job's output is anyone's text (a pushed script, a remote's `remote:` lines): shown, not obeyed.
            output.emit_lines([f"==> {s.log} <==", *(visible(line, "\t") for line in s.tail)])


@app.command("run-job")
def run_job(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="A job declared as [jobs.NAME] in memctl.toml.", metavar="NAME")],
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only write the log (what launchd and cron run).")] = False,
) -> None:
    """Run one job as the scheduler does: per-job lock, logs/NAME.log, an error episode on failure (a success one for a found_exit)."""
    try:
        store = store_from(ctx)
    except MemctlError as exc:  # memctl.toml does not load: the job's log says why it did not run
        if (root := _root_if_any(ctx)) is not None:
            runjob.log_not_run(root, name, exc)
        raise
    result = runjob.run_job(store, name, echo=None if quiet else output.emit_text, note=None if quiet else output.info)
    log = store.rel(result.log)
    if result.exit_code == 0:
        if not quiet:  # under launchd and cron stderr is a file that only what run-job could not log belongs in
            output.info(f"job {name} succeeded in {result.seconds:.1f}s (log: {log})")
        return
    trace = f"episode {result.episode}" if result.episode else f"no episode: {result.episode_error}"
    if jobs.get_job(store, name).succeeded(result.exit_code):  # a found_exit: it worked, and found something
        if not quiet:
            output.info(f"job {name} found something (exit {result.exit_code}) in {result.seconds:.1f}s (log: {log}; {trace})")
    else:
        output.error(f"job {name} failed with exit {result.exit_code} (log: {log}; {trace})")
    raise typer.Exit(result.exit_code)


def _root_if_any(ctx: typer.Context):
    from ..store import find_root  # noqa: PLC0415

    try:
        return find_root((ctx.find_root().obj or {}).get("root"))
    except MemctlError:
        return None


@app.command("trust")
def trust_(
    ctx: typer.Context,
    keys: Annotated[Optional[list[str]], typer.Argument(help="Only these settings (keys as --list prints them).", metavar="[KEY]...")] = None,
    list_: Annotated[bool, typer.Option("--list", help="Show every executable setting and whether it waits; approve nothing.")] = False,
    expect: Annotated[Optional[str], typer.Option("--expect", metavar="DIGEST",
                                                  help="Approve only if what waits is still what `--list` showed with this digest.")] = None,
    json: JsonOpt = False,
) -> None:
    """Show what a commit not made here changed in memctl.toml's executable settings (jobs, redaction
    patterns, the embedder, the near-dup judge, what sources read), and approve it on this machine
    (the approval is kept outside git)."""
    if list_ and expect is not None:
        raise BadInput("--expect approves, --list approves nothing", hint="memctl trust --list, then memctl trust --expect DIGEST")
    store = store_from(ctx)
    found, approved = trust.review(store, keys or None, approving=not list_, expect=expect)
    if json:
        output.emit_json({"settings": [s.to_dict() for s in found], "approved": [s.key for s in approved],
                          "waiting_digest": trust.digest(found) if list_ else None})
        return
    if list_:
        output.emit_table([{**s.to_dict(), "why": s.why or ""} for s in found], ["key", "state", "value", "why"])
        waiting_now = sum(not s.approved for s in found)
        keys_part = "".join(f" {shell_word(k)}" for k in keys or ())
        output.info(f"{waiting_now} of {len(found)} settings wait for approval"
                    + (f"; `memctl trust --expect {trust.digest(found)}{keys_part}` approves exactly these" if waiting_now else ""))
        return
    for s in approved:
        output.emit_lines([f"{trust.describe(s)}: {s.value}", f"  before: {s.was or '(not set, or never approved here)'}",
                           f"  why it waited: {s.why}"])
    output.info(f"approved {len(approved)} settings on this machine; memctl acts on them from now on"
                if approved else "nothing waits for approval")


@app.command("maintain")
def maintain(
    ctx: typer.Context,
    strict: Annotated[bool, typer.Option("--strict", help="Fail on doctor's warnings too.")] = False,
    no_commit: NoCommitOpt = False,
    json: JsonOpt = False,
) -> None:
    """Daily upkeep: regenerate the MEMORY.md index, commit the access log, then run doctor."""
    from .. import maintain as maintain_mod

    store = store_from(ctx, committing=not no_commit)
    done = maintain_mod.maintain(store, commit_changes=not no_commit)
    failing = [p for p in done.problems if p.severity == "error" or strict]
    if json:
        access = None if done.access is None else {"appended": done.access.appended, "commit": done.access.commit}
        output.emit_json({"index": {"changed": done.index_changed, "commit": done.index_commit}, "access": access,
                          "packed": done.packed, "ok": not failing, "problems": [p.__dict__ for p in done.problems]})
    else:
        output.info("MEMORY.md regenerated" if done.index_changed else "MEMORY.md is up to date")
        if done.access is not None:
            output.info(f"access log: {done.access.appended} records committed" if done.access.commit else "access log: nothing to commit")
        if done.packed:
            output.info(f"git: {done.packed / (1 << 20):,.0f} MiB of loose objects packed")
        output.emit_lines(p.report() for p in done.problems)
        if not done.problems:
            output.info("store is clean")
    if failing:
        raise typer.Exit(FAILED)
