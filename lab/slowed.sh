#!/usr/bin/env bash
# Run a command on a deliberately slowed machine: a CPU hog on one of the two cores, at the lab's
# own priority, for as long as the command runs (issue 51). The project's machines differ by a third
# in speed; a test that passes here does not lean on the spare core a fast machine happens to have.
#
# Usage: lab/slowed.sh COMMAND [ARGS...]     (TARN_SLOW_HOGS: how many cores to take, default 1)
#   make lab && lab/slowed.sh pytest -s tests/e2e        (what `make e2e-slowed` runs)
set -uo pipefail

hogs=()
stop_hogs() { ((${#hogs[@]})) && kill "${hogs[@]}" 2>/dev/null; wait "${hogs[@]}" 2>/dev/null; }
trap stop_hogs EXIT
cores=$(nproc)
for ((n = 0; n < ${TARN_SLOW_HOGS:-1}; n++)); do
  # pinned to the last cores: the scheduler moves everything else to what is left
  taskset -c $((cores - 1 - n)) python3 -c 'while True: pass' &
  hogs+=($!)
done
echo "[slowed] ${#hogs[@]} CPU hog(s) on ${cores} cores: pids ${hogs[*]}"
"$@"
