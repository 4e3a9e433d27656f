#!/usr/bin/env bash
# The container base image without a registry: Debian 12 from `debootstrap --variant=minbase
# bookworm` (with the runtime libraries the .deb depends on, so building the image needs no network),
# imported with `podman import` as localhost/latchkey-base:bookworm. The root file system is kept as
# a tarball under data/container/ (LATCHKEY_CONTAINER_CACHE), so a rerun only imports it (seconds), and
# the import is skipped when the image is already there. Installs debootstrap, podman and runc when
# missing. Prints the image name as the last line of stdout; progress goes to stderr.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { printf 'container-base: %s\n' "$*" >&2; }
IMAGE=localhost/latchkey-base:bookworm
CACHE="${LATCHKEY_CONTAINER_CACHE:-$REPO/data/container}"
# What the .deb's Depends need at run time (deploy/debian/control), and the CA bundle for webhooks.
INCLUDE=libssl3,libcbor0.8,libpq5,libmicrohttpd12,libcurl4,ca-certificates,passwd,publicsuffix
MIRROR="${LATCHKEY_DEBIAN_MIRROR:-http://deb.debian.org/debian}"

eval "$(bash "$REPO/scripts/podman-setup.sh")"
if podman image exists "$IMAGE"; then
  log "$IMAGE is there"
  echo "$IMAGE"; exit 0
fi
mkdir -p "$CACHE"
tarball="$CACHE/bookworm-minbase.tar"
stamp="$CACHE/bookworm-minbase.include"
if [[ ! -s "$tarball" || "$(cat "$stamp" 2>/dev/null)" != "$INCLUDE" ]]; then
  command -v debootstrap >/dev/null || {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >&2 \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >&2; }
  }
  root="$CACHE/rootfs"
  # debootstrap mounts /proc (and may leave it mounted where its umount fails): never delete through a mount.
  unmount_under() { { grep -o " $1/[^ ]*" /proc/mounts || true; } | sort -r | while read -r m; do umount "$m" || umount -l "$m"; done; }
  unmount_under "$root"
  rm -rf --one-file-system "$root" "$tarball"
  log "debootstrap --variant=minbase bookworm from $MIRROR (a few minutes, once)"
  debootstrap --variant=minbase --include="$INCLUDE" bookworm "$root" "$MIRROR" > "$CACHE/debootstrap.log" 2>&1 \
    || { tail -n 20 "$CACHE/debootstrap.log" >&2; exit 1; }
  unmount_under "$root"
  # An image needs no package lists or caches.
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
  tar -C "$root" --numeric-owner --one-file-system -cf "$tarball" .
  rm -rf --one-file-system "$root"
  echo "$INCLUDE" > "$stamp"
fi
log "podman import $tarball"
podman import --change 'CMD ["/bin/bash"]' "$tarball" "$IMAGE" >&2
echo "$IMAGE"
