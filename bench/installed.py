"""memctl as a user installs it, for the benchmarks that time whole commands.

    from installed import installed_venv
    venv = installed_venv()   # venv / "bin" / "memctl", venv / "bin" / "python"

`pip install '.[extras]'` (not editable) into a venv of its own, as `pipx install`
or `uv tool install` leave it: byte-compiled by pip, no editable finder and no
other project's `.pth` files run at every start. A checkout's development venv
(`pip install -e .`) pays for both at each interpreter start (18 ms for `python -c
pass` in the README's `.venv` against 8 ms in a venv of its own, on the machine
the README's numbers come from), which is not memctl's time.

The venv is kept under ~/.cache/memctl-bench (or $MEMCTL_BENCH_CACHE), named by a
digest of the source (memctl/ and pyproject.toml), so an unchanged tree installs
once. Packages come from the package index pip is configured with.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def source_digest() -> str:
    digest = hashlib.sha256()
    files = [REPO / "pyproject.toml", *sorted((REPO / "memctl").rglob("*.py"))]
    for path in files:
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def installed_venv(extras: str = "") -> Path:
    """The venv holding memctl from this checkout, installed (built and installed when missing)."""
    cache = Path(os.environ.get("MEMCTL_BENCH_CACHE", Path.home() / ".cache" / "memctl-bench"))
    venv = cache / f"venv-{source_digest()}{'-' + extras.replace(',', '-') if extras else ''}"
    if (venv / "ok").exists():
        return venv
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    print(f"installing memctl-memory{f'[{extras}]' if extras else ''} into {venv} (pip install, not editable) ...", file=sys.stderr)
    base = getattr(sys, "_base_executable", sys.executable)  # not this venv's python: a venv of its own
    subprocess.run([base, "-m", "venv", str(venv)], check=True)
    target = f"{REPO}[{extras}]" if extras else str(REPO)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", target],
                   check=True, env=env)
    (venv / "ok").write_text("installed\n")
    return venv
