#!/bin/sh
# Install the system packages the test suite needs: Debian's chromium for the graph page test.
# Idempotent: does nothing when chromium is already on PATH. Needs root (or sudo) and apt.
set -eu
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
    SUDO="sudo"
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium
