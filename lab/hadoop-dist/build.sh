#!/usr/bin/env bash
# Assemble an Apache Hadoop runtime from Maven Central jars (no compiling).
#
# Usage: lab/hadoop-dist/build.sh OUTDIR
# Produces:
#   OUTDIR/hadoop-<ver>.tar.gz              top dir hadoop-<ver>/:
#       share/hadoop/common/lib/*.jar       ALL jars (hadoop-* and third-party), one dir,
#                                           incl. hadoop-hdfs-webapps-<ver>.jar (NN/DN web UI)
#       etc/hadoop/log4j.properties         console logging (hadoop.root.logger)
#       VERSION                             e.g. "3.4.2"
#   OUTDIR/hadoop-<ver>.tar.gz.inputs.sha256  hash of pom.xml + build.sh; when it
#       matches and both archives exist, nothing is done (idempotent).
# Maven's local repository (~/.m2) caches downloads.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: $0 OUTDIR}
mkdir -p "$out"; out=$(cd "$out" && pwd)

ver=$(sed -n 's:.*<hadoop.version>\(.*\)</hadoop.version>.*:\1:p' "$here/pom.xml")
dist=$out/hadoop-$ver.tar.gz
stamp=$dist.inputs.sha256
sum=$(cat "$here/pom.xml" "$here/build.sh" | sha256sum | cut -d' ' -f1)

# Skip when the archive was built from the same inputs.
if [[ -f $dist && -f $stamp && $(cat "$stamp") == "$sum" ]]; then
  echo "up to date: $dist"; exit 0
fi

work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
top=$work/hadoop-$ver
lib=$top/share/hadoop/common/lib
mkdir -p "$lib" "$top/etc/hadoop"

# Resolve and copy the runtime jars (exclusions live in pom.xml).
mvn -B -q -Dstyle.color=never -f "$here/pom.xml" dependency:copy-dependencies -DoutputDirectory="$lib"

# The hadoop-hdfs jar on Maven Central lacks the NameNode/DataNode web apps
# (webapps/hdfs, datanode, secondary, journal, nfs3, static: share/hadoop/hdfs/webapps
# in the Apache tarball); HttpServer2 refuses to start without them. Only the
# hadoop-hdfs *tests* jar carries them: repack just webapps/ into a small jar
# so that the classpath stays the single glob share/hadoop/common/lib/*.
mvn -B -q -Dstyle.color=never -f "$here/pom.xml" dependency:copy \
  -Dartifact="org.apache.hadoop:hadoop-hdfs:$ver:jar:tests" -DoutputDirectory="$work/t"
unzip -q "$work/t/hadoop-hdfs-$ver-tests.jar" 'webapps/*' -d "$work/w"
jar --create --file "$lib/hadoop-hdfs-webapps-$ver.jar" -C "$work/w" webapps

echo "$ver" > "$top/VERSION"
cat > "$top/etc/hadoop/log4j.properties" <<'EOF'
# Minimal log4j (reload4j) config: everything to stderr; override the level/appender
# with -Dhadoop.root.logger=LEVEL,console
hadoop.root.logger=INFO,console
log4j.rootLogger=${hadoop.root.logger}
log4j.appender.console=org.apache.log4j.ConsoleAppender
log4j.appender.console.target=System.err
log4j.appender.console.layout=org.apache.log4j.PatternLayout
log4j.appender.console.layout.ConversionPattern=%d{ISO8601} %p %c{2}: %m%n
EOF

# Deterministic-ish archives: sorted names, fixed owner.
tar_opts=(--sort=name --owner=0 --group=0 --numeric-owner)
tar "${tar_opts[@]}" -czf "$work/dist.tgz" -C "$work" "hadoop-$ver"

mv "$work/dist.tgz" "$dist"
echo "$sum" > "$stamp"
echo "built $dist ($(du -h "$dist" | cut -f1))"
