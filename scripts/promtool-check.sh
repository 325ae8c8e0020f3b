#!/usr/bin/env bash
# Checks the daemon's /metrics with `promtool check metrics`. promtool is installed when missing
# by scripts/test-tools.sh (the binary alone, taken from Debian's `prometheus` package without
# installing the package: no service is created, enabled or started).
#
#   scripts/promtool-check.sh [URL]    # default http://127.0.0.1:9465/metrics
#   scripts/promtool-check.sh - < metrics.txt
set -euo pipefail
url="${1:-http://127.0.0.1:9465/metrics}"
if ! command -v promtool >/dev/null 2>&1; then
  bash "$(dirname "$0")/test-tools.sh"
  if ! command -v promtool >/dev/null 2>&1; then
    echo "promtool not found: run scripts/test-tools.sh as root (it installs only the promtool binary)" >&2
    exit 2
  fi
fi
if [ "$url" = - ]; then
  promtool check metrics
else
  curl -fsS "$url" | promtool check metrics
fi
