#!/usr/bin/env bash
# Assemble a runnable Apache Knox 2.0.0 gateway home from Knox's module jars on Maven Central
# (Knox publishes no distribution archive there), as Knox's own distribution lays it out.
#
# Usage: knox/gateway-dist/build.sh OUTDIR
# Produces:
#   OUTDIR/knox-2.0.0/           the gateway home: bin/gateway.jar (java -jar bin/gateway.jar),
#                                bin/knoxcli.jar, bin/ldap.jar (Knox's demo LDAP, conf/users.ldif:
#                                alice, bob), lib/ (org.apache.knox jars), dep/ (the rest), ext/,
#                                conf/ (gateway-site.xml, log4j2 configurations, topologies/),
#                                data/services/ (Knox's service definitions), logs/, pids/
#   OUTDIR/knox-2.0.0.tar.gz     the same home as a tarball (top directory knox-2.0.0/)
#   OUTDIR/knox-2.0.0.inputs.sha256  hash of pom.xml, build.sh and src/; when it matches and both
#                                exist, nothing is done (idempotent). A rebuild replaces the home:
#                                what a run put there (master secret, keystores, topologies) is lost.
# Maven's local repository (~/.m2) caches downloads. See knox/README.md for the JVM flags on JDK 17.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: $0 OUTDIR}
mkdir -p "$out"; out=$(cd "$out" && pwd)

name=knox-2.0.0
home=$out/$name
tarball=$out/$name.tar.gz
stamp=$out/$name.inputs.sha256
sum=$(cd "$here" && find pom.xml build.sh src -type f | LC_ALL=C sort | xargs cat | sha256sum | cut -d' ' -f1)

if [[ -d $home && -f $tarball && -f $stamp && $(cat "$stamp") == "$sum" ]]; then
  echo "up to date: $home"; exit 0
fi

# Maven's target directory goes to a scratch directory, not into the source tree.
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mvn -B -q -Dstyle.color=never -f "$here/pom.xml" -Ddist.build.dir="$work" package

rm -f "$stamp"
rm -rf "${home:?}" "$tarball"
mv "$work/home" "$home"
chmod 700 "$home/conf"   # the master secret and keystores land beside it at the first start
tar -C "$out" -czf "$tarball.tmp" "$name"
mv "$tarball.tmp" "$tarball"
echo "$sum" > "$stamp"
echo "built $home ($(du -sh "$home" | cut -f1)) and $tarball"
