#!/usr/bin/env bash
# Makes the compiler that rust-toolchain.toml pins available under its release number, without
# downloading anything. rustup looks the pin up as `<version>-<host>`; a machine whose rustup
# holds that same release only as `stable` gets the name as a link to it. Anything else (another
# release installed, or none) fails with a message: install the pinned release, or update the pin
# and regenerate the link-order list (docs/packaging.md).
set -euo pipefail
cd "$(dirname "$0")/.."
pin=$(sed -n 's/^channel = "\(.*\)"$/\1/p' rust-toolchain.toml)
home=$(rustup show home)
shopt -s nullglob
for stable in "$home"/toolchains/stable-*; do
  host=${stable##*/stable-}
  wanted="$home/toolchains/$pin-$host"
  [ -e "$wanted" ] && exit 0
  # The toolchain's own rustc, not the rustup proxy (which would resolve the missing pin).
  if "$stable/bin/rustc" --version | grep -q "^rustc $pin "; then
    ln -s "$stable" "$wanted"
    echo "toolchain: $pin-$host is the installed stable; linked it under that name"
    exit 0
  fi
done
[ -n "$(compgen -G "$home/toolchains/$pin-*")" ] && exit 0
echo "toolchain: rust-toolchain.toml pins $pin, which is not installed (and stable is another release)" >&2
exit 1
