#!/usr/bin/env bash
# Build TARN's plugin for Apache Knox 2.x: one jar for Knox's ext/ directory (URL manager for
# role TRITON from TARN's ZooKeeper znodes; authorization provider TarnAuthz).
#
# Usage: knox/tarn-knox-plugin/build.sh OUTDIR
# Produces:
#   OUTDIR/tarn-knox-plugin.jar                 copy it to <GATEWAY_HOME>/ext/ and restart Knox
#   OUTDIR/tarn-knox-plugin.jar.inputs.sha256   hash of pom.xml, build.sh and src/; when it matches
#                                               and the jar exists, nothing is done (idempotent).
# The JUnit tests run as part of the build. Maven's local repository (~/.m2) caches downloads.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: $0 OUTDIR}
mkdir -p "$out"; out=$(cd "$out" && pwd)

jar=$out/tarn-knox-plugin.jar
stamp=$jar.inputs.sha256
sum=$(cd "$here" && find pom.xml build.sh src -type f | LC_ALL=C sort | xargs cat | sha256sum | cut -d' ' -f1)

if [[ -f $jar && -f $stamp && $(cat "$stamp") == "$sum" ]]; then
  echo "up to date: $jar"; exit 0
fi

work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mvn -B -q -Dstyle.color=never -f "$here/pom.xml" -Dplugin.build.dir="$work" package

mv "$work/tarn-knox-plugin.jar" "$jar"
echo "$sum" > "$stamp"
echo "built $jar"
