"""The lazy command table in memctl/cli/__init__.py matches what the modules register."""

from __future__ import annotations

import subprocess
import sys

import typer.main

from memctl.cli.root import COMMAND_MODULES, MODULES, _command_name, load_commands


def test_command_table_matches_registered_commands():
    app = load_commands()
    registered = set(typer.main.get_command(app).commands)
    assert registered == set(COMMAND_MODULES)
    assert set(COMMAND_MODULES.values()) == set(MODULES)


def test_each_command_loads_from_its_module_alone():
    """`memctl CMD --help` works when only CMD's module is imported (the table is right per command)."""
    for name, module in sorted(COMMAND_MODULES.items()):
        code = (
            "import sys; from memctl.cli.root import load_commands, app; import typer.main;"
            f"load_commands([{name!r}]); cmds = typer.main.get_command(app).commands;"
            f"sys.exit(0 if {name!r} in cmds else 1)"
        )
        assert subprocess.run([sys.executable, "-c", code]).returncode == 0, f"{name} is not registered by memctl/cli/{module}.py"


def test_command_name_skips_root_option():
    assert _command_name(["--root", "/x", "ledger", "append"]) == "ledger"
    assert _command_name(["--root=/x", "list"]) == "list"
    assert _command_name(["--help"]) is None
    assert _command_name([]) is None


def _complete(words: str, cword: int) -> str:
    env = {**__import__("os").environ, "_MEMCTL_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
    script = __import__("pathlib").Path(sys.executable).parent / "memctl"  # the installed entry point, as a shell runs it
    done = subprocess.run([str(script)], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_shell_completion_sees_every_command_through_the_lazy_table():
    """`memctl --install-completion` installs Typer's completion; completing loads every command module."""
    assert _complete("memctl sched", 1).split() == ["schedule"]
    assert _complete("memctl schedule re", 2).split() == ["render"]
    assert _complete("memctl mai", 1).split() == ["maintain"]
    assert "--install-completion" in subprocess.run([sys.executable, "-m", "memctl", "--help"], capture_output=True, text=True).stdout
