#!/usr/bin/env bash
# Daily upkeep: regenerate the MEMORY.md index, commit the day's recall access
# log (appended without commits), then let doctor report every problem (broken
# facts or ledgers, a stale STATE.md, jobs that stopped succeeding). Doctor's
# exit 1 fails the job, so run-job records an error episode.
# Arguments go to `memctl doctor` (e.g. --strict).
set -euo pipefail

memctl index
# The access log's pending rows, into ledgers/access.tsv (made by its first commit): exit 3 is
# "no access ledger and nothing pending", which is no failure.
status=0
memctl ledger commit access || status=$?
if [ "$status" -ne 0 ] && [ "$status" -ne 3 ]; then
  exit "$status"
fi
memctl doctor "$@"
