#!/usr/bin/env bash
# Smoke test of TARN's Knox pieces on loopback, no containers: the assembled Knox 2.0.0 gateway
# (gateway-dist) with tarn-knox-plugin in ext/ and the TRITON service definition, Knox's demo
# LDAP (alice, bob), a ZooKeeper (from Knox's own dep/ jars), fake Triton backends registered by
# TARN's own registry code (src/tarn/controller/registry.py), and a stand-in for TARN's
# /authorize (alice may infer and read add_one; nothing else is allowed). Then curl over HTTPS.
#
# Usage: knox/smoke.sh [BUILDDIR]   (default build/knox; builds what is missing there)
# Keeps its scratch directory (logs) when it fails, or with KEEP=1.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
build=${1:-$repo/build/knox}
py=${PYTHON:-$repo/.venv/bin/python}
[[ -x $py ]] || py=python3

"$here/gateway-dist/build.sh" "$build"
"$here/tarn-knox-plugin/build.sh" "$build"

work=$(mktemp -d /tmp/tarn-knox-smoke.XXXXXX)
pids=()
ok=0
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [[ $ok == 1 && ${KEEP:-0} != 1 ]]; then rm -rf "$work"; else echo "scratch kept: $work"; fi
}
trap cleanup EXIT

# The JVM flags Knox 2.1 adds on JDK 17 (bin/knox-functions.sh); Knox 2.0.0 needs them too.
JDK17_FLAGS=(
  --add-exports java.base/sun.security.x509=ALL-UNNAMED
  --add-exports java.base/sun.security.pkcs=ALL-UNNAMED
  --add-exports java.naming/com.sun.jndi.ldap=ALL-UNNAMED
  --add-opens java.base/sun.security.util=ALL-UNNAMED
  --add-exports java.base/jdk.internal.misc=ALL-UNNAMED
  --add-opens java.base/java.lang=ALL-UNNAMED
  --add-exports java.base/sun.net.util=ALL-UNNAMED
  --add-exports java.base/sun.net.dns=ALL-UNNAMED
)
[[ -n ${KNOX_JAVA_FLAGS+x} ]] && read -r -a JDK17_FLAGS <<< "$KNOX_JAVA_FLAGS"

