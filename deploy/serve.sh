#!/usr/bin/env bash
# Serve Encoder Explorer to a class: N replicas of `streamlit run app.py` with nginx in front.
#
#   deploy/serve.sh start N [PORT]          N replicas on this machine + nginx on PORT (default 8080)
#   deploy/serve.sh replicas N              only the replicas (an app machine of a multi-machine deployment)
#   deploy/serve.sh balancer PORT HOST:PORT...   only nginx, in front of replicas on other machines
#   deploy/serve.sh conf PORT HOST:PORT...  print the nginx configuration for those upstreams
#   deploy/serve.sh status | stop
#
# Environment:
#   SERVE_DIR        run directory: pids, logs, nginx prefix (default /tmp/encoder-explorer-serve)
#   REPLICA_PORTS    replica ports (default 8501, 8502, ...); REPLICA_ADDRESS (default 127.0.0.1)
#   LISTEN           nginx listen address (default 127.0.0.1; 0.0.0.0 to serve a room)
#   ALLOWED_HOSTS    host names the browsers use, e.g. "class.example.org" (server.allowedHosts; loopback names
#                    are always allowed; any other Host is refused on the app's WebSocket)
#   PYTHON           the interpreter with requirements.txt installed (default .venv, else .venv-test, else python3)
#   OMP_NUM_THREADS  PyTorch threads per replica (default 1; serve one replica per core)
#
# Each replica warms itself before it is reported ready: deploy/warm.py (run as `python -m deploy.warm` from the
# repository root, so it imports the app's own packages) opens one session over Streamlit's
# WebSocket protocol, which builds the pretrained model and runs one trace, then visits every page once.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUN=${SERVE_DIR:-/tmp/encoder-explorer-serve}
NGINX_BIN=${NGINX_BIN:-$(command -v nginx || echo /usr/sbin/nginx)}
if [ -z "${PYTHON:-}" ]; then
  for p in "$ROOT/.venv/bin/python" "$ROOT/.venv-test/bin/python"; do
    [ -x "$p" ] && { PYTHON=$p; break; }
  done
  PYTHON=${PYTHON:-python3}
fi

STARTED=()
die() { echo "serve.sh: $*" >&2; exit 1; }

wait_healthy() {  # URL SECONDS PID
  local deadline=$((SECONDS + $2))
  until curl -sf -o /dev/null "$1/_stcore/health"; do
    kill -0 "$3" 2>/dev/null || return 1
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.3
  done
}

