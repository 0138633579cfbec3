#!/usr/bin/env bash
# One progress line per stage of `make lab` and `make test`: the stage, its time, the total so far.
# Each finished stage is also appended to build/stages.tsv (name, seconds, exit status), the
# measured source of docs/ci.md's budget table.
#
# Usage: lab/stage.sh NAME COMMAND [ARGS...]   (TARN_T0: when the whole run began, epoch seconds)
set -uo pipefail

name=$1; shift
began=$(date +%s)
t0=${TARN_T0:-$began}
echo "[tarn] ${name}: started at $(date +%T)"
"$@"
rc=$?
now=$(date +%s)
took=$((now - began)); total=$((now - t0))
outcome=$([[ $rc == 0 ]] && echo "done" || echo "FAILED (exit $rc)")
printf '[tarn] %s: %s in %dm%02ds (total %dm%02ds)\n' "$name" "$outcome" $((took / 60)) $((took % 60)) \
  $((total / 60)) $((total % 60))
mkdir -p build && printf '%s\t%d\t%d\n' "$name" "$took" "$rc" >> build/stages.tsv
exit $rc
