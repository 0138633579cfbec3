#!/usr/bin/env bash
# Run an ansible-playbook command line and fail if any host reports a change: the second converge
# of a lab must change nothing (molecule's idempotence, for a converge outside molecule).
#
# Usage: lab/idempotent.sh ansible-playbook [ARGS...]
set -uo pipefail
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$@" | tee "$log"
status=${PIPESTATUS[0]}
(( status == 0 )) || exit "$status"
if changed=$(grep -E '^[^ ].* : ok=[0-9]+ +changed=[1-9]' "$log"); then
  echo "not idempotent: the second run changed something:" >&2
  echo "$changed" >&2
  grep -E '^changed: ' "$log" -B2 >&2
  exit 1
fi
