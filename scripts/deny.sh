#!/usr/bin/env bash
# `cargo deny check licenses bans sources` with the policy in deny.toml; installs cargo-deny
# first when it is missing (`cargo install cargo-deny --locked`). The advisories check needs
# the RustSec database from the network; run it where there is one: CHECKS=advisories.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo deny --version >/dev/null 2>&1; then
  start=$SECONDS
  cargo install cargo-deny --locked
  echo "deny: installed cargo-deny in $((SECONDS - start)) s"
fi
# Offline mode reads every platform's crates from the local registry: fetch them first (a
# build fetches only this platform's).
cargo fetch --locked --quiet
CHECKS=${CHECKS:-licenses bans sources}
offline=--offline
[[ "$CHECKS" == *advisories* ]] && offline=""   # the advisory database is fetched
# shellcheck disable=SC2086
cargo deny $offline check --hide-inclusion-graph $CHECKS
