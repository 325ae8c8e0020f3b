#!/usr/bin/env bash
# Builds the RPM (RHEL, Rocky, Alma, Fedora) from the .deb: the same stripped binary, systemd
# unit, config (0640 root:heartbeat-agent, kept on upgrade), drop-in and docs, man pages and
# completions, so the two packages cannot differ. Without an argument it runs
# scripts/build-deb.sh first (its release build is the only one; when the binary is up to date
# that is a few seconds); with a .deb it packages that one. The files are laid out as RPM
# systems expect them (zsh completion in site-functions, a sysusers.d file for the user), the
# spec is packaging/rpm/heartbeat-agent.spec. Then rpmlint must report no errors, and the
# listing is printed (`rpm -qlvp`).
#
# Usage: scripts/build-rpm.sh [DEB]
# Prints the path of the .rpm on the last line (target/rpm/). Needs rpmbuild and rpmlint
# (Debian's `rpm` and `rpmlint`: scripts/test-tools.sh installs them as root).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v rpmbuild >/dev/null 2>&1 || ! command -v rpmlint >/dev/null 2>&1; then
  bash scripts/test-tools.sh
  if ! command -v rpmbuild >/dev/null 2>&1 || ! command -v rpmlint >/dev/null 2>&1; then
    echo "build-rpm: rpmbuild and rpmlint not found: run scripts/test-tools.sh as root (Debian's rpm and rpmlint)" >&2
    exit 2
  fi
fi

deb=${1:-}
if [ -z "$deb" ]; then
  deb=$(bash scripts/build-deb.sh | tail -n 1)
fi
[ -f "$deb" ] || { echo "build-rpm: no .deb at $deb (scripts/build-deb.sh builds one)" >&2; exit 1; }

version=$(dpkg-deb -f "$deb" Version)
case "$(dpkg-deb -f "$deb" Architecture)" in
  amd64) arch=x86_64 ;;
  arm64) arch=aarch64 ;;
  *) arch=$(dpkg-deb -f "$deb" Architecture) ;;
esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
payload=$work/payload
dpkg-deb -x "$deb" "$payload"
# Where RPM systems look: zsh's site-functions (Debian's vendor-completions is Debian's own).
mkdir -p "$payload/usr/share/zsh/site-functions"
mv "$payload/usr/share/zsh/vendor-completions/_heartbeat-agent" "$payload/usr/share/zsh/site-functions/"
rmdir "$payload/usr/share/zsh/vendor-completions"
# Debian's own: lintian's overrides (rpmlint has its filters in packaging/rpm/rpmlint.toml).
rm -rf "$payload/usr/share/lintian"
install -D -m 0644 packaging/rpm/heartbeat-agent.sysusers "$payload/usr/lib/sysusers.d/heartbeat-agent.conf"

out=$PWD/target/rpm
mkdir -p "$out"
rpmbuild -bb packaging/rpm/heartbeat-agent.spec \
  --target "$arch" \
  --define "_topdir $work/rpmbuild" \
  --define "_rpmdir $out" \
  --define "_build_name_fmt %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm" \
  --define "payload $payload" \
  --define "pkg_version ${version%-*}" \
  --define "pkg_release ${version##*-}" \
  --define "pkg_date $(date -u +'%a %b %d %Y')" >"$work/rpmbuild.log" 2>&1 || {
  cat "$work/rpmbuild.log" >&2
  exit 1
}
rpm=$out/heartbeat-agent-${version}.${arch}.rpm

echo "build-rpm: rpmlint $rpm" >&2
rpmlint --config packaging/rpm/rpmlint.toml "$rpm" >&2
echo "build-rpm: contents of $rpm" >&2
rpm -qip "$rpm" >&2
rpm -qp --scripts "$rpm" >&2
rpm -qlvp "$rpm" >&2
echo "build-rpm: $(du -h "$rpm" | cut -f1) $rpm" >&2
echo "$rpm"