start_replicas() {  # N
  local n=$1 ports threads i port pid
  [[ $n =~ ^[1-9][0-9]*$ ]] || die "N must be a positive number, not '$n'"
  mkdir -p "$RUN"
  if [ -n "${REPLICA_PORTS:-}" ]; then read -ra ports <<<"$REPLICA_PORTS"; else
    ports=(); for ((i = 0; i < n; i++)); do ports+=($((8501 + i))); done; fi
  [ ${#ports[@]} -ge "$n" ] || die "REPLICA_PORTS has fewer than $n ports"
  # One PyTorch thread per replica; run one replica per core instead. On the shared 2-core VM one replica with 2
  # threads spent 170 ms of CPU per script run and reached p95 6.2 s at 20 students; with 1 thread, 53 ms and
  # p95 1.0 s (benchmarks/RESULTS-serving.md): a thread team stalls whenever one of its threads is descheduled.
  threads=${OMP_NUM_THREADS:-1}
  # One cookie secret for all replicas, so a tab moved to another replica still has a valid XSRF cookie.
  [ -s "$RUN/cookie-secret" ] || (umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$RUN/cookie-secret")
  local hosts=() h
  # Loopback names stay allowed: the warm-up and an operator on the machine connect to the replicas directly.
  for h in localhost 127.0.0.1 ::1 ${ALLOWED_HOSTS:-}; do hosts+=(--server.allowedHosts "$h"); done
  for ((i = 0; i < n; i++)); do
    port=${ports[$i]}
    ! curl -s -o /dev/null "http://127.0.0.1:$port/" || die "port $port is already in use"
    # setsid: the replica outlives this shell and a Ctrl-C in it; the inner shell records its own pid, then
    # becomes the server (exec), so the pid file names the streamlit process itself.
    OMP_NUM_THREADS=$threads STREAMLIT_SERVER_COOKIE_SECRET=$(cat "$RUN/cookie-secret") \
      setsid bash -c 'cd "$1" && echo $$ >"$0" && shift && exec "$@"' "$RUN/replica-$port.pid" "$ROOT" \
        "$PYTHON" -m streamlit run app.py --server.port "$port" \
        --server.address "${REPLICA_ADDRESS:-127.0.0.1}" --server.headless true "${hosts[@]}" \
        >"$RUN/replica-$port.log" 2>&1 </dev/null &
  done
  for ((i = 0; i < n; i++)); do
    port=${ports[$i]}
    for _ in $(seq 50); do [ -s "$RUN/replica-$port.pid" ] && break; sleep 0.1; done
    pid=$(cat "$RUN/replica-$port.pid")
    wait_healthy "http://127.0.0.1:$port" 120 "$pid" || die "replica on port $port did not start; see $RUN/replica-$port.log"
    (cd "$ROOT" && "$PYTHON" -m deploy.warm "http://127.0.0.1:$port") || die "replica on port $port failed to warm up"
    echo "replica $port ready (pid $pid, $threads threads)"
    STARTED+=("127.0.0.1:$port")
  done
}

render_conf() {  # LISTEN_PORT HOST:PORT...
  local listen=$1 conf upstreams="" user_line=""; shift
  [ $# -gt 0 ] || die "no upstream replicas given"
  for u in "$@"; do upstreams+="        server $u max_fails=1 fail_timeout=10s;"$'\n'; done
  # nginx started by root drops its workers to an unprivileged user; Debian has no group called nobody.
  [ "$(id -u)" -ne 0 ] || user_line="user nobody nogroup;"
  conf=$(<"$ROOT/deploy/nginx.conf.template")
  conf=${conf//@RUN_DIR@/$RUN}
  conf=${conf//@LISTEN@/${LISTEN:-127.0.0.1}:$listen}
  conf=${conf//@USER_LINE@/$user_line}
  conf=${conf//@UPSTREAMS@/${upstreams%$'\n'}}
  printf '%s\n' "$conf"
}

start_balancer() {  # LISTEN_PORT HOST:PORT...
  [ -x "$NGINX_BIN" ] || die "nginx not found: apt-get install -y nginx"
  mkdir -p "$RUN/tmp"
  chmod 755 "$RUN"
  render_conf "$@" >"$RUN/nginx.conf"
  "$NGINX_BIN" -t -q -p "$RUN" -c "$RUN/nginx.conf" -e "$RUN/nginx-error.log" || die "bad nginx configuration"
  "$NGINX_BIN" -p "$RUN" -c "$RUN/nginx.conf" -e "$RUN/nginx-error.log"
  wait_healthy "http://127.0.0.1:$1" 20 "$(cat "$RUN/nginx.pid")" || die "nginx is not answering on port $1"
  echo "nginx on ${LISTEN:-127.0.0.1}:$1 (pid $(cat "$RUN/nginx.pid")) -> ${*:2}"
}

stop_pid() {  # PIDFILE
  local pid deadline
  pid=$(cat "$1" 2>/dev/null) || return 0
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    deadline=$((SECONDS + 10))
    while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$1"
}

cmd=${1:-}
case "$cmd" in
  start)
    [ $# -ge 2 ] || die "usage: serve.sh start N [PORT]"
    port=${3:-8080}
    start_replicas "$2"
    start_balancer "$port" "${STARTED[@]}"
    ;;
  replicas) [ $# -eq 2 ] || die "usage: serve.sh replicas N"; start_replicas "$2" ;;
  balancer) [ $# -ge 3 ] || die "usage: serve.sh balancer PORT HOST:PORT..."; start_balancer "${@:2}" ;;
  conf) [ $# -ge 3 ] || die "usage: serve.sh conf PORT HOST:PORT..."; render_conf "${@:2}" ;;
  status)
    for f in "$RUN"/*.pid; do
      [ -e "$f" ] || continue
      pid=$(cat "$f"); state=dead; kill -0 "$pid" 2>/dev/null && state=running
      echo "$(basename "$f" .pid) pid $pid $state"
    done
    ;;
  stop)
    # nginx first, so no request reaches a replica that is going away; TERM lets nginx finish quickly.
    stop_pid "$RUN/nginx.pid"
    for f in "$RUN"/replica-*.pid; do [ -e "$f" ] && stop_pid "$f"; done
    echo "stopped"
    ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
