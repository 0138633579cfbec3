#!/usr/bin/env bash
# Build the lab node image: Debian 12 + systemd + python3 + Java 17, made with debootstrap
# and imported into podman. The tag carries a hash of this recipe, so the image is rebuilt
# only when the recipe changes.
set -euo pipefail

name=${TARN_NODE_IMAGE:-localhost/tarn-node}
packages=python3,python3-apt,systemd,systemd-sysv,dbus,iproute2,procps,curl,sudo,ca-certificates,openjdk-17-jre-headless
recipe=$(printf '%s\n%s\n' "$packages" "$(sed -n '/^# recipe-start/,/^# recipe-end/p' "$0")" | sha256sum | cut -c1-12)
tag="$name:bookworm-$recipe"

if podman image exists "$tag"; then
    podman tag "$tag" "$name:bookworm"
    echo "node image $tag is up to date"
    exit 0
fi

# The Debian mirror this machine already uses (deb822 or one-line format): no host is hard-coded.
mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
[ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $3 ~ /^bookworm$/ {print $2; exit}' /etc/apt/sources.list)
[ -n "$mirror" ] || { echo "no Debian mirror found in /etc/apt" >&2; exit 1; }

rootfs=$(mktemp -d /var/tmp/tarn-node.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
# recipe-start
debootstrap --variant=minbase --include="$packages" bookworm "$rootfs" "$mirror"
# A container has no console login and no kernel to tune: mask the units that only fail there.
for unit in getty.target systemd-logind.service systemd-udevd.service systemd-sysctl.service \
            systemd-modules-load.service sys-kernel-config.mount sys-kernel-debug.mount; do
    ln -sf /dev/null "$rootfs/etc/systemd/system/$unit"
done
rm -f "$rootfs/etc/machine-id" && touch "$rootfs/etc/machine-id"
# dpkg without fsync: the roles' package installs took 3-4x as long with it on podman's overlay
# storage (zookeeper: 26 s -> 7 s). A lab node that loses power is rebuilt, never repaired.
echo force-unsafe-io > "$rootfs/etc/dpkg/dpkg.cfg.d/tarn-lab-unsafe-io"
apt_clean="$rootfs/var/cache/apt/archives"
find "$apt_clean" -name '*.deb' -delete
# recipe-end
tar -C "$rootfs" -c . | podman import --change 'CMD ["/sbin/init"]' - "$tag"
podman tag "$tag" "$name:bookworm"
echo "built node image $tag"
