#!/usr/bin/env bash
# Look for near-duplicates by meaning: among the live facts, and in ledger columns.
# Usage: near-dup-check.sh [facts] [LEDGER:COLUMN ...]   (default: facts)
# Exit 0 when there are none, 1 when there are (run-job then records an error
# episode with the pairs), 2 on an error: the highest of the scans.
set -euo pipefail

status=0
scan() {
  local rc=0
  memctl near-dup scan "$@" || rc=$?
  if [ "$rc" -gt "$status" ]; then
    status=$rc
  fi
}

if [ "$#" -eq 0 ]; then
  set -- facts
fi
for target in "$@"; do
  case "$target" in
    facts) scan --facts ;;
    *:*) scan --ledger "${target%%:*}" --column "${target#*:}" ;;
    *)
      echo "near-dup-check.sh: expected facts or LEDGER:COLUMN, got '$target'" >&2
      exit 2
      ;;
  esac
done
exit "$status"
