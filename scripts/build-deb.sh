#!/usr/bin/env bash
# Builds the Debian package: installs cargo-deb if missing, builds the release binary, generates
# the man pages and shell completions from it and a stripped copy of it into target/assets/ (the
# package metadata in Cargo.toml refers to them; always under the repository, wherever
# CARGO_TARGET_DIR puts the build), runs `cargo deb`, checks that the packaged binary has no
# symbol table and is PIE with full RELRO and BIND_NOW (scripts/check-hardening.sh), that
# lintian finds no error and no warning in the package (an override only with its reason,
# packaging/debian/lintian-overrides), and lists the package's contents. lintian comes with
# scripts/test-tools.sh (run as root; CI runs it first, through scripts/test.sh).
#
# Usage: scripts/build-deb.sh [extra cargo-deb arguments, e.g. --target x86_64-unknown-linux-musl]
# Prints the path of the .deb on the last line. A release build takes about 10 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v lintian >/dev/null || {
  echo "build-deb: lintian is required; install it as root with: bash scripts/test-tools.sh" >&2
  exit 1
}
if ! cargo deb --version >/dev/null 2>&1; then
  echo "build-deb: installing cargo-deb" >&2
  cargo install cargo-deb --locked
fi

cargo build --release --locked
bin=${CARGO_TARGET_DIR:-target}/release/heartbeat-agent

assets=target/assets
rm -rf "$assets"
mkdir -p "$assets/man" "$assets/completions"
"$bin" manpage --out-dir "$assets/man"
gzip -9n "$assets"/man/*.1
"$bin" completions bash >"$assets/completions/heartbeat-agent.bash"
"$bin" completions zsh >"$assets/completions/_heartbeat-agent"
"$bin" completions fish >"$assets/completions/heartbeat-agent.fish"
# The release profile keeps the symbol table (perf, scripts/link-order.sh); the package does not
# need it.
strip --strip-all -o "$assets/heartbeat-agent" "$bin"

# The binary is already built; --no-build keeps cargo-deb from building it a second time.
deb=$(cargo deb --no-build "$@" | tail -n 1)
unpacked=$(mktemp -d)
trap 'rm -rf "$unpacked"' EXIT
dpkg-deb -x "$deb" "$unpacked"
if readelf -S "$unpacked/usr/bin/heartbeat-agent" | grep -q '\.symtab'; then
  echo "build-deb: /usr/bin/heartbeat-agent in $deb still has its symbol table" >&2
  exit 1
fi
bash scripts/check-hardening.sh "$unpacked/usr/bin/heartbeat-agent" >&2
# Errors and warnings fail; lintian's "running with root privileges" notice is no finding.
if ! lintian --fail-on error,warning "$deb" >&2; then
  echo "build-deb: lintian found errors or warnings in $deb (above): fix them, or override one in packaging/debian/lintian-overrides with its reason" >&2
  exit 1
fi
echo "build-deb: lintian: no errors, no warnings" >&2
echo "build-deb: packaged binary stripped: $(stat -c %s "$unpacked/usr/bin/heartbeat-agent") bytes (built: $(stat -c %s "$bin"))" >&2
echo "build-deb: contents of $deb" >&2
dpkg-deb --info "$deb" >&2
dpkg-deb -c "$deb" >&2
echo "build-deb: $(du -h "$deb" | cut -f1) $deb" >&2
echo "$deb"
