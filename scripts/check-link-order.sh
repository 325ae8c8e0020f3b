#!/usr/bin/env bash
# Checks that packaging/link/run.order, packaging/link/daemon.order and packaging/link/data.order
# still belong to the code: the release binary's symbol table must hold at least 98 % of each
# function list's names; the data list's sections are counted in its link (lld's map) and a
# stale data list is reported without failing (see below). The names carry compiler hashes, which
# change with the code, the toolchain and Cargo.lock; a name that is gone is skipped by the
# linker, so a stale list does not fail the build, it only lets `run`'s memory grow back
# (BENCHMARKS.md, "run wrapper overhead"). Below the threshold this fails and prints the
# command that regenerates the list.
#
# Usage: scripts/check-link-order.sh [BINARY]
#   BINARY defaults to target/release/heartbeat-agent (under $CARGO_TARGET_DIR if set), the
#   binary scripts/build-deb.sh builds; it must keep its symbol table (the release profile's
#   `strip = "debuginfo"` does). LINK_ORDER_MIN_PERCENT changes the threshold (default 98).
set -euo pipefail
cd "$(dirname "$0")/.."

MIN="${LINK_ORDER_MIN_PERCENT:-98}"
BIN="${1:-${CARGO_TARGET_DIR:-$PWD/target}/release/heartbeat-agent}"
REGENERATE="bash scripts/link-order.sh"

# build.rs hands the list to the linker only on x86_64 Linux with glibc (rustc's own lld).
if [ "$(uname -sm)" != "Linux x86_64" ]; then
  echo "check-link-order: the list is used on x86_64 Linux only; nothing to check on $(uname -sm)"
  exit 0
fi
command -v nm >/dev/null || { echo "check-link-order: nm (binutils) is required" >&2; exit 1; }
[ -f "$BIN" ] || { echo "check-link-order: $BIN does not exist; build it first (cargo build --release)" >&2; exit 1; }

export LC_ALL=C
symbols=$(nm --defined-only "$BIN" 2>/dev/null | awk '{print $NF}' | sort -u)
if [ -z "$symbols" ]; then
  echo "check-link-order: $BIN has no symbol table (stripped?); the check needs it" >&2
  exit 1
fi
stale=0
# Judges one list: judge LIST FOUND TOTAL WHAT WHERE.
judge() {
  if [ "$3" -eq 0 ]; then
    echo "check-link-order: $1 lists no $4; regenerate it with: $REGENERATE" >&2
    exit 1
  fi
  percent=$(awk -v f="$2" -v t="$3" 'BEGIN { printf "%.1f", 100 * f / t }')
  echo "link order: $2 of $3 $4 of $1 are in $5 ($percent %, at least $MIN % required)"
  if [ $(($2 * 100)) -lt $(($3 * MIN)) ]; then
    echo "check-link-order: $1 is stale (the code, Cargo.lock or the toolchain changed)." >&2
    stale=1
  fi
}
for ORDER in packaging/link/run.order packaging/link/daemon.order; do
  listed=$(grep -v -e '^#' -e '^$' "$ORDER" | sort -u)
  total=$(printf '%s\n' "$listed" | grep -c . || true)
  found=$(comm -12 <(printf '%s\n' "$listed") <(printf '%s\n' "$symbols") | grep -c . || true)
  judge "$ORDER" "$found" "$total" names "$BIN"
done
# The data list names input sections, which leave no trace in the binary: it is checked against
# lld's map of the same link (build.rs writes it for release builds), name and size. Its names
# are numbered in the order the compiler emits the constants (`.Lanon.<hash>.<n>`), so almost
# any change to the code renumbers them (a 30-line change to src/config left 457 of 1,123): a
# stale data list is reported, not failed, or every code change would have to regenerate it.
# It costs memory only (about 0.6 MiB of an http `run`), which scripts/bench.sh shows.
DATA=packaging/link/data.order
read -r found total < <(python3 scripts/lib/data_order.py check "$DATA" "$BIN") || {
  echo "check-link-order: cannot check $DATA without the linker map of $BIN" >&2
  exit 1
}
functions_stale=$stale
judge "$DATA" "$found" "$total" sections "its link"
if [ "$stale" = 1 ] && [ "$functions_stale" = 0 ]; then
  echo "check-link-order: warning: $DATA is stale; before measuring memory, regenerate it with: $REGENERATE" >&2
  stale=0
fi
if [ "$stale" = 1 ]; then
  echo "check-link-order: regenerate the lists and commit the result:" >&2
  echo "    $REGENERATE" >&2
  exit 1
fi
