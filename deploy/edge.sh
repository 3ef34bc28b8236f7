#!/usr/bin/env bash
# A pod's edge: nginx with the project's configuration (deploy/nginx.conf.template, rendered by
# `deploy/serve.sh conf`) in front of the app container beside it. Kubernetes' Ingress sends every path here, so
# the refused endpoints, the body and header limits and the redirect of unknown deeper paths are the same rules,
# from the same file, as on a machine running deploy/serve.sh. Runs as the image's unprivileged user with a
# read-only root: everything nginx writes goes to $EDGE_DIR on the /tmp volume, and its logs to the container's.
#
# Environment: EDGE_PORT (default 8080), UPSTREAM (default 127.0.0.1:8501), EDGE_DIR (default /tmp/edge).
set -euo pipefail
dir=${EDGE_DIR:-/tmp/edge}
mkdir -p "$dir/tmp"
ln -sf /dev/stderr "$dir/nginx-error.log"
ln -sf /dev/stdout "$dir/nginx-access.log"
SERVE_DIR=$dir LISTEN=0.0.0.0 bash "$(dirname "$0")/serve.sh" conf "${EDGE_PORT:-8080}" "${UPSTREAM:-127.0.0.1:8501}" \
  >"$dir/nginx.conf"
exec nginx -p "$dir" -c "$dir/nginx.conf" -e stderr -g 'daemon off;'
