#!/usr/bin/env bash
# Installs the tools that some integration tests drive, when they are missing: `unshare`
# and `setpriv` (util-linux: PID and mount namespaces; commands run as another user), `bash`
# (the completion test), `tinyproxy` (the forward
# proxy of tests/net.rs; its system service is disabled again), `openssl` (the TLS server of
# scripts/bench-run.sh), `etcd` and `etcdctl` (Debian's etcd-server and etcd-client: the real
# 3-member cluster the cluster tests start on 127.0.0.1; the packaged service is disabled
# again), `faketime` (agents whose clocks differ) and `promtool` (checks /metrics and runs the
# alert rules' unit tests) and `chromium` (Debian's, headless: the dashboard's browser test,
# tests/status/dashboard.rs), `rpmbuild` and `rpmlint` (Debian's `rpm` and `rpmlint`: the
# RPM that scripts/build-rpm.sh builds from the .deb), and `lintian` (scripts/build-deb.sh
# checks the .deb with it). scripts/test.sh calls it first; with CI set, a
# test whose tool is still missing fails instead of skipping (tests/util.rs, `require_tool`).
#
# promtool comes only with Debian's `prometheus` package (the server, its unit and a system
# user; about 30 MB). Installing that package would create the user and enable and start the
# service, so this downloads the package without installing it (`apt-get download`), extracts
# it into a temporary directory and copies only /usr/bin/promtool (a Go program linked against
# libc alone) to $PREFIX/bin (default /usr/local/bin). Nothing is enabled or started.
#
# Needs root and apt-get to install; otherwise it names what is missing and exits 0 (the tests
# then skip locally, or fail under CI).
set -euo pipefail
PREFIX=${PREFIX:-/usr/local}

missing=()
command -v unshare >/dev/null 2>&1 && command -v setpriv >/dev/null 2>&1 || missing+=(util-linux)
command -v bash >/dev/null 2>&1 || missing+=(bash)
command -v tinyproxy >/dev/null 2>&1 || missing+=(tinyproxy)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
command -v etcdctl >/dev/null 2>&1 || missing+=(etcd-client)
command -v faketime >/dev/null 2>&1 || missing+=(faketime)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v rpmbuild >/dev/null 2>&1 || missing+=(rpm)
command -v rpmlint >/dev/null 2>&1 || missing+=(rpmlint)
command -v lintian >/dev/null 2>&1 || missing+=(lintian)
need_promtool=
command -v promtool >/dev/null 2>&1 || need_promtool=1

if [ ${#missing[@]} -eq 0 ] && [ -z "$need_promtool" ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "test-tools: missing ${missing[*]} ${need_promtool:+promtool (Debian package prometheus)}; install them as root (bash scripts/test-tools.sh) or the tests that use them skip (fail under CI)" >&2
  exit 0
fi

updated=
apt_update() {
  [ -n "$updated" ] || { apt-get update -qq >/dev/null; updated=1; }
}
if [ ${#missing[@]} -gt 0 ]; then
  apt_update
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # The tinyproxy and etcd-server packages may start system-wide services (ports 8888, 2379);
  # the tests start their own.
  if command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now tinyproxy etcd >/dev/null 2>&1 || true
  fi
fi
if [ -n "$need_promtool" ]; then
  apt_update
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  (cd "$work" && apt-get download -qq prometheus >/dev/null)
  dpkg-deb -x "$work"/prometheus_*.deb "$work/root"
  install -D -m 0755 "$work/root/usr/bin/promtool" "$PREFIX/bin/promtool"
  echo "test-tools: installed $("$PREFIX/bin/promtool" --version 2>&1 | head -n 1) as $PREFIX/bin/promtool (no service)" >&2
fi
