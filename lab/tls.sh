#!/usr/bin/env bash
# The lab's TLS material for HDFS's HTTPS endpoints (a secure lab): a CA, one PKCS12 keystore per
# node whose certificate the CA signed for the node's name, and a truststore holding the CA.
# Production sites bring their own (the hadoop role's hadoop_tls_* variables).
#
# Usage: TARN_TLS_PASSWORD=... lab/tls.sh DIR NODE...   (skips what DIR already has)
set -euo pipefail
dir=$1
shift
: "${TARN_TLS_PASSWORD:?set TARN_TLS_PASSWORD (lab/nodes.yml gives it from build/lab-secrets)}"
mkdir -p "$dir"
cd "$dir"
pass=(-storepass "$TARN_TLS_PASSWORD" -keypass "$TARN_TLS_PASSWORD")

if [[ ! -f ca.p12 ]]; then
  keytool -genkeypair -alias ca -keyalg RSA -keysize 2048 -validity 3650 -dname "CN=TARN lab CA" \
    -ext bc:c -keystore ca.p12 -storetype pkcs12 "${pass[@]}" 2>/dev/null
  keytool -exportcert -rfc -alias ca -keystore ca.p12 -storepass "$TARN_TLS_PASSWORD" >ca.pem
  rm -f truststore.p12
fi
if [[ ! -f truststore.p12 ]]; then
  keytool -importcert -noprompt -alias ca -file ca.pem -keystore truststore.p12 -storetype pkcs12 \
    -storepass "$TARN_TLS_PASSWORD" >/dev/null 2>&1
fi
for node in "$@"; do
  [[ -f $node.p12 ]] && continue
  keytool -genkeypair -alias "$node" -keyalg RSA -keysize 2048 -validity 3650 -dname "CN=$node" \
    -keystore "$node.tmp.p12" -storetype pkcs12 "${pass[@]}" 2>/dev/null
  keytool -certreq -alias "$node" -keystore "$node.tmp.p12" -storepass "$TARN_TLS_PASSWORD" |
    keytool -gencert -alias ca -keystore ca.p12 -storepass "$TARN_TLS_PASSWORD" -validity 3650 -rfc \
      -ext "SAN=dns:$node,dns:localhost" -ext ku:c=digitalSignature,keyEncipherment -ext eku=serverAuth,clientAuth \
      >"$node.pem"
  keytool -importcert -noprompt -alias ca -file ca.pem -keystore "$node.tmp.p12" -storepass "$TARN_TLS_PASSWORD" >/dev/null 2>&1
  keytool -importcert -alias "$node" -file "$node.pem" -keystore "$node.tmp.p12" -storepass "$TARN_TLS_PASSWORD" >/dev/null 2>&1
  mv "$node.tmp.p12" "$node.p12"
done
