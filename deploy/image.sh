#!/usr/bin/env bash
# Build and run the Encoder Explorer container image with podman.
#
#   deploy/image.sh build [--base IMAGE|debootstrap] [--tag NAME]   build the image (default base: python:3.11-slim)
#   deploy/image.sh base                    make (or reuse) the local Debian base with debootstrap; print its name
#   deploy/image.sh run [podman run options...]   run the image as an operator would (read-only, non-root)
#   deploy/image.sh edge UPSTREAM_PORT [podman run options...]   run the image's nginx edge in front of it
#
# Environment:
#   IMAGE            the image's name (default localhost/encoder-explorer:latest)
#   PORT             the app's port for `run` (default 8501); EDGE_PORT the edge's (default 8080)
#   DEBIAN_MIRROR    the mirror debootstrap uses (default http://deb.debian.org/debian)
#
# Without a registry, `--base debootstrap` builds on a Debian bookworm base made here from Debian's package mirror
# (cached as a podman image; made again only when this script's recipe for it changes). Whatever the base, the
# build sees this machine's pip set-up (its configuration, the local wheel folders and indexes it names, its CA
# bundle) as read-only volumes of the build's RUN steps (deploy/pip_setup.py): nothing of it is committed into
# the image (tests/app/test_container.py checks the image for it).
#
# Podman on our machines needs runc (crun refuses the hybrid cgroups), host networking and no default ulimits
# (the sandbox refuses to raise RLIMIT_NPROC): deploy/podman/containers.conf, used by every command here.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export CONTAINERS_CONF=${CONTAINERS_CONF:-$ROOT/deploy/podman/containers.conf}
IMAGE=${IMAGE:-localhost/encoder-explorer:latest}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
# Debian's python3 in bookworm is 3.11, the version the app and its wheels are built for.
INCLUDE=python3,python3-venv,ca-certificates
die() { echo "image.sh: $*" >&2; exit 1; }

base_name() {  # the local base's tag changes whenever its recipe does, so a stale cache is never reused
  local recipe="$SUITE $INCLUDE $MIRROR v1"
  echo "localhost/encoder-explorer-base:$SUITE-$(printf '%s' "$recipe" | sha256sum | cut -c1-12)"
}

make_base() {
  local name dir
  name=$(base_name)
  if podman image exists "$name"; then echo "$name"; return; fi
  command -v debootstrap >/dev/null || die "debootstrap not found: apt-get install -y debootstrap"
  dir=$(mktemp -d /var/tmp/encoder-explorer-base.XXXXXX)
  echo "image.sh: debootstrap $SUITE from $MIRROR (about a minute)" >&2
  debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$dir" "$MIRROR" >"$dir.log" 2>&1 ||
    { tail -20 "$dir.log" >&2; rm -rf "$dir" "$dir.log"; die "debootstrap failed (its log above)"; }
  # The same package sources as the official images: the release, its updates and security fixes.
  cat >"$dir/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb ${MIRROR%/debian}/debian-security $SUITE-security main
EOF
  rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
  tar -C "$dir" -c . | podman import --change 'CMD ["/bin/bash"]' - "$name" >/dev/null
  rm -rf "$dir" "$dir.log"
  echo "$name"
}

build() {
  local base="" tag=$IMAGE args=() vols=() torch stage vol host
  while [ $# -gt 0 ]; do
    case "$1" in
      --base) base=$2; shift 2 ;;
      --tag) tag=$2; shift 2 ;;
      *) die "unknown build option $1" ;;
    esac
  done
  [ "$base" != debootstrap ] || base=$(make_base)
  [ -z "$base" ] || args+=(--build-arg "BASE=$base")
  torch=$(sed -n 's/^torch==\([^ ]*\).*/\1/p' "$ROOT/requirements.txt")
  stage=$(mktemp -d /var/tmp/encoder-explorer-pip.XXXXXX)
  while IFS= read -r vol; do
    vols+=(-v "$vol:ro")  # seen by the build's RUN steps only; the mount points are in $stage, not the image
    host=${vol%%:*}
    # The CPU wheel of the pinned torch is at hand: PyTorch's index is not needed (and may not be reachable).
    if [ -d "$host" ] && compgen -G "$host/torch-$torch+cpu-*.whl" >/dev/null; then args+=(--build-arg TORCH_INDEX=); fi
  done < <(python3 "$ROOT/deploy/pip_setup.py" "$stage")
  [ ! -s "$stage/pip.conf" ] || args+=(--build-arg PIP_CONFIG_FILE=/mnt/pip.conf)
  # --format docker: the OCI format has no HEALTHCHECK. --layers: reuse unchanged steps between builds.
  podman build --network host --format docker --layers "${args[@]}" "${vols[@]}" \
    -f "$ROOT/deploy/Containerfile" -t "$tag" "$ROOT" >&2 || { rm -rf "$stage"; die "the build failed"; }
  rm -rf "$stage"
  echo "$tag"
}

run() {  # the operator's run: read-only root, non-root user, a tmpfs for /tmp and the cache
  exec podman run --pull never --network host --read-only --read-only-tmpfs=false \
    --tmpfs /tmp:rw,nosuid,nodev,size=512m,mode=1777 --tmpfs /cache:rw,nosuid,nodev,size=256m,mode=1777 \
    -e "STREAMLIT_SERVER_PORT=${PORT:-8501}" "$@" "$IMAGE"
}

edge() {  # UPSTREAM_PORT: the image's nginx with deploy/nginx.conf.template in front of one app (a pod's shape)
  local upstream=$1; shift
  exec podman run --pull never --network host --read-only --read-only-tmpfs=false \
    --tmpfs /tmp:rw,nosuid,nodev,size=64m,mode=1777 --entrypoint /app/deploy/edge.sh \
    -e "EDGE_PORT=${EDGE_PORT:-8080}" -e "UPSTREAM=127.0.0.1:$upstream" "$@" "$IMAGE"
}

cmd=${1:-}
case "$cmd" in
  base) make_base ;;
  build) build "${@:2}" ;;
  run) run "${@:2}" ;;
  edge) [ $# -ge 2 ] || die "usage: image.sh edge UPSTREAM_PORT [podman run options...]"; edge "${@:2}" ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
