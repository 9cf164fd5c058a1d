#!/usr/bin/env bash
# Downloads a stock Debian cloud kernel (the packages linux-image-cloud-amd64 of a suite
# depends on) and extracts vmlinuz plus its modules into a cache outside the repo.
#   bookworm          Debian 12, 6.1 (default): the machine's own apt sources, as installed
#   trixie            Debian 13, 6.12
#   trixie-backports  the newest kernel backported to Debian 13 (7.x)
#   bullseye          Debian 11, 5.10
# Suites other than bookworm come from a PRIVATE apt sources list and lists directory under
# the cache (the machine's apt configuration is never changed), on the Debian mirror the
# machine's sources name (SHAPERCTL_VM_MIRROR overrides it). Those lists are refreshed when
# a week old, on --refresh, or once when a package no longer downloads.
# Idempotent: an already extracted kernel is reused without downloading anything.
# Prints shell-sourceable lines: SUITE=, KVER=, KERNEL=, MODULES=, CACHE=.
# Errors: one line on stderr; exit 2 for usage (an unknown suite), 1 otherwise.
#
# usage: fetch-kernel.sh [--suite SUITE] [--cache DIR] [--refresh]
set -euo pipefail
# depmod lives in /usr/sbin, which a non-root PATH may lack.
export PATH="$PATH:/usr/sbin:/sbin"

suites="bookworm trixie trixie-backports bullseye"
cache="${SHAPERCTL_VM_CACHE:-/var/cache/shaperctl-vm}"
suite="${SHAPERCTL_VM_SUITE:-bookworm}"
refresh=0
meta=linux-image-cloud-amd64

usage() { sed -n '16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --cache) [ $# -ge 2 ] || usage; cache="$2"; shift 2 ;;
    --suite) [ $# -ge 2 ] || usage; suite="$2"; shift 2 ;;
    --refresh) refresh=1; shift ;;
    -h|--help) usage ;;
    *) usage ;;
  esac
done

log() { echo "fetch-kernel: $*" >&2; }
die() { log "$*"; exit 1; }
case " $suites " in
  *" $suite "*) ;;
  *) log "unknown suite '$suite' (one of: $suites)"; exit 2 ;;
esac

# --- apt, private for every suite but bookworm ------------------------------

# The Debian mirror and security mirror the machine's apt sources use (one-line .list and
# deb822 .sources files), else deb.debian.org.
machine_mirrors() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk '$1 == "deb" { i = 2; if ($2 ~ /^\[/) while (i <= NF && $i !~ /\]$/) i++
                       if ($2 ~ /^\[/) i++
                       print $i, $(i + 1) }' "$f"
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    # deb822: stanzas separated by blank lines; Enabled: no skips one.
    awk 'function flush() { if (types ~ /(^| )deb( |$)/ && enabled != "no")
                              for (u in U) for (s in S) print U[u], S[s]
                            types = ""; enabled = ""; delete U; delete S }
         /^[ \t]*$/ { flush(); next }
         /^#/ { next }
         tolower($1) == "types:" { types = $0 }
         tolower($1) == "enabled:" { enabled = tolower($2) }
         tolower($1) == "uris:" { for (i = 2; i <= NF; i++) U[i] = $i }
         tolower($1) == "suites:" { for (i = 2; i <= NF; i++) S[i] = $i }
         END { flush() }' "$f"
  done
}
if [ -n "${SHAPERCTL_VM_MIRROR:-}" ]; then
  mirror="$SHAPERCTL_VM_MIRROR" security="${SHAPERCTL_VM_MIRROR%/}-security"
else
  # "URI SUITE" lines of Debian codenames; a -security suite names the security mirror.
  found="$(machine_mirrors | grep -E ' (buster|bullseye|bookworm|trixie|forky|sid|stable|oldstable|testing|unstable)(-[a-z]+)?/?$' || true)"
  mirror="$(awk '$2 !~ /-security/ { print $1; exit }' <<<"$found")"
  mirror="${mirror:-http://deb.debian.org/debian}"
  security="$(awk '$2 ~ /-security/ { print $1; exit }' <<<"$found")"
  security="${security:-${mirror%/}-security}"
fi
mirror="${mirror%/}" security="${security%/}"

keyring=/usr/share/keyrings/debian-archive-keyring.gpg
case "$suite" in
  bookworm) dists="" ;;
  trixie) dists="$mirror trixie|$security trixie-security" ;;
  trixie-backports) dists="$mirror trixie-backports" ;;
  bullseye) dists="$mirror bullseye|$security bullseye-security" ;;
esac

apt_opts=()
aptdir="$cache/apt/$suite"
if [ -n "$dists" ]; then
  apt_opts=(-o "Dir::Etc::sourcelist=$aptdir/sources.list" -o Dir::Etc::sourceparts=/dev/null
            -o "Dir::State::Lists=$aptdir/lists" -o "Dir::Cache=$aptdir/cache"
            -o Acquire::Languages=none -o Acquire::Retries=1 -o Acquire::http::Timeout=30)
  # As root apt downloads as _apt, which cannot write into a root-owned cache.
  [ "$(id -u)" -ne 0 ] || apt_opts+=(-o APT::Sandbox::User=root)
