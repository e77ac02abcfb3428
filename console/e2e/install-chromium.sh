#!/usr/bin/env bash
# Installs Chromium (Debian's package) when it is missing, for the
# console's browser tests, which start it headless themselves. Does
# nothing when chromium is installed already. Needs root (or sudo) and
# the Debian package archive.
set -euo pipefail

if command -v chromium >/dev/null || { [ -n "${CHROMIUM:-}" ] && [ -x "$CHROMIUM" ]; }; then
  exit 0
fi
echo "console/e2e: installing Chromium for the browser tests"
sudo=""
if [ "$(id -u)" != 0 ]; then
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
command -v chromium >/dev/null
