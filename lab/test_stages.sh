#!/usr/bin/env bash
# make test's stages after unit. Two jobs run beside the lab scenario's destroy, create, converge
# and idempotence, which wait mostly on package installs and daemon starts inside the lab's nodes:
#   - sanity, then integration (loopback daemons on this machine; their own ports);
#   - the production scenario (one node of its own, nothing started).
# Both must end before the lab's e2e tests start: those measure requests under load, alone. Each
# step prints its stage line (lab/stage.sh); a side job's output follows once it has ended.
# The lab scenario runs with simple authentication (molecule/lab/molecule.yml); after its e2e suite
# the same nodes are converged again with Kerberos and the secure path's tests run (issue 33: the
# whole suite does not pass on the secure lab yet, docs/kerberos.md).
#
# Usage: lab/test_stages.sh   (from make test, with the Makefile's environment)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

stage=lab/stage.sh
mkdir -p build
rm -f build/e2e-junit.xml

side() {  # side NAME LOG COMMAND...: a job beside the lab's converge, its output in LOG
  local name=$1 log=$2; shift 2
  "$stage" "$name (beside the lab's converge)" "$@" > "$log" 2>&1
}

side "sanity, integration" build/checks.log \
  bash -c 'make --no-print-directory sanity && make --no-print-directory integration' &
checks=$!
side "molecule production" build/molecule-production.log molecule test -s production &
production=$!

lab() { "$stage" "molecule lab: $1" molecule "$1" -s lab; }

rc=0
lab destroy && lab syntax && lab create && lab converge && lab idempotence || rc=1

finish() {  # finish PID NAME LOG: wait for a side job, print its output, count its failure
  wait "$1" || rc=1
  echo "---- $2 (its output, written while the lab converged: $3) ----"
  cat "$3"
}
finish "$checks" "sanity, integration" build/checks.log
finish "$production" "molecule production" build/molecule-production.log

if [[ $rc == 0 ]] && ! lab verify; then
  python lab/failures.py build/e2e-junit.xml
  rc=1
fi
if [[ $rc == 0 ]]; then
  # The secure lab (issue 33): the same nodes converged with Kerberos (KDC, keytabs, HDFS on SASL
  # and HTTPS, ZooKeeper with SASL), its node checks, and the secure path's e2e tests.
  secure() { TARN_LAB_SECURE=true "$stage" "lab, Kerberos: $1" "${@:2}"; }
  ephemeral=$(mktemp -d) && ln -s "$PWD/inventories/lab" "$ephemeral/inventory"
  secure "site.yml" ansible-playbook -i inventories/lab/hosts.yml playbooks/site.yml &&
    secure "node checks, e2e" env MOLECULE_EPHEMERAL_DIRECTORY="$ephemeral" pytest -p no:cacheprovider -s \
      molecule/lab/tests/test_lab_nodes.py tests/e2e/test_haproxy.py tests/e2e/test_kerberos.py || rc=1
fi
lab destroy || rc=1
exit "$rc"
