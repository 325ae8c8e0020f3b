#!/usr/bin/env bash
# Checks the systemd unit with systemd-analyze: `verify` must pass for the unit alone and with
# the drop-in packaging/systemd/heartbeat-agent.service.d/jobs-need-more.conf (every commented
# option enabled), and the offline security exposure scores of both are printed (recorded in
# docs/packaging.md). Installs systemd's tools if missing. Then the Debian maintainer scripts
# must parse (`sh -n`, and shellcheck when installed), and the package must install the config
# with mode 640 (postinst gives it to group heartbeat-agent).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v systemd-analyze >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq systemd >/dev/null
fi
cargo build --quiet --bin heartbeat-agent
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# verify checks that ExecStart exists: point it at the binary just built.
sed "s|/usr/bin/heartbeat-agent|${CARGO_TARGET_DIR:-$PWD/target}/debug/heartbeat-agent|" \
  packaging/systemd/heartbeat-agent.service >"$work/heartbeat-agent.service"
# verify exits 0 on warnings such as "Unknown key": any output at all is a failure here.
verify() {
  local out
  out=$(systemd-analyze verify --man=no "$1" 2>&1) || { echo "$out"; return 1; }
  if [ -n "$out" ]; then echo "$out"; return 1; fi
  echo "ok"
}
echo "== systemd-analyze verify"
verify "$work/heartbeat-agent.service"
echo "== systemd-analyze security --offline=true"
systemd-analyze security --offline=true "$work/heartbeat-agent.service" | tail -n 1

echo "== with the drop-in, every commented option enabled"
unit_dir=$work/with-drop-in
mkdir -p "$unit_dir/heartbeat-agent.service.d"
cp "$work/heartbeat-agent.service" "$unit_dir/"
sed 's/^#\([A-Z]\)/\1/' packaging/systemd/heartbeat-agent.service.d/jobs-need-more.conf \
  >"$unit_dir/heartbeat-agent.service.d/jobs-need-more.conf"
SYSTEMD_UNIT_PATH="$unit_dir:" verify "$unit_dir/heartbeat-agent.service"
SYSTEMD_UNIT_PATH="$unit_dir:" systemd-analyze security --offline=true \
  "$unit_dir/heartbeat-agent.service" | tail -n 1

echo "== Debian maintainer scripts"
for script in packaging/debian/postinst packaging/debian/postrm; do
  sh -n "$script"
  if command -v shellcheck >/dev/null 2>&1; then shellcheck -s sh "$script"; fi
  echo "$script: ok"
done
grep -q '"etc/heartbeat-agent/config.toml", "640"' Cargo.toml \
  || { echo "Cargo.toml: the config must be installed with mode 640"; exit 1; }
echo "config.toml: installed 0640, root:heartbeat-agent (postinst)"
