#!/usr/bin/env bash
# Installs PostgreSQL (Debian's package) when pg_ctl is missing, for the
# sqlkv tests, which start a server of their own in a temporary directory.
# Does nothing when PostgreSQL is installed already. Needs root (or sudo)
# and the Debian package archive.
set -euo pipefail

if compgen -G '/usr/lib/postgresql/*/bin/pg_ctl' >/dev/null || command -v pg_ctl >/dev/null; then
  exit 0
fi
echo "sqlkv: installing PostgreSQL for the tests"
sudo=""
if [ "$(id -u)" != 0 ]; then
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# The package's own cluster is not used; the tests make their own.
$sudo apt-get install -y -qq postgresql >/dev/null
compgen -G '/usr/lib/postgresql/*/bin/pg_ctl' >/dev/null
