#!/usr/bin/env bash
# make test's Molecule stages. The production scenario (one node, nothing started) runs beside the
# lab scenario's create, converge and idempotence: both spend most of their time on package
# installs in their nodes, so side by side they take little more than the lab alone. It must end
# before the lab's e2e tests start, which measure requests under load. Each step prints its
# stage line (lab/stage.sh); the production scenario's output follows once it has ended.
#
# Usage: lab/molecule_scenarios.sh   (from make test, with the Makefile's environment)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

stage=lab/stage.sh
production_log=build/molecule-production.log
mkdir -p build
rm -f build/e2e-junit.xml

"$stage" "molecule production (beside the lab's converge)" molecule test -s production \
  > "$production_log" 2>&1 &
production=$!

lab() { "$stage" "molecule lab: $1" molecule "$1" -s lab; }

rc=0
lab destroy && lab syntax && lab create && lab converge && lab idempotence || rc=1

wait "$production"
production_rc=$?
echo "---- molecule production (its output, written while the lab converged) ----"
cat "$production_log"
[[ $production_rc == 0 ]] || rc=1

if [[ $rc == 0 ]] && ! lab verify; then
  python lab/failures.py build/e2e-junit.xml
  rc=1
fi
lab destroy || rc=1
exit "$rc"
