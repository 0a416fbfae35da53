#!/bin/sh
# Builds the Debian bookworm base image (ketch-base:bookworm) locally, for machines where no image
# registry can be reached and `python:3.11-slim` cannot be pulled: debootstrap fetches Debian's
# packages from the Debian mirror (which such machines do reach), `docker import` turns the tree
# into an image. The Dockerfile installs Python 3.11 from apt on top (BASE=ketch-base:bookworm).
# Reuses the image when it exists: debootstrap takes about half a minute to minutes.
set -eu
TAG=${1:-ketch-base:bookworm}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
if docker image inspect "$TAG" >/dev/null 2>&1; then
  echo "build-base: $TAG exists, reusing it"
  exit 0
fi
if ! command -v debootstrap >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi
ROOT=$(mktemp -d /tmp/ketch-base.XXXXXX)
# debootstrap mounts /proc and /sys inside the tree; a failed run can leave them mounted.
trap 'umount "$ROOT/proc" "$ROOT/sys" 2>/dev/null || true; rm -rf "$ROOT"' EXIT
echo "build-base: debootstrap --variant=minbase bookworm into $ROOT"
debootstrap --variant=minbase bookworm "$ROOT" "$MIRROR" >"$ROOT.log" 2>&1 || { tail -20 "$ROOT.log"; exit 1; }
rm -f "$ROOT.log"
# The downloaded .debs and package lists are only the installer's leftovers; documentation, man
# pages and translations are not needed in a container. dpkg is told to leave them out of later
# installs too (python3 in the Dockerfile), as Debian's own slim images do.
rm -rf "$ROOT"/var/cache/apt/archives/*.deb "$ROOT"/var/cache/apt/*.bin "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/log/*
cat >"$ROOT/etc/dpkg/dpkg.cfg.d/ketch-slim" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
CFG
find "$ROOT/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
rm -rf "$ROOT"/usr/share/man/* "$ROOT"/usr/share/info/* "$ROOT"/usr/share/locale/* "$ROOT"/usr/share/lintian/*
tar -C "$ROOT" -c . | docker import -c 'CMD ["/bin/bash"]' - "$TAG" >/dev/null
echo "build-base: imported $TAG ($(docker image inspect -f '{{.Size}}' "$TAG") bytes)"
