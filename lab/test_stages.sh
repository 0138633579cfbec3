#!/usr/bin/env bash
# make test's stages after unit. Two jobs run beside the lab scenario's destroy, create and converge:
#   - sanity, then integration (loopback daemons on this machine; their own ports);
#   - the production scenario (one node of its own, nothing started), then the lab's Triton image
#     (lab/triton_image.yml: built in a podman container here), which the secure converge loads.
# Sanity and integration must end before the secure lab's e2e tests start: those measure requests
# under load. A side job that fails stops the lab's stages at the next one (build/side-failed). The
# unit tests stay before all this: beside the lab's first converge (CI13) they took 6 minutes instead
# of 4 and the secure converge ended no earlier; the first half of CI is CPU-bound (docs/ci.md).
# Each step prints its stage line (lab/stage.sh); a side job's output follows once it has ended.
# The lab scenario runs with simple authentication and TARN's process runtime (molecule/lab/molecule.yml)
# and the e2e tests of that path (clusters without Kerberos or Docker); then the same nodes are
# converged as production runs (issues 33 and 34): Kerberos, and YARN's LinuxContainerExecutor with
# the Docker runtime on the workers; the whole e2e suite runs on that lab, in two streams beside a
# second converge that must change nothing (lab/e2e_streams.sh).
#
# Usage: lab/test_stages.sh   (from make test, with the Makefile's environment)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

stage=lab/stage.sh
mkdir -p build
rm -f build/e2e-junit.xml

failed_beside=build/side-failed
rm -f "$failed_beside"
side() {  # side NAME LOG COMMAND...: a job beside the lab's converge, its output in LOG
  local name=$1 log=$2; shift 2
  "$stage" "$name (beside the lab's converge)" "$@" > "$log" 2>&1 || { echo "$name" >> "$failed_beside"; return 1; }
}
beside_ok() {  # no side job has failed so far (one that fails ends CI's lab stages early)
  [[ ! -s $failed_beside ]] || { echo "[tarn] a side job failed: $(paste -sd, "$failed_beside"); the lab's stages stop"; return 1; }
}

side "sanity, integration" build/checks.log bash -c "$stage sanity make --no-print-directory sanity &&
  $stage integration make --no-print-directory integration" &
checks=$!
side "molecule production, Triton image" build/molecule-production.log bash -c "$stage production molecule test -s production &&
  TARN_LAB_DOCKER=true $stage 'Triton image' ansible-playbook -i inventories/lab/hosts.yml lab/triton_image.yml" &
production=$!

lab() { "$stage" "molecule lab: $1" molecule "$1" -s lab; }

rc=0
# Idempotence is checked once, on the secure converge below (the production mode, where most
# tasks run): a second converge of each mode would add three minutes to CI.
lab destroy && lab syntax && lab create && beside_ok && lab converge || rc=1

finish() {  # finish PID NAME LOG: wait for a side job, print its output, count its failure
  wait "$1" || rc=1
  echo "---- $2 (its output, written beside the lab's stages: $3) ----"
  cat "$3"
}

# The simple path's checks, beside the side jobs' ends: test_haproxy holds its bounds on a busy
# machine (issue 51's slowed runs).
if [[ $rc == 0 ]] && beside_ok && ! lab verify; then
  python lab/failures.py build/e2e-junit.xml
  rc=1
fi
secure() { TARN_LAB_SECURE=true TARN_LAB_DOCKER=true "$@"; }
site=(-i inventories/lab/hosts.yml lab/site.yml)
# The secure converge loads the Triton image the production job builds last.
finish "$production" "molecule production, Triton image" build/molecule-production.log
if [[ $rc == 0 ]] && beside_ok; then
  # The lab as production runs it (`make lab`'s default): the same nodes converged with Kerberos
  # (KDC, keytabs, HDFS on SASL and HTTPS, ZooKeeper with SASL, Knox with SPNEGO; issue 33) and
  # YARN's LinuxContainerExecutor with the Docker runtime (the lab's container-executor stand-in,
  # a Docker engine per worker; issue 34); then a second converge that must change nothing, the
  # node checks and the whole e2e suite, chaos included, side by side (lab/e2e_streams.sh), once
  # sanity and integration have ended: the e2e tests measure requests under load.
  secure "$stage" "lab, Kerberos, Docker: site.yml" ansible-playbook "${site[@]}" || rc=1
fi
finish "$checks" "sanity, integration" build/checks.log
if [[ $rc == 0 ]] && ! secure lab/e2e_streams.sh "${site[@]}"; then
  rc=1
fi
lab destroy || rc=1
exit "$rc"
