#!/usr/bin/env bash
# Install everything the test suite needs on a fresh Debian machine, then run the whole suite.
#   - system packages: Chromium (for the Playwright browser tests), Graphviz's `dot` (SVG export), nginx
#     (tests/app/test_deploy.py runs deploy/serve.sh: replicas behind nginx), Node (tests/js: `node --test`), and
#     podman with runc and debootstrap (tests/app/test_container.py builds and runs the image on a Debian base made here)
#   - a virtual environment .venv-test with requirements-test.txt
# Nothing is skipped: a missing browser or binary makes the tests that need it fail, loudly.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
[ -x /usr/bin/chromium ] || need+=(chromium)
command -v dot >/dev/null 2>&1 || need+=(graphviz)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx)  # deploy tests: replicas behind nginx
command -v node >/dev/null 2>&1 || need+=(nodejs)  # tests/js: the components' logic under `node --test`
command -v podman >/dev/null 2>&1 || need+=(podman)  # container tests: the image, built and run
command -v runc >/dev/null 2>&1 || [ -x /usr/sbin/runc ] || need+=(runc)
command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"
fi

PY=${PYTHON:-python3}
if [ ! -x .venv-test/bin/python ]; then
  "$PY" -m venv .venv-test
fi
.venv-test/bin/pip install -q --disable-pip-version-check -r requirements-test.txt

.venv-test/bin/python -m ruff check .
# Most of the suite on two workers, a whole module each, the longest first; then the modules marked `alone` (those
# that load servers with a class), one after another, as the whole suite used to run (tests/conftest.py says why).
# TEST_WORKERS=0 runs the first part serially too. Both parts always run; pytest's exit code 5 (no test selected) is
# no failure.
status=0
.venv-test/bin/python -m pytest -n "${TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder -m "not alone" "$@" \
  || { rc=$?; [ "$rc" -eq 5 ] || status=$rc; }
.venv-test/bin/python -m pytest -m alone "$@" || { rc=$?; [ "$rc" -eq 5 ] || status=$rc; }
exit "$status"
