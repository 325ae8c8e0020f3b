#!/usr/bin/env bash
# Runs every test of the project: unit tests, the integration-test binary and doc tests.
# Uses cargo-nextest when installed (parallel processes, per-test timeouts), else cargo test.
# First installs the tools some tests drive when missing (scripts/test-tools.sh: unshare, bash,
# promtool; as root with apt-get): under CI a test whose tool is missing fails.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/test-tools.sh
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --all-targets --no-fail-fast "$@"
  cargo test --doc --quiet
else
  cargo test --all-targets --no-fail-fast "$@"
fi
