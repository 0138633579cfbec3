#!/usr/bin/env bash
# The secure lab's idempotence run, node checks and whole e2e suite as CI runs them: two pytest
# processes side by side on the one lab. Most of the suite's time is YARN's and the lab's waits
# (CI2: both cores 64 % busy), so two streams take about the time of the longer one.
#   - the edge stream: the files that need the edge's HAProxy path to themselves or count the
#     lab's GPUs (tests/e2e/conftest.py, EDGE_STREAM), chaos last; it starts at once;
#   - the cluster stream: the second converge that must change nothing (it must find what the
#     first left, before test_knox adds its own Knox topology), then the node checks and the
#     other files, test_tokens' long-lived service first.
# A test marked `alone` (a restart of ZooKeeper, the RM, a NodeManager) waits for the other
# stream's test under way and holds off its next one: both hold TARN_E2E_LOCK (conftest), the
# idempotence run too. The cluster stream's output follows the edge stream's.
#
# Usage: lab/e2e_streams.sh ANSIBLE_PLAYBOOK_ARGS...   (the converge's; lab/test_stages.sh's environment)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

stage=lab/stage.sh
lock=$(mktemp) && export TARN_E2E_LOCK=$lock
trap 'rm -f "$lock" "$lock.alone"' EXIT
ephemeral=$(mktemp -d) && ln -s "$PWD/inventories/lab" "$ephemeral/inventory"
pytest=(env MOLECULE_EPHEMERAL_DIRECTORY="$ephemeral" pytest -p no:cacheprovider -s --durations=25)
edge_junit=build/e2e-edge-junit.xml cluster_junit=build/e2e-cluster-junit.xml
rm -f "$edge_junit" "$cluster_junit"

{
  "$stage" "lab, Kerberos, Docker: idempotence" flock -s "$lock" lab/idempotent.sh ansible-playbook "$@" &&
    "$stage" "lab, Kerberos, Docker: node checks, e2e (cluster stream)" env TARN_E2E_STREAM=cluster "${pytest[@]}" --junitxml="$cluster_junit" \
      molecule/lab/tests/test_lab_nodes.py tests/e2e
} > build/e2e-cluster.log 2>&1 &
cluster=$!
"$stage" "lab, Kerberos, Docker: e2e (edge stream)" env TARN_E2E_STREAM=edge "${pytest[@]}" --junitxml="$edge_junit" tests/e2e
rc=$?
wait "$cluster" || rc=1
echo "---- idempotence, e2e cluster stream (its output, written beside the edge stream: build/e2e-cluster.log) ----"
cat build/e2e-cluster.log
for junit in "$edge_junit" "$cluster_junit"; do
  [[ -f $junit ]] && python lab/failures.py "$junit"
done
exit "$rc"