fi
# apt with this suite's lists; stderr and warnings kept for the caller.
apt_q() { local c="$1"; shift; "$c" ${apt_opts[@]+"${apt_opts[@]}"} "$@"; }

ensure_writable_cache() {
  if ! mkdir -p "$cache" 2>/dev/null || [ ! -w "$cache" ]; then
    die "cache $cache is not writable; set SHAPERCTL_VM_CACHE or run as root"
  fi
}
# One process at a time downloads or extracts; the others wait and reuse.
locked=0
lock_cache() {
  [ "$locked" = 1 ] && return
  ensure_writable_cache
  exec 9>"$cache/.fetch.lock"
  flock -w 900 9 || die "another fetch-kernel.sh has held $cache/.fetch.lock for 15 minutes"
  locked=1
}

sources_list() {
  tr '|' '\n' <<<"$dists" |
    awk -v k="$keyring" '{ print "deb [signed-by=" k "] " $1 " " $2 " main" }'
}
# apt's reason for a failure, in one line, from its output ($1).
apt_reason() {
  { grep -E '^E: ' <<<"$1"; grep -E '^W: (Failed|The repository|GPG)' <<<"$1"; grep -E '^Err' <<<"$1"
    tail -n1 <<<"$1"; } | head -n1 | sed -E 's/^[EW]: //; s/[[:space:]]+/ /g' | cut -c1-300
}
# Fetches this suite's package lists into the private directory. On failure returns 1 with
# apt's reason in $apt_error (apt-get update exits 0 when a mirror is unreachable).
apt_error=""
update_lists() {
  local out
  lock_cache
  mkdir -p "$aptdir/lists/partial" "$aptdir/cache/archives/partial"
  sources_list > "$aptdir/sources.list"
  log "fetching the $suite package lists from $mirror"
  if ! out="$(timeout 300 apt-get "${apt_opts[@]}" -q update 2>&1)" ||
     grep -Eq '^(E: |W: (Failed|The repository|GPG))' <<<"$out"; then
    apt_error="$(apt_reason "$out")"
    return 1
  fi
  touch "$aptdir/updated"
}
# The lists on disk are of this suite on this mirror ...
lists_match() {
  [ -f "$aptdir/updated" ] && [ "$(cat "$aptdir/sources.list" 2>/dev/null)" = "$(sources_list)" ]
}
# ... and under a week old.
lists_fresh() { lists_match && [ -n "$(find "$aptdir/updated" -mtime -7)" ]; }

