#!/usr/bin/env bash
# Installs the Debian packages the tests need and a fresh machine may lack (idempotent):
#   tinyproxy   the forward proxy of tests/net.rs (every request through a real proxy)
#   openssl     the TLS server of scripts/bench-run.sh's https benchmark
# Runs apt-get only for what is missing, and only as root (CI); otherwise it names the packages
# and fails, so a test never passes without its tool.
set -euo pipefail
missing=()
command -v tinyproxy >/dev/null 2>&1 || missing+=(tinyproxy)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "install-test-tools: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # The package starts a system-wide tinyproxy on port 8888; the tests start their own.
  if command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now tinyproxy >/dev/null 2>&1 || true
  fi
else
  echo "install-test-tools: missing ${missing[*]}: install them (apt-get install ${missing[*]})" >&2
  exit 1
fi