port() { "$py" "$here/smoke_helpers.py" freeport; }
step() { echo "== $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

home=$work/knox
cp -a "$build/knox-2.0.0" "$home"
zk_port=$(port); ldap_port=$(port); gw_port=$(port); authz_port=$(port); t1_port=$(port); t2_port=$(port)
secret=smoke-master-$RANDOM$RANDOM
token=smoke-token-$RANDOM$RANDOM
echo "$token" > "$work/tarn.token"; chmod 600 "$work/tarn.token"

step "ZooKeeper on 127.0.0.1:$zk_port"
# Debian's zookeeper package (the one roles/zookeeper installs); Knox's dep/ lacks snappy-java,
# which a ZooKeeper server needs for its snapshots.
zk_cp=${ZOOKEEPER_CLASSPATH:-/usr/share/java/zookeeper.jar}
[[ -f ${zk_cp%%:*} ]] || fail "no ZooKeeper at $zk_cp: apt-get install zookeeper, or set ZOOKEEPER_CLASSPATH"
mkdir -p "$work/zk"
java -Dzookeeper.admin.enableServer=false -cp "$zk_cp" \
  org.apache.zookeeper.server.ZooKeeperServerMain "$zk_port" "$work/zk" > "$work/zk.log" 2>&1 &
pids+=($!)

step "Knox demo LDAP on 127.0.0.1:$ldap_port (alice, bob)"
(cd "$home" && exec java "${JDK17_FLAGS[@]}" -Dldap.port="$ldap_port" -jar bin/ldap.jar conf > "$work/ldap.out" 2>&1) &
pids+=($!)

step "fake Triton backends t1 :$t1_port, t2 :$t2_port; /authorize stand-in :$authz_port"
"$py" "$here/smoke_helpers.py" triton "$t1_port" t1 "$work/backends.log" & t1_pid=$!; pids+=("$t1_pid")
"$py" "$here/smoke_helpers.py" triton "$t2_port" t2 "$work/backends.log" & pids+=($!)
"$py" "$here/smoke_helpers.py" authorize "$authz_port" "$work/tarn.token" "$work/authorize.log" & authz_pid=$!; pids+=("$authz_pid")

step "Knox master secret, TLS keystore, TARN token alias, plugin, TRITON service definition"
cd "$home"
java "${JDK17_FLAGS[@]}" -jar bin/knoxcli.jar create-master --master "$secret" --force > "$work/knoxcli.out" 2>&1 \
  || { cat "$work/knoxcli.out"; fail "knoxcli create-master"; }
mkdir -p data/security/keystores
keytool -genkeypair -noprompt -alias gateway-identity -keyalg RSA -keysize 2048 -validity 30 \
  -dname "CN=localhost, OU=TARN smoke" -ext "SAN=dns:localhost,ip:127.0.0.1" \
  -keystore data/security/keystores/gateway.jks -storetype JKS \
  -storepass "$secret" -keypass "$secret" 2> "$work/keytool.out"
keytool -exportcert -rfc -alias gateway-identity -keystore data/security/keystores/gateway.jks \
  -storepass "$secret" > "$work/gateway.pem" 2>> "$work/keytool.out"
java "${JDK17_FLAGS[@]}" -jar bin/knoxcli.jar create-alias tarn.api.token --value "$token" >> "$work/knoxcli.out" 2>&1 \
  || { cat "$work/knoxcli.out"; fail "knoxcli create-alias"; }
cp "$build/tarn-knox-plugin.jar" ext/
mkdir -p data/services/triton
cp -r "$here/services/triton/1.0.0" data/services/triton/
sed -i "s|<name>gateway.port</name><value>8443</value>|<name>gateway.port</name><value>$gw_port</value>|" conf/gateway-site.xml
grep -q "<value>$gw_port</value>" conf/gateway-site.xml || fail "gateway.port not set"

# The seeds' topology shape (ShiroProvider, HaProvider with TRITON on ZooKeeper, a TRITON service
# without URL), with the default identity assertion, TARN's authorization provider and
# enableLoadBalancing=true (Knox's HA otherwise sends everything to one instance).
cat > conf/topologies/tarn.xml <<XML
<topology>
  <gateway>
    <provider>
      <role>authentication</role><name>ShiroProvider</name><enabled>true</enabled>
      <param><name>sessionTimeout</name><value>30</value></param>
      <param><name>main.ldapRealm</name><value>org.apache.knox.gateway.shirorealm.KnoxLdapRealm</value></param>
      <param><name>main.ldapContextFactory</name><value>org.apache.knox.gateway.shirorealm.KnoxLdapContextFactory</value></param>
      <param><name>main.ldapRealm.contextFactory</name><value>\$ldapContextFactory</value></param>
      <param><name>main.ldapRealm.userDnTemplate</name><value>uid={0},ou=people,dc=hadoop,dc=apache,dc=org</value></param>
      <param><name>main.ldapRealm.contextFactory.url</name><value>ldap://127.0.0.1:$ldap_port</value></param>
      <param><name>main.ldapRealm.contextFactory.authenticationMechanism</name><value>simple</value></param>
      <param><name>main.cacheManager</name><value>org.apache.knox.gateway.shirorealm.KnoxCacheManager</value></param>
      <param><name>main.securityManager.cacheManager</name><value>\$cacheManager</value></param>
      <param><name>main.ldapRealm.authenticationCachingEnabled</name><value>true</value></param>
      <param><name>urls./**</name><value>authcBasic</value></param>
    </provider>
    <provider><role>identity-assertion</role><name>Default</name><enabled>true</enabled></provider>
    <provider>
      <role>authorization</role><name>TarnAuthz</name><enabled>true</enabled>
      <param><name>tarn.authorize.url</name><value>http://127.0.0.1:$authz_port/authorize</value></param>
      <param><name>tarn.token.alias</name><value>tarn.api.token</value></param>
      <param><name>tarn.cache.ttl.ms</name><value>1000</value></param>
    </provider>
    <provider>
      <role>ha</role><name>HaProvider</name><enabled>true</enabled>
      <param><name>TRITON</name><value>enabled=true;maxFailoverAttempts=3;failoverSleep=1000;enableLoadBalancing=true;zookeeperEnsemble=127.0.0.1:$zk_port;zookeeperNamespace=/services/triton</value></param>
    </provider>
  </gateway>
  <service><role>TRITON</role></service>
</topology>
XML

# The same without HA: TRITON at the topology's <url> (t2), as an operator may write it by hand.
"$py" - conf/topologies/tarn.xml "$t2_port" > conf/topologies/tarn-direct.xml <<'PY'
import re, sys
xml = re.sub(r"\s*<provider>\s*<role>ha</role>.*?</provider>", "", open(sys.argv[1]).read(), flags=re.S)
print(xml.replace("<role>TRITON</role>", f"<role>TRITON</role><url>http://127.0.0.1:{sys.argv[2]}</url>"), end="")
PY
grep -q '<role>ha</role>' conf/topologies/tarn-direct.xml && fail "tarn-direct still has the HA provider"

step "TARN registers t1 in ZooKeeper (its own registry code)"
for _ in $(seq 50); do (echo ruok | timeout 1 bash -c "cat > /dev/tcp/127.0.0.1/$zk_port") 2>/dev/null && break; sleep 0.2; done
PYTHONPATH=$repo/src "$py" "$here/smoke_helpers.py" register "127.0.0.1:$zk_port" /services/triton/instances \
  tarn-smoke container_1763712000000_0001_01 "$t1_port" > "$work/register1.out" 2>&1 & pids+=($!)
for _ in $(seq 50); do grep -q registered "$work/register1.out" && break; sleep 0.2; done
grep -q registered "$work/register1.out" || { cat "$work/register1.out"; fail "registration"; }

step "Knox gateway on https://127.0.0.1:$gw_port (JVM flags: ${JDK17_FLAGS[*]:-none})"
java "${JDK17_FLAGS[@]}" -jar bin/gateway.jar > "$work/gateway.out" 2>&1 &
gw_pid=$!; pids+=("$gw_pid")
base=https://127.0.0.1:$gw_port/gateway/tarn/triton
c() { curl -sS --cacert "$work/gateway.pem" --max-time 30 "$@"; }
code() { c -o "$work/body" -w '%{http_code}' "$@"; }
for i in $(seq 120); do
  kill -0 "$gw_pid" 2>/dev/null || { tail -50 "$work/gateway.out"; fail "gateway exited"; }
  [[ $(code -u alice:alice-password "$base/v2/health/ready" 2>/dev/null || true) == 200 ]] && break
  sleep 1
done
echo "   up after ${i}s"

infer='{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[4],"data":[1,2,3,4]}]}'
check() { # NAME EXPECTED_CODE curl-args...
  local name=$1 want=$2; shift 2
  local got; got=$(code "$@" || true)
  printf '   %-58s %s\n' "$name" "$got"
  [[ $got == "$want" ]] || { cat "$work/body" >&2; echo; tail -30 "$home/logs/gateway.log" >&2; fail "$name: $got, expected $want"; }
}

step "requests"
check "alice GET /v2/health/ready" 200 -u alice:alice-password "$base/v2/health/ready"
check "alice POST /v2/models/add_one/infer" 200 -u alice:alice-password -H 'Content-Type: application/json' -d "$infer" "$base/v2/models/add_one/infer"
# As the backend wrote it (json.dumps' spaces): the TRITON service passes answers unparsed.
grep -q '"data": \[2, 3, 4, 5\]' "$work/body" || { cat "$work/body"; fail "infer answer"; }
check "alice GET /v2/models/add_one (allowed; the fake has none)" 404 -u alice:alice-password "$base/v2/models/add_one"
check "no credentials: 401" 401 "$base/v2/models/add_one/infer" -d "$infer"
check "alice, wrong password: 401" 401 -u alice:nope "$base/v2/health/ready"
check "bob POST add_one/infer (denied by TARN): 403" 403 -u bob:bob-password -H 'Content-Type: application/json' -d "$infer" "$base/v2/models/add_one/infer"
check "alice POST secret_model/infer (denied by TARN): 403" 403 -u alice:alice-password -H 'Content-Type: application/json' -d "$infer" "$base/v2/models/secret_model/infer"
check "bob GET /v2/health/ready (server-level): 200" 200 -u bob:bob-password "$base/v2/health/ready"
check "alice POST /v2/repository/index (list *, denied): 403" 403 -u alice:alice-password -X POST "$base/v2/repository/index"
check "alice POST repository/models/add_one/load: 403" 403 -u alice:alice-password -X POST "$base/v2/repository/models/add_one/load"
check "alice GET /triton/metrics (not routed): 404" 404 -u alice:alice-password "https://127.0.0.1:$gw_port/gateway/tarn/triton/metrics"
# binary tensor extension: JSON header + raw bytes, Inference-Header-Content-Length; echoed back
head='{"inputs":[{"name":"INPUT0","datatype":"UINT8","shape":[65536],"parameters":{"binary_data_size":65536}}]}'
{ printf '%s' "$head"; head -c 65536 /dev/urandom; } > "$work/binary.req"
check "alice binary tensor body to add_one/infer" 200 -u alice:alice-password -D "$work/headers" \
  -H 'Content-Type: application/octet-stream' -H "Inference-Header-Content-Length: ${#head}" \
  --data-binary "@$work/binary.req" "$base/v2/models/add_one/infer"
cmp -s "$work/binary.req" "$work/body" || fail "binary body changed on the way"
grep -qi "^X-Request-Content-Length: $(stat -c %s "$work/binary.req")" "$work/headers" || fail "Content-Length not kept"
grep -qi "^Inference-Header-Content-Length: ${#head}" "$work/headers" || fail "Inference-Header-Content-Length not returned"
echo "   $(stat -c %s "$work/binary.req") bytes both ways unchanged, Content-Length and Inference-Header-Content-Length kept"

step "what the backend saw"
tail -1 "$work/backends.log"
if grep -q '"authorization": "Basic' "$work/backends.log"; then fail "the client's Authorization reached Triton"; fi
grep -q 'user.name=alice\|doAs=alice' "$work/backends.log" && echo "   identity assertion: user.name=/doAs= alice on the backend URL"
grep -q '"token_ok": false' "$work/authorize.log" && fail "Knox sent a wrong token to /authorize"
echo "   /authorize asked $(wc -l < "$work/authorize.log") time(s), always with the token"
grep -q "$token" "$home/logs/"*.log "$work/gateway.out" && fail "the token appears in Knox's logs"

step "a topology without HA (tarn-direct): the dispatch goes to its <url>"
check "alice POST add_one/infer through tarn-direct" 200 -u alice:alice-password -D "$work/headers" \
  -H 'Content-Type: application/json' -d "$infer" "https://127.0.0.1:$gw_port/gateway/tarn-direct/triton/v2/models/add_one/infer?x=1"
grep -qi '^X-Fake-Triton: t2' "$work/headers" || fail "tarn-direct did not go to its <url> (t2)"
tail -1 "$work/backends.log" | grep -q '"path": "/v2/models/add_one/infer?x=1&user.name=alice"' \
  || { tail -1 "$work/backends.log"; fail "tarn-direct: path or query changed on the way"; }
echo "   t2 got /v2/models/add_one/infer?x=1&user.name=alice"

step "a second instance registered in ZooKeeper serves within 1 s (load balancing)"
PYTHONPATH=$repo/src "$py" "$here/smoke_helpers.py" register "127.0.0.1:$zk_port" /services/triton/instances \
  tarn-smoke-2 container_1763712000000_0002_01 "$t2_port" > "$work/register2.out" 2>&1 & pids+=($!)
for _ in $(seq 50); do grep -q registered "$work/register2.out" && break; sleep 0.1; done
sleep 1
seen=""
for _ in 1 2 3 4; do
  c -o /dev/null -u alice:alice-password -H 'Content-Type: application/json' -d "$infer" -D "$work/headers" "$base/v2/models/add_one/infer"
  seen="$seen $(grep -i '^X-Fake-Triton' "$work/headers" | tr -d '\r' | cut -d' ' -f2)"
done
echo "   backends of 4 requests from 1 s after registration:$seen"
[[ $seen == *t2* && $seen == *t1* ]] || fail "t2 not served (or t1 not any more)"

step "t1 dies: Knox fails over to t2 (a connection error is an IOException: retried on the next instance)"
kill "$t1_pid"
sleep 0.5
for i in 1 2 3; do
  check "alice infer with t1 down ($i)" 200 -u alice:alice-password -H 'Content-Type: application/json' -d "$infer" "$base/v2/models/add_one/infer"
done

step "TARN's /authorize unreachable: its last answers reused (tarn.cache.stale.ms), anything never answered fails closed"
kill "$authz_pid"; sleep 1.2   # the 1 s cache has expired
check "alice infer add_one, /authorize down (answered before): 200" 200 -u alice:alice-password -H 'Content-Type: application/json' -d "$infer" "$base/v2/models/add_one/infer"
check "bob infer add_one, /authorize down (denied before): 403" 403 -u bob:bob-password -H 'Content-Type: application/json' -d "$infer" "$base/v2/models/add_one/infer"
check "bob GET add_one, /authorize down (never asked): 503" 503 -u bob:bob-password "$base/v2/models/add_one"
check "alice /v2/health/ready, /authorize down (server-level): 200" 200 -u alice:alice-password "$base/v2/health/ready"

ok=1
echo "SMOKE OK"
