#!/usr/bin/env bash
# Downloads Debian 12's stock cloud kernel (the package linux-image-cloud-amd64
# depends on) and extracts vmlinuz plus its modules into a cache outside the repo.
# Idempotent: an already extracted kernel is reused without touching apt.
# Prints shell-sourceable lines: KVER=, KERNEL=, MODULES=, CACHE=.
set -euo pipefail
# depmod lives in /usr/sbin, which a non-root PATH may lack.
export PATH="$PATH:/usr/sbin:/sbin"

cache="${SHAPERCTL_VM_CACHE:-/var/cache/shaperctl-vm}"
meta=linux-image-cloud-amd64

usage() { echo "usage: $0 [--cache DIR]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --cache) [ $# -ge 2 ] || usage; cache="$2"; shift 2 ;;
    -h|--help) usage ;;
    *) usage ;;
  esac
done

log() { echo "fetch-kernel: $*" >&2; }

# The concrete image package, e.g. linux-image-6.1.0-57-cloud-amd64.
resolve_pkg() {
  apt-cache depends "$meta" 2>/dev/null |
    awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9].*-cloud-amd64$/ { print $2; exit }'
}

pkg="$(resolve_pkg || true)"
if [ -z "$pkg" ]; then
  # A fresh machine may have empty package lists; refresh once (needs root).
  if ! apt-cache show "$meta" >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
    log "apt knows nothing about $meta; running apt-get update"
    apt-get update -qq >&2 || true
    pkg="$(resolve_pkg || true)"
  fi
fi
if [ -z "$pkg" ]; then
  # Offline or no apt: fall back to the newest kernel already in the cache.
  pkg="$(find "$cache" -mindepth 1 -maxdepth 1 -type d -name 'linux-image-*-cloud-amd64' \
           -exec test -f '{}/.extracted' ';' -printf '%f\n' 2>/dev/null | sort -V | tail -n1 || true)"
  [ -n "$pkg" ] || { log "cannot resolve the package behind $meta (no apt data, empty cache)"; exit 1; }
  log "apt could not resolve $meta; using cached $pkg"
fi

dest="$cache/$pkg"
if [ ! -f "$dest/.extracted" ]; then
  if ! mkdir -p "$cache" 2>/dev/null || [ ! -w "$cache" ]; then
    log "cache $cache is not writable; set SHAPERCTL_VM_CACHE or run as root"; exit 1
  fi
  # Concurrent first runs: one downloads, the others wait and reuse.
  exec 9>"$cache/.fetch.lock"
  flock 9
fi
if [ ! -f "$dest/.extracted" ]; then
  tmp="$(mktemp -d "$cache/.fetch.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  log "downloading $pkg"
  # apt-get download writes to the cwd; as root it warns about the _apt sandbox.
  (cd "$tmp" && apt-get download -q "$pkg" >&2 2> >(grep -v 'unsandboxed as root' >&2))
  deb="$(find "$tmp" -maxdepth 1 -name '*.deb' | head -n1)"
  [ -n "$deb" ] || { log "apt-get download produced no .deb"; exit 1; }
  log "extracting $(basename "$deb")"
  dpkg-deb -x "$deb" "$tmp/root"
  kver="$(find "$tmp/root/lib/modules" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | head -n1)"
  if [ -z "$kver" ] || [ ! -f "$tmp/root/boot/vmlinuz-$kver" ]; then
    log "unexpected package layout"; exit 1
  fi
  rm -rf "$dest"
  mkdir -p "$dest/lib/modules"
  mv "$tmp/root/boot/vmlinuz-$kver" "$dest/vmlinuz"
  [ -f "$tmp/root/boot/config-$kver" ] && mv "$tmp/root/boot/config-$kver" "$dest/config"
  mv "$tmp/root/lib/modules/$kver" "$dest/lib/modules/$kver"
  # The package ships no modules.dep (postinst runs depmod); build it here.
  depmod -b "$dest" "$kver"
  echo "$kver" > "$dest/kver"
  touch "$dest/.extracted"
  rm -rf "$tmp"
  trap - EXIT
fi

kver="$(cat "$dest/kver")"
echo "CACHE=$cache"
echo "KVER=$kver"
echo "KERNEL=$dest/vmlinuz"
echo "MODULES=$dest/lib/modules/$kver"
