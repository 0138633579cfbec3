#!/usr/bin/env bash
# Build Apache Ranger's policy engine harness (the reference for the Ranger conformance test) and
# its plugin probe (a real RangerBasePlugin downloading from a Ranger Admin, for
# tests/integration/test_ranger_java_plugin.py).
#
# Usage: lab/ranger-harness/build.sh OUTDIR
# Produces:
#   OUTDIR/ranger-harness.jar         main class tarn.lab.ranger.RangerHarness; its manifest
#                                     names the jars in lib/ (run: java -jar OUTDIR/ranger-harness.jar);
#                                     also tarn.lab.ranger.PluginProbe (run: java -cp
#                                     CONF_DIR:OUTDIR/ranger-harness.jar tarn.lab.ranger.PluginProbe APP_ID)
#   OUTDIR/lib/*.jar                  ranger-plugins-common and what it needs (exclusions in pom.xml)
#   OUTDIR/ranger-harness.jar.inputs.sha256  hash of pom.xml, build.sh and src/; when it matches
#                                     and the jar exists, nothing is done (idempotent).
# The JUnit test runs as part of the build. Maven's local repository (~/.m2) caches downloads.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: $0 OUTDIR}
mkdir -p "$out"; out=$(cd "$out" && pwd)

jar=$out/ranger-harness.jar
stamp=$jar.inputs.sha256
sum=$(cd "$here" && find pom.xml build.sh src -type f | LC_ALL=C sort | xargs cat | sha256sum | cut -d' ' -f1)

if [[ -f $jar && -f $stamp && $(cat "$stamp") == "$sum" ]]; then
  echo "up to date: $jar"; exit 0
fi

# Maven's target directory goes to a scratch directory, not into the source tree.
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mvn -B -q -Dstyle.color=never -f "$here/pom.xml" -Dharness.build.dir="$work" package

rm -rf "${out:?}/lib"
mv "$work/lib" "$out/lib"
mv "$work/ranger-harness.jar" "$jar"
echo "$sum" > "$stamp"
echo "built $jar (+ lib/: $(du -sh "$out/lib" | cut -f1))"
