#!/usr/bin/env bash
# Runs every test of the project: unit tests, the integration-test binary and doc tests.
# Uses cargo-nextest when installed (parallel processes, per-test timeouts), else cargo test.
set -euo pipefail
cd "$(dirname "$0")/.."
# The Debian tools some tests drive (tinyproxy): installed when missing (as root), else named.
bash scripts/install-test-tools.sh
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --all-targets --no-fail-fast "$@"
  cargo test --doc --quiet
else
  cargo test --all-targets --no-fail-fast "$@"
fi
