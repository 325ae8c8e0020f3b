#!/usr/bin/env bash
# Checks the shipped Prometheus alerting rules (packaging/prometheus/heartbeat-agent.rules.yml):
# `promtool check rules` (they load) and `promtool test rules` (each alert fires and stays quiet
# as heartbeat-agent.rules.test.yml says). That every metric they name is one the daemon
# exports is checked by the integration tests (tests/status/alert_rules.rs). promtool is
# installed when missing by scripts/test-tools.sh (the binary alone, from Debian's `prometheus`
# package, as root).
set -euo pipefail
cd "$(dirname "$0")/../packaging/prometheus"
if ! command -v promtool >/dev/null 2>&1; then
  bash ../../scripts/test-tools.sh
  if ! command -v promtool >/dev/null 2>&1; then
    echo "check-alert-rules: promtool not found: run scripts/test-tools.sh as root (it installs only the promtool binary)" >&2
    exit 2
  fi
fi
promtool check rules heartbeat-agent.rules.yml
promtool test rules heartbeat-agent.rules.test.yml
