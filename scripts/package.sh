#!/usr/bin/env bash
# Builds the Debian package of shaperctl from a release build: shaperctl in /usr/sbin,
# shaperctl-cni in /usr/lib/cni (Debian's CNI_PATH), the systemd units (enabled and started on
# install: shaperctl.service only acts once /etc/shaperctl/config.json exists), the man page, the
# bash completion, the configuration's JSON Schema and an example. It depends on the Debian
# libraries the binaries link (dpkg-shlibdeps) and init-system-helpers, nothing else.
#
# usage: scripts/package.sh [BUILD_DIR [OUT_DIR]]     (default: build, and BUILD_DIR)
# Prints the .deb's path. packaging/check-deb.sh installs it in a throw-away container, runs
# lintian, the units, doctor and a purge.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"
out="${2:-$build}"
for f in cli/shaperctl cni/shaperctl-cni packaging/shaperctl.8 packaging/shaperctl.bash-completion; do
  [ -f "$build/$f" ] || { echo "package: no $f in $build (make -C $build shaperctl shaperctl-cni shaperctl_docs)" >&2; exit 2; }
done
for t in dpkg-deb dpkg-shlibdeps strip gzip; do
  command -v $t >/dev/null || { echo "package: $t missing (scripts/install-deps.sh)" >&2; exit 2; }
done

version="$(sed -n 's/^project(shaperctl VERSION \([0-9.]*\).*/\1/p' "$repo/CMakeLists.txt")-1"
arch="$(dpkg --print-architecture)"
work="$(mktemp -d "${TMPDIR:-/tmp}/shaperctl-deb.XXXXXX")"
trap 'rm -rf "$work"' EXIT
root="$work/root"
doc="$root/usr/share/doc/shaperctl"
mkdir -p "$root/DEBIAN" "$root/usr/sbin" "$root/usr/lib/cni" "$root/lib/systemd/system" \
  "$root/usr/share/man/man8" "$root/usr/share/bash-completion/completions" "$root/usr/share/shaperctl" \
  "$doc/examples"

install -m 0755 "$build/cli/shaperctl" "$root/usr/sbin/shaperctl"
install -m 0755 "$build/cni/shaperctl-cni" "$root/usr/lib/cni/shaperctl-cni"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/sbin/shaperctl" "$root/usr/lib/cni/shaperctl-cni"
gzip -9n < "$build/packaging/shaperctl.8" > "$root/usr/share/man/man8/shaperctl.8.gz"
install -m 0644 "$build/packaging/shaperctl.bash-completion" "$root/usr/share/bash-completion/completions/shaperctl"
for unit in shaperctl.service shaperctl-exporter.service; do
  sed -e 's|@CMAKE_INSTALL_FULL_SBINDIR@|/usr/sbin|g' -e 's|@SHAPERCTL_CONFIG_FILE@|/etc/shaperctl/config.json|g' \
    "$repo/packaging/$unit.in" > "$root/lib/systemd/system/$unit"
done
install -m 0644 "$repo/packaging/shaperctl-config.schema.json" "$root/usr/share/shaperctl/"
install -m 0644 "$repo/packaging/config.example.json" "$doc/examples/"
install -m 0644 "$repo/packaging/debian/copyright" "$doc/copyright"
{
  echo "shaperctl ($version) unstable; urgency=medium"
  echo
  echo "  * Built from the source tree by scripts/package.sh."
  echo
  echo " -- shaperctl developers <shaperctl@lists.example.org>  $(date -R -d "@$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)")"
} | gzip -9n > "$doc/changelog.Debian.gz"
for s in postinst prerm postrm; do install -m 0755 "$repo/packaging/debian/$s" "$root/DEBIAN/$s"; done
find "$root" -type d -exec chmod 0755 {} +

# The libraries the binaries link, as dpkg-shlibdeps finds them (it wants a debian/control).
mkdir -p "$work/debian"
printf 'Source: shaperctl\n\nPackage: shaperctl\nArchitecture: any\n' > "$work/debian/control"
shlibs="$(cd "$work" && dpkg-shlibdeps -O -e root/usr/sbin/shaperctl -e root/usr/lib/cni/shaperctl-cni 2>/dev/null |
  sed -n 's/^shlibs:Depends=//p')"
size="$(du -sk --exclude=DEBIAN "$root" | cut -f1)"
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@DEPENDS@|$shlibs, init-system-helpers (>= 1.54~)|" \
  -e "s|@SIZE@|$size|" "$repo/packaging/debian/control.in" > "$root/DEBIAN/control"

mkdir -p "$out"
deb="$out/shaperctl_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
