#!/usr/bin/env bash
# Daily upkeep: regenerate the MEMORY.md index, commit the day's recall access
# log (appended without commits), then let doctor report every problem (broken
# facts or ledgers, a stale STATE.md, jobs that stopped succeeding). Doctor's
# exit 1 fails the job, so run-job records an error episode.
# Arguments go to `memctl doctor` (e.g. --strict).
set -euo pipefail

memctl index
if memctl ledger list | cut -f1 | grep -qx access; then
  memctl ledger commit access
fi
memctl doctor "$@"
