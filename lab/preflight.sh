#!/usr/bin/env bash
# Check that every program `make lab` and `make test` call on this machine is here, and name the
# Debian package of each one that is not. apt installs no Recommends on these machines, so a
# program a package only recommends (netavark needs iptables) is missing until it is named.
#
# Usage: lab/preflight.sh            exit 1, listing "command (package)" for each one missing
#        lab/preflight.sh --packages the packages of the table: the Makefile's apt list
set -euo pipefail

# command, absolute path or shared library (lib*.so.N, found by ldconfig)  Debian package  who calls it
checks=(
  "podman                      podman           lab/nodes.yml, lab/image, the e2e and chaos tests"
  "runc                        runc             podman's OCI runtime (lab/containers.conf)"
  "/usr/lib/podman/netavark    netavark         podman's network backend (the lab network)"
  "iptables                    iptables         netavark's firewall rules"
  "/usr/lib/podman/aardvark-dns aardvark-dns    podman's DNS (node names on the lab network)"
  "fuse-overlayfs              fuse-overlayfs   podman's storage (lab/containers.conf)"
  "debootstrap                 debootstrap      lab/image/build.sh"
  "rsync                       rsync            make sanity"
  "git                         git              make sanity (ansible-test)"
  "shellcheck                  shellcheck       ansible-lint, make lint"
  "chromium                    chromium         the dashboard test in headless Chromium"
  "haproxy                     haproxy          tests/integration (a real HAProxy)"
  "/usr/share/java/zookeeper.jar zookeeper      tests/integration (a real ZooKeeper)"
  "socat                       socat            tests/integration (the haproxy role's state saver)"
  "ip                          iproute2         tests/integration (network namespaces)"
  "unshare                     util-linux       tests/integration (network namespaces)"
  "nsenter                     util-linux       tests/integration (network namespaces)"
  "taskset                     util-linux       lab/slowed.sh (a CPU hog on one core: make e2e-slowed)"
  "java                        openjdk-17-jdk-headless  Hadoop, ZooKeeper, the JCEKS tests"
  "keytool                     openjdk-17-jdk-headless  tests/unit/stdlib/test_jceks.py (real keystores)"
  "mvn                         maven            lab/hadoop-dist/build.sh, lab/ranger-harness, knox/"
  "curl                        curl             knox/smoke.sh (HTTPS through Knox), the SPNEGO test's cross-check"
  "libgssapi_krb5.so.2         libgssapi-krb5-2 tarn.stdlib.kerberos (SPNEGO through ctypes), the SPNEGO test"
  "krb5kdc                     krb5-kdc         tests/integration/test_kerberos_spnego.py (a real MIT KDC)"
  "kdb5_util                   krb5-kdc         tests/integration/test_kerberos_spnego.py (the KDC's database)"
  "kadmin.local                krb5-admin-server tests/integration/test_kerberos_spnego.py (principals, keytabs)"
  "kinit                       krb5-user        tests/integration/test_kerberos_spnego.py (a ticket cache)"
  "klist                       krb5-user        tests/integration/test_kerberos_spnego.py (a keytab's principals)"
  "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 libfaketime tests/e2e/test_kerberos.py (a clock minutes off)"
  "wrk                         wrk              bench/entry_overhead.py (the C load generator)"
  "nfs-ls                      libnfs-utils     tests/e2e/test_nfs_gateway.py (userspace NFSv3 client)"
  "nfs-cat                     libnfs-utils     tests/e2e/test_nfs_gateway.py (userspace NFSv3 client)"
  "python3                     python3-venv     make deps (python3 -m venv)"
  "tar                         tar              lab/image, lab/hadoop-dist"
)

if [[ ${1:-} == --packages ]]; then
  for row in "${checks[@]}"; do read -r _ package _ <<<"$row"; echo "$package"; done | sort -u
  exit 0
fi

missing=()
for row in "${checks[@]}"; do
  read -r what package why <<<"$row"
  if [[ $what == /* ]]; then [[ -e $what ]] && continue
  elif [[ $what == lib*.so.* ]]; then /sbin/ldconfig -p | awk -v lib="$what" '$1 == lib {f = 1} END {exit !f}' && continue
  else command -v "$what" >/dev/null && continue
  fi
  missing+=("$what (apt package $package; used by $why)")
done
if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  missing+=("python3 -m venv (apt package python3-venv; used by make deps)")
fi

if ((${#missing[@]})); then
  echo "preflight: missing on this machine:" >&2
  printf '  %s\n' "${missing[@]}" >&2
  echo "install them (apt-get install <package>), or add the package to APT_PACKAGES in the Makefile" >&2
  exit 1
fi
echo "preflight: every program make lab and make test call is here"