# The concrete image package, e.g. linux-image-6.1.0-57-cloud-amd64.
resolve_pkg() {
  apt_q apt-cache depends "$meta" 2>/dev/null |
    awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9].*-cloud-amd64$/ { print $2; exit }'
}
# The image package and the packages of the same kernel it depends on, transitively (the 7.x
# backports' image is empty and depends on linux-binary-* (vmlinuz), linux-modules-* and
# linux-base-* (config, modules.builtin); 5.10-6.12 images hold everything).
package_set() {
  local abi="${1#linux-image-}" todo=("$1") seen=" " p
  while [ ${#todo[@]} -gt 0 ]; do
    p="${todo[0]}" todo=("${todo[@]:1}")
    case "$seen" in *" $p "*) continue ;; esac
    seen="$seen$p "
    echo "$p"
    while IFS= read -r p; do todo+=("$p"); done < <(
      apt_q apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks \
        --no-replaces --no-enhances "$p" 2>/dev/null |
      awk -v abi="$abi" '($1 == "Depends:" || $1 == "PreDepends:") && $2 ~ /^linux-/ &&
        length($2) > length(abi) && substr($2, length($2) - length(abi)) == "-" abi { print $2 }')
  done
}

refreshed=0 lists_error=""
if [ -n "$dists" ] && { [ "$refresh" = 1 ] || ! lists_fresh; }; then
  had_lists=0
  lists_match && had_lists=1
  if update_lists; then
    refreshed=1
  elif [ "$had_lists" = 1 ]; then
    log "cannot refresh the $suite package lists ($apt_error); using the ones from $(date -r "$aptdir/updated" +%F)"
  else
    lists_error="cannot fetch the $suite package lists from $mirror: $apt_error"
  fi
fi

pkg=""
[ -n "$lists_error" ] || pkg="$(resolve_pkg || true)"
if [ -z "$pkg" ] && [ -z "$dists" ]; then
  # A fresh machine may have empty package lists; refresh once (needs root).
  if ! apt-cache show "$meta" >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
    log "apt knows nothing about $meta; running apt-get update"
    apt-get update -qq >&2 || true
    pkg="$(resolve_pkg || true)"
  fi
fi
# Kernels extracted for this suite (a cache from before suites existed holds bookworm's).
cached_for_suite() {
  local d
  for d in "$cache"/linux-image-*-cloud-amd64; do
    [ -f "$d/.extracted" ] || continue
    if [ -f "$d/suite" ]; then grep -qx "$suite" "$d/suite" || continue
    else [ "$suite" = bookworm ] || continue; fi
    basename "$d"
  done
}
if [ -z "$pkg" ]; then
  # Offline or no apt: fall back to the newest kernel of this suite already in the cache.
  pkg="$(cached_for_suite 2>/dev/null | sort -V | tail -n1 || true)"
  [ -n "$pkg" ] || die "${lists_error:-cannot resolve the package behind $meta for $suite (no apt data)}; no $suite kernel cached in $cache"
  log "${lists_error:-apt could not resolve $meta for $suite}; using cached $pkg"
fi

# Downloads the package set of $pkg into $1; on failure returns 1 with apt's error in
# $apt_error.
download() {
  local out pkgs
  mapfile -t pkgs < <(package_set "$pkg")
  log "downloading ${pkgs[*]}"
  # apt-get download writes to the cwd; as root it warns about the _apt sandbox.
  if ! out="$(cd "$1" && timeout 600 apt-get ${apt_opts[@]+"${apt_opts[@]}"} -q download "${pkgs[@]}" 2>&1)"; then
    apt_error="$(apt_reason "$out")"
    return 1
  fi
}

# Moves the kernel out of an extracted package tree ($1) into $2; prints its version.
install_tree() {
  local root="$1" dest="$2" kver mods
  for mods in "$root/lib/modules" "$root/usr/lib/modules"; do
    [ -d "$mods" ] || continue
    kver="$(find "$mods" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | head -n1)"
    [ -n "$kver" ] && break
  done
  [ -n "$kver" ] || return 1
  mods="$mods/$kver"
  rm -rf "$dest"
  mkdir -p "$dest/lib/modules"
  if [ -f "$root/boot/vmlinuz-$kver" ]; then mv "$root/boot/vmlinuz-$kver" "$dest/vmlinuz"
  elif [ -f "$mods/vmlinuz" ]; then mv "$mods/vmlinuz" "$dest/vmlinuz"
  else return 1; fi
  if [ -f "$root/boot/config-$kver" ]; then mv "$root/boot/config-$kver" "$dest/config"
  elif [ -f "$mods/config" ]; then mv "$mods/config" "$dest/config"; fi
  rm -f "$mods/System.map"
  mv "$mods" "$dest/lib/modules/$kver"
  echo "$kver"
}

dest="$cache/$pkg"
[ -f "$dest/.extracted" ] || lock_cache
if [ ! -f "$dest/.extracted" ]; then
  tmp="$(mktemp -d "$cache/.fetch.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  if ! download "$tmp"; then
    # Lists older than the mirror name a package it has dropped: refresh them, once.
    first_error="$apt_error" first_pkg="$pkg"
    if [ -n "$dists" ] && [ "$refreshed" = 0 ] && update_lists && pkg="$(resolve_pkg)" &&
       [ -n "$pkg" ] && dest="$cache/$pkg" && rm -f "$tmp"/*.deb && download "$tmp"; then
      :
    else
      from="$mirror"
      [ -n "$dists" ] || from="the apt sources of this machine"
      die "cannot download $first_pkg ($suite) from $from: $first_error"
    fi
  fi
fi
if [ ! -f "$dest/.extracted" ]; then
  debs=("$tmp"/*.deb)
  [ -f "${debs[0]}" ] || die "apt-get download of $pkg produced no .deb"
  mkdir "$tmp/root"
  for deb in "${debs[@]}"; do
    log "extracting $(basename "$deb")"
    dpkg-deb -x "$deb" "$tmp/root"
  done
  kver="$(install_tree "$tmp/root" "$dest")" ||
    die "unexpected layout of $pkg: no vmlinuz or no modules directory in ${debs[*]##*/}"
  # The package ships no modules.dep (postinst runs depmod); build it here. Modules keep
  # the names they ship with (.ko, .ko.xz, .ko.zst); build-initramfs.sh decompresses.
  depmod -b "$dest" "$kver"
  echo "$kver" > "$dest/kver"
  echo "$suite" > "$dest/suite"
  touch "$dest/.extracted"
  rm -rf "$tmp"
  trap - EXIT
elif [ -f "$dest/suite" ] && ! grep -qx "$suite" "$dest/suite" && [ -w "$dest/suite" ]; then
  # The same package in another suite (a point release in backports too): both find it.
  echo "$suite" >> "$dest/suite"
fi

kver="$(cat "$dest/kver")"
echo "SUITE=$suite"
echo "CACHE=$cache"
echo "KVER=$kver"
echo "KERNEL=$dest/vmlinuz"
echo "MODULES=$dest/lib/modules/$kver"
