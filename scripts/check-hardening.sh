#!/usr/bin/env bash
# Checks that an ELF executable is built as every distribution builds a program that parses
# network input: position-independent (PIE: ELF type DYN with the PIE flag, so the loader places
# its image at a random address), with full RELRO (a GNU_RELRO segment: the relocated data is
# made read-only after start) and BIND_NOW (every symbol bound at start, so the whole GOT can
# be read-only). rustc links Linux binaries this way by default; build.rs must not change it.
# Prints one line per property and fails naming each one that is missing.
#
# Usage: scripts/check-hardening.sh BINARY
# Needs readelf (binutils). scripts/build-deb.sh runs it on the packaged binary,
# tests/packaging.rs on the binary the tests run.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 BINARY" >&2; exit 2; }
bin=$1
command -v readelf >/dev/null || { echo "check-hardening: readelf (binutils) is required" >&2; exit 1; }
[ -f "$bin" ] || { echo "check-hardening: $bin does not exist" >&2; exit 1; }
export LC_ALL=C
header=$(readelf --file-header "$bin") || { echo "check-hardening: $bin is not an ELF file" >&2; exit 1; }
segments=$(readelf --program-headers --wide "$bin")
dynamic=$(readelf --dynamic --wide "$bin")

missing=()
# check NAME WHAT-IT-MEANS CONDITION-RESULT
check() {
  if [ "$3" = yes ]; then
    echo "check-hardening: $bin: $1: yes"
  else
    echo "check-hardening: $bin: $1: NO ($2)" >&2
    missing+=("$1")
  fi
}
yes_if() { if "$@" >/dev/null; then echo yes; else echo no; fi; }
check PIE "ELF type is not DYN with the PIE flag; something linked it with -no-pie" \
  "$( (grep -Eq 'Type:[[:space:]]+DYN' <<<"$header" && grep -Eq 'FLAGS_1.*PIE' <<<"$dynamic") && echo yes || echo no)"
check RELRO "no GNU_RELRO segment; something linked it with -z norelro" \
  "$(yes_if grep -q 'GNU_RELRO' <<<"$segments")"
check BIND_NOW "no BIND_NOW in the dynamic section; something linked it with -z lazy" \
  "$( (grep -Eq '\(FLAGS\).*BIND_NOW' <<<"$dynamic" || grep -Eq 'FLAGS_1.*NOW' <<<"$dynamic") && echo yes || echo no)"
if [ ${#missing[@]} -gt 0 ]; then
  echo "check-hardening: $bin lacks ${missing[*]}: link it as rustc does by default (PIE, -z relro -z now); see build.rs" >&2
  exit 1
fi
