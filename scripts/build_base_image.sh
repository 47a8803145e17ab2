#!/usr/bin/env bash
# Guarantees: the local image rollout-base:bookworm exists (no registry needed):
# a minbase Debian bookworm with python3, pytest, git, patch, ca-certificates
# and procps, no extra users (the sandbox adds `agent` at container boot).
# Built by debootstrap from the machine's Debian mirror, then `docker import`.
# Skips everything if the image already exists. Needs a running engine.
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"
IMAGE=rollout-base:bookworm
PACKAGES=python3,python3-pytest,git,patch,ca-certificates,procps

if docker image inspect "$IMAGE" >/dev/null 2>&1; then echo "base image: $IMAGE present"; exit 0; fi

if ! command -v debootstrap >/dev/null; then
  echo "base image: installing debootstrap (apt)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null
fi

# The first Debian (non-security) mirror apt is configured with.
MIRROR=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
  | grep -oE '^(deb|URIs:)[[:space:]]+https?://[^[:space:]]+/debian/?([[:space:]]|$)' \
  | awk '{print $2}' | head -n1 || true)
MIRROR=${MIRROR:-http://deb.debian.org/debian}

ROOTFS=$(mktemp -d /var/tmp/rollout-rootfs.XXXXXX)
# --one-file-system: never descend into a /proc or /sys left mounted by a failed run.
trap 'rm -rf --one-file-system "$ROOTFS"' EXIT
echo "base image: debootstrap bookworm from $MIRROR (about 70 s)"
debootstrap --variant=minbase --include="$PACKAGES" bookworm "$ROOTFS" "$MIRROR" >"$ROOTFS.log" 2>&1 \
  || { tail -n 30 "$ROOTFS.log" >&2; exit 1; }
rm -f "$ROOTFS.log"
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*
tar -C "$ROOTFS" -c . | docker import --change 'ENV LANG=C.UTF-8' --change 'CMD ["/bin/bash"]' - "$IMAGE" >/dev/null
docker run --rm "$IMAGE" python3 -m pytest --version >/dev/null
echo "base image: $IMAGE built"
