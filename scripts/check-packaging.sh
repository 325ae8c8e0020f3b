#!/usr/bin/env bash
# Checks the systemd unit with systemd-analyze: `verify` must pass, and the offline security
# exposure score is printed (recorded in BENCHMARKS.md). Installs systemd's tools if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v systemd-analyze >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq systemd >/dev/null
fi
cargo build --quiet --bin heartbeat-agent
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# verify checks that ExecStart exists: point it at the binary just built.
sed "s|/usr/bin/heartbeat-agent|$PWD/target/debug/heartbeat-agent|" \
  packaging/systemd/heartbeat-agent.service >"$work/heartbeat-agent.service"
echo "== systemd-analyze verify"
systemd-analyze verify --man=no "$work/heartbeat-agent.service"
echo "ok"
echo "== systemd-analyze security --offline=true"
systemd-analyze security --offline=true "$work/heartbeat-agent.service" | tail -n 1
