#!/usr/bin/env bash
# Regenerate state/STATE.md from the [state] summaries in memctl.toml and commit it.
# What the `state-update` job runs (memctl run-job state-update). Arguments go to
# `memctl state update`: --name SCOPE, --from-json FILE (numbers from a task tracker), --note TEXT.
# Numbers can also come from a file named by MEMCTL_STATE_JSON.
set -euo pipefail

json=()
if [ -n "${MEMCTL_STATE_JSON:-}" ]; then
  json=(--from-json "$MEMCTL_STATE_JSON")
fi
# ${a[@]+...}: an empty array under `set -u` on macOS's bash 3.2.
exec memctl state update ${json[@]+"${json[@]}"} "$@"
