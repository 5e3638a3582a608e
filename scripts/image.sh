#!/usr/bin/env bash
# The project's container image (docker/Dockerfile), built with podman (or docker).
#
#   scripts/image.sh base     make the local Debian base if missing (debootstrap, podman import)
#   scripts/image.sh build    build the image on BASE_IMAGE (the local base unless set)
#   scripts/image.sh          both (what `make image` runs)
#
# Environment: IMAGE (default flink-agents:0.1.0), BASE_IMAGE (default: the local base,
# localhost/debian:bookworm-min; where a registry is reachable, docker.io/library/debian:bookworm-slim
# does as well), DEBIAN_MIRROR (default http://deb.debian.org/debian), CONTAINER_ENGINE,
# HOST_CA_BUNDLE (default /etc/ssl/certs/ca-certificates.crt: mounted into a podman build).
# Each step prints how long it took.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=scripts/container-engine.sh
source "$here/container-engine.sh"
# shellcheck source=scripts/versions.sh
source "$here/versions.sh"

local_base=localhost/debian:bookworm-min
image=${IMAGE:-flink-agents:0.1.0}
base_image=${BASE_IMAGE:-$local_base}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
ca_bundle=${HOST_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
work=${FLINK_AGENTS_CACHE:-$repo/.cache}/image

log() { echo "image.sh: $*" >&2; }

base() {
  container_engine_pick "$repo"
  if "${engine[@]}" image exists "$local_base" 2>/dev/null \
    || "${engine[@]}" image inspect "$local_base" >/dev/null 2>&1; then
    log "$local_base exists"
    return 0
  fi
  command -v debootstrap >/dev/null || { log "needs debootstrap (apt-get install debootstrap)"; exit 1; }
  local started=$SECONDS rootfs="$work/rootfs"
  rm -rf "$rootfs"
  mkdir -p "$work"
  log "debootstrap --variant=minbase bookworm ($mirror) into $rootfs"
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -n 20 "$work/debootstrap.log" >&2; exit 1; }
  # The package lists and caches of the bootstrap are not needed in the image.
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb
  tar -C "$rootfs" -c . | "${engine[@]}" import - "$local_base" >/dev/null
  rm -rf "$rootfs"
  log "made $local_base in $((SECONDS - started)) s"
}

build() {
  container_engine_pick "$repo"
  local started=$SECONDS args=()
  # podman reads the Dockerfile's own ignore file only when told (docker's BuildKit finds it).
  if [ "$engine_name" = podman ]; then
    args+=(--network host --ignorefile "$repo/docker/Dockerfile.dockerignore")
    # The host's CA bundle, for hosts whose https goes through a proxy with its own authority.
    if [ -f "$ca_bundle" ]; then
      args+=(-v "$ca_bundle:/run/host-ca.crt:ro" --build-arg HOST_CA_BUNDLE=/run/host-ca.crt)
    fi
  fi
  log "building $image on $base_image with $engine_name"
  "${engine[@]}" build "${args[@]}" -f "$repo/docker/Dockerfile" \
    --build-arg "BASE_IMAGE=$base_image" \
    --build-arg "KAFKA_CONNECTOR_VERSION=$FLINK_KAFKA_CONNECTOR_VERSION" \
    -t "$image" "$repo"
  log "built $image in $((SECONDS - started)) s"
}

case "${1:-all}" in
  base) base ;;
  build) build ;;
  all) [ "$base_image" = "$local_base" ] && base; build ;;
  *) echo "usage: $0 [base|build|all]" >&2; exit 2 ;;
esac
