"""The Typer app behind `memctl`: the root group, its error handling, the lazy command table.

Each command parses its options, makes one library call and renders the
result. Library errors become one line on stderr and a documented exit code.
"""

from __future__ import annotations

import typer
import typer.core

from .. import errors, output
from . import hints

# Recent Typer versions vendor their own copy of click; older ones use click.
_click = getattr(typer.core, "_click", None) or __import__("click")


class _Group(typer.core.TyperGroup):
    """Turns library errors into `memctl: error: ... (hint: ...)` and an exit code (with --json
    among the arguments, one JSON object on stderr instead: docs/JSON.md)."""

    def make_context(self, info_name, args, parent=None, **extra):  # type: ignore[override]
        json = output.wants_json(args)
        try:
            ctx = super().make_context(info_name, args, parent=parent, **extra)
        except _click.exceptions.NoArgsIsHelpError:
            raise
        except _click.exceptions.UsageError as exc:
            _usage_error(exc, json)
        ctx.meta.setdefault(_JSON, json)
        ctx.meta.setdefault(_ARGS, list(args))
        return ctx

    def invoke(self, ctx):  # type: ignore[override]
        json = ctx.meta.get(_JSON, False)
        errors.set_reporter(output)  # also when the app is called without main() (tests, docs)
        output.set_json(json)  # no progress bar beside JSON
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM while embedding: one line, 130 (143)
            from .fast import interrupted

            raise typer.Exit(interrupted(exc, json)) from None
        except errors.MemctlError as exc:
            output.failure(*hints.worded(exc, no_commit=_has_no_commit(self, ctx)), exc.exit_code, json=json)
            raise typer.Exit(exc.exit_code) from None
        except _click.exceptions.NoArgsIsHelpError:
            raise
        except _click.exceptions.UsageError as exc:
            _usage_error(exc, json)
        except BrokenPipeError:
            raise typer.Exit(errors.OK) from None
        except UnicodeError as exc:  # a file or stdin a command read as text: one line, never a traceback
            failure = errors.from_unicode_error(exc)
            output.failure(failure.message, failure.hint, failure.exit_code, json=json)
            raise typer.Exit(failure.exit_code) from None
        except OSError as exc:  # disk full, file too large, permissions: one line, never a traceback
            failure = errors.from_os_error(exc)
            output.failure(failure.message, failure.hint, failure.exit_code, json=json)
            raise typer.Exit(failure.exit_code) from None


_JSON = "memctl.json"  # ctx.meta key: the command line asked for --json
_ARGS = "memctl.args"  # ctx.meta key: the arguments the root group was given


def _has_no_commit(group, ctx) -> bool:
    """Whether the command that ran (`ledger commit`, `log`...) has a --no-commit option, for a hint to offer
    it: `log` and `sync` need git whatever is given."""
    from ..early import root_option  # noqa: PLC0415

    split = root_option(ctx.meta.get(_ARGS, []))
    command, words = group, split[1] if split else []
    while hasattr(command, "list_commands"):  # a group (the vendored click names its classes its own way)
        command = command.get_command(ctx, words[0]) if words else None
        if command is None:
            return True  # (not found: keep the hint as it is)
        words = words[1:]
    return any("--no-commit" in getattr(param, "opts", ()) for param in command.params)


def _usage_error(exc, json: bool = False) -> None:
    """One line, like every other error; the full usage is one --help away. A hook's is exit 0 as every hook's
    error is (docs/CLAUDE_CODE.md): Claude Code takes exit 2 from a prompt hook as "block this prompt"."""
    where = exc.ctx.command_path if exc.ctx else "memctl"
    names, ctx = [], exc.ctx
    while ctx is not None:
        names.append(ctx.info_name)
        ctx = ctx.parent
    if len(names) >= 2 and names[-2] == "hook":
        label = f"hook {names[0]}" if len(names) > 2 else "hook"
        output.info(f"{label}: nothing added: {exc.format_message()} (hint: {where} --help)")
        raise typer.Exit(errors.OK) from None
    output.failure(exc.format_message(), f"{where} --help", errors.USAGE, json=json)
    raise typer.Exit(errors.USAGE) from None


EPILOG = "Exit codes: " + ", ".join(f"{code} {text}" for code, text in errors.EXIT_CODES.items()) + "."

app = typer.Typer(
    cls=_Group,
    name="memctl",
    help="Durable memory for AI agents, kept in plain files in a git repository.",
    epilog=EPILOG,
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        output.emit_text(f"memctl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    root: str = typer.Option(None, "--root", help="Store directory (default: MEMCTL_ROOT, else the nearest parent with memctl.toml, else this project's Claude Code memory directory).", metavar="DIR"),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    if root is not None and not root.strip():  # `--root "$UNSET"`: init made a store of the current folder
        from ..errors import BadInput  # noqa: PLC0415

        raise BadInput("--root is empty", hint="give the store's folder, or leave --root out")
    ctx.obj = {"root": root}


# Which module registers each top-level command. `memctl CMD ...` imports only
# that module, because start-up is a budget (every module costs import time);
# `--help`, no command or an unknown one import them all. A test checks that
# this table matches what the modules register.
COMMAND_MODULES = {
    "init": "facts", "remember": "facts", "show": "facts", "list": "facts", "forget": "facts",
    "index": "facts", "doctor": "facts", "log": "facts",
    "ledger": "ledger", "episode": "ledger",
    "near-dup": "vectors", "cache": "vectors", "embed-server": "vectors",
    "state": "state", "schedule": "jobs", "run-job": "jobs", "maintain": "jobs", "trust": "jobs",
    "recall": "recall", "context": "recall", "used": "recall", "audit": "recall", "pin": "recall", "unpin": "recall",
    "restore": "lifecycle",
    "consolidate": "consolidate", "conflicts": "consolidate", "distill": "consolidate", "procedure": "consolidate",
    "sync": "sync", "resolve": "sync", "merge-driver": "sync",
    "agent": "agent", "hook": "agent", "mcp": "mcp", "ui": "ui", "source": "sources",
}
MODULES = ("facts", "ledger", "vectors", "state", "jobs", "recall", "lifecycle", "consolidate", "sync", "agent", "mcp",
           "ui", "sources")


def _command_name(argv: list[str]) -> str | None:
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--root":
            i += 2
        elif arg.startswith("--root="):
            i += 1
        elif arg.startswith("-"):
            return None  # --help, --version, or a typo that click will report
        else:
            return arg
    return None


def load_commands(argv: list[str] | None = None) -> typer.Typer:
    """Register the commands `argv` needs (all of them when argv is None) on `app`."""
    import importlib

    name = _command_name(argv) if argv is not None else None
    for module in [COMMAND_MODULES[name]] if name in COMMAND_MODULES else MODULES:
        importlib.import_module(f"{__package__}.{module}")
    return app
