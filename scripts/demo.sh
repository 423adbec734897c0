#!/usr/bin/env bash
# Install memctl into ./.venv and run the real workflow on a throwaway copy of
# the bundled example store (memory/, ledgers/, state/). Nothing in this
# repository is changed. Usage: bash scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/pip install -q --disable-pip-version-check -e ".[e5,mcp,import]" 2>&1 | grep -v "^WARNING: Location" >&2 || true
.venv/bin/python -c "import memctl" || { echo "demo: memctl failed to install" >&2; exit 1; }
exec "$repo/scripts/demo_workflow.sh" "$repo/.venv/bin/memctl"
