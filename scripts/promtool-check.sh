#!/usr/bin/env bash
# Checks the daemon's /metrics with `promtool check metrics`. promtool comes with Debian's
# `prometheus` package (installed here with apt-get when missing and running as root).
#
#   scripts/promtool-check.sh [URL]    # default http://127.0.0.1:9465/metrics
#   scripts/promtool-check.sh - < metrics.txt
set -euo pipefail
url="${1:-http://127.0.0.1:9465/metrics}"
if ! command -v promtool >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get install -y --no-install-recommends prometheus >/dev/null
  else
    echo "promtool not found: install the Debian package 'prometheus' (apt-get install prometheus)" >&2
    exit 2
  fi
fi
if [ "$url" = - ]; then
  promtool check metrics
else
  curl -fsS "$url" | promtool check metrics
fi
