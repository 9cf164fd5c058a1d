#!/usr/bin/env bash
# Builds the initramfs for the stock-kernel VM: busybox, the real iproute2/iperf3/
# ping (+ethtool, bpftool, jq if present) with their shared libraries, a set of
# kernel modules with their dependencies, and an /init that runs /scenario.sh.
#
# The output is two concatenated uncompressed cpio archives (the kernel accepts
# that): a cached base with everything above, and a small per-run overlay with
# the scenario, its arguments, --bin binaries and --file copies. Uncompressed:
# boot time measured the same with gzip or zstd, so compressing only costs time.
#
# usage: build-initramfs.sh --out FILE [--modules DIR] [--module NAME]...
#          [--bin PATH]... [--file SRC:DEST]... [--no-cache] [SCENARIO.sh [ARGS...]]
set -euo pipefail
# depmod lives in /usr/sbin, which a non-root PATH may lack.
export PATH="$PATH:/usr/sbin:/sbin"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${SHAPERCTL_VM_CACHE:-/var/cache/shaperctl-vm}"

# Loaded at boot (deps first). Names missing from this kernel are skipped with
# a note: some are built in (sch_fq_codel, sch_mq), act_bpf may not exist.
modules=(
  sch_fq sch_htb sch_tbf sch_ingress sch_fq_codel sch_netem sch_prio sch_sfq
  sch_cake sch_mqprio cls_bpf act_bpf cls_u32 cls_fw cls_matchall cls_flower
  act_mirred act_gact veth ifb tcp_bbr tun ip_gre inet_diag tcp_diag
)
# Real tools: host path -> initramfs path. Optional ones are skipped if absent.
required_tools=(/usr/sbin/ip /usr/sbin/tc /usr/bin/ss /usr/bin/iperf3 /usr/bin/ping)
optional_tools=(/usr/sbin/ethtool /usr/sbin/bpftool /usr/bin/jq)
# busybox applets that would shadow the real tools (and /init itself).
skip_applets=(ip tc ss ping ping6 iperf3 ethtool bpftool jq init linuxrc)

out="" moddir="" use_cache=1
bins=() files=() scenario="" scenario_args=()

usage() { sed -n '11,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
die() { echo "build-initramfs: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    --out) [ $# -ge 2 ] || usage; out="$2"; shift 2 ;;
    --modules) [ $# -ge 2 ] || usage; moddir="$2"; shift 2 ;;
    --module) [ $# -ge 2 ] || usage; modules+=("$2"); shift 2 ;;
    --bin) [ $# -ge 2 ] || usage; bins+=("$2"); shift 2 ;;
    --file) [ $# -ge 2 ] || usage; files+=("$2"); shift 2 ;;
    --no-cache) use_cache=0; shift ;;
    -h|--help) usage ;;
    --) shift; break ;;
    -*) usage ;;
    *) break ;;
  esac
done
if [ $# -gt 0 ]; then scenario="$1"; shift; scenario_args=("$@"); fi
[ -n "$out" ] || usage

if [ -z "$moddir" ]; then
  moddir="$("$here/fetch-kernel.sh" | sed -n 's/^MODULES=//p')"
fi
[ -f "$moddir/modules.dep" ] || die "no modules.dep in '$moddir'"
kver="$(basename "$moddir")"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/shaperctl-initramfs.XXXXXX")"
base_tmp=""
trap 'rm -rf "$tmp" ${base_tmp:+"$base_tmp"}' EXIT

# --- helpers --------------------------------------------------------------

# Prints the shared libraries (absolute paths, loader included) of an ELF file.
# Static binaries print nothing. ldd is fine here: we only run it on our tools.
libs_of() {
  local f="$1"
  file_is_dynamic "$f" || return 0
  ldd "$f" 2>/dev/null | awk '
    $2 == "=>" && $3 ~ /^\// { print $3; next }
    $1 ~ /^\// { print $1 }'
}
file_is_dynamic() {
  # ELF magic first: never hand a script to ldd. ldd fails on static binaries.
  [ "$(head -c4 "$1" | od -An -c | tr -d ' ')" = "177ELF" ] && ldd "$1" >/dev/null 2>&1
}

# Copies a host file to the same or a given path under a staging root,
# dereferencing symlinks (libraries are usually reached through one).
put() {
  local root="$1" src="$2" dest="${3:-$2}"
  mkdir -p "$root$(dirname "$dest")"
  cp -L --preserve=mode "$src" "$root$dest"
}

# Copies a binary plus its libraries. System libraries keep their path; others
# (a build tree's, reached through RUNPATH, maybe under /tmp which the guest
# mounts over) go to /usr/local/lib, which /init puts on LD_LIBRARY_PATH.
put_bin() {
  local root="$1" src="$2" dest="$3" lib to
  [ -f "$src" ] || die "binary not found: $src"
  put "$root" "$src" "$dest"
  chmod 0755 "$root$dest"
  while IFS= read -r lib; do
    case "$lib" in
      /lib/*|/lib64/*|/usr/lib/*|/usr/lib64/*) to="$lib" ;;
      *) to="/usr/local/lib/${lib##*/}" ;;
    esac
    [ -e "$root$to" ] || put "$root" "$lib" "$to"
  done < <(libs_of "$src")
}

# Module paths (one a line) with .ko.xz/.ko.zst/.ko.gz renamed .ko.
plain_ko() { sed -E 's/\.ko\.(xz|zst|gz)$/.ko/' <<<"$1"; }
# Copies a module to DEST under a staging root, decompressing it.
put_module() {
  local root="$1" src="$2" dest="$3"
  mkdir -p "$root$(dirname "$dest")"
  case "$src" in
    *.ko.xz) xz -dc "$src" > "$root$dest" ;;
    *.ko.zst) zstd -qdc "$src" > "$root$dest" ;;
    *.ko.gz) gzip -dc "$src" > "$root$dest" ;;
    *) put "$root" "$src" "$dest" ;;
  esac
}

# Resolves module names to .ko paths (relative to $moddir), dependencies first.
resolve_modules() {
  awk -v want="$*" '
    function norm(s) { gsub("-", "_", s); return s }
    function base(p,  n) { n = split(p, a, "/"); sub(/\.ko(\.[a-z]+)?$/, "", a[n]); return norm(a[n]) }
    function visit(p,  i, n, d) {
      if (p in seen) return
      seen[p] = 1
      n = split(deps[p], d, " ")
      for (i = 1; i <= n; i++) visit(d[i])
      print p
    }
    {
      p = $1; sub(/:$/, "", p)
      deps[p] = ""
      for (i = 2; i <= NF; i++) deps[p] = deps[p] " " $i
      byname[base(p)] = p
    }
    END {
      n = split(want, w, " ")
      for (i = 1; i <= n; i++) {
        m = norm(w[i])
        if (m in byname) visit(byname[m])
        else print "missing " m > "/dev/stderr"
      }
    }' "$moddir/modules.dep"
}

# Single-quotes each argument for a POSIX shell (busybox ash evals it).
sh_quote() {
  local a
  for a in "$@"; do printf "'%s' " "${a//\'/\'\\\'\'}"; done
}

mkcpio() { (cd "$1" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet); }

# --- base archive ---------------------------------------------------------

tools=()
for t in "${required_tools[@]}"; do
  [ -x "$t" ] || die "missing $t (run scripts/install-deps.sh)"
  tools+=("$t")
done
for t in "${optional_tools[@]}"; do [ -x "$t" ] && tools+=("$t"); done
busybox="$(command -v busybox || true)"
[ -n "$busybox" ] || die "busybox not found (install busybox-static)"
file_is_dynamic "$busybox" && die "$busybox is dynamic; install busybox-static"

modlist="$(resolve_modules "${modules[@]}" 2> "$tmp/missing")"

# Cache key: this script (it embeds /init), kernel, modules, and the identity
# (path, size, mtime) of every host file copied into the base.
manifest() {
  local f t libs
  sha256sum < "$0"
  echo "$kver"
  echo "$modlist"
  mapfile -t libs < <(for t in "${tools[@]}"; do libs_of "$t"; done | sort -u)
  for f in "$busybox" "${tools[@]}" "${libs[@]}" "$moddir/modules.dep"; do
    stat -L -c '%n %s %Y' "$f"
  done
}
key="$(manifest | sha256sum | cut -c1-16)"
base="$cache/initramfs/base-$kver-$key.cpio"

report_missing_modules() {
  local builtin_list m
  builtin_list="$(sed 's,.*/,,; s/\.ko$//' "$moddir/modules.builtin" | tr '-' '_')"
  while read -r _ m; do
    if grep -qx "$m" <<<"$builtin_list"; then
      echo "build-initramfs: $m is built into $kver" >&2
    else
      echo "build-initramfs: $m does not exist in $kver; skipped" >&2
    fi
  done < "$tmp/missing"
}

# Writes the base archive to $1.
build_base() {
  local root="$tmp/base" a name t dist
  rm -rf "$root"
  report_missing_modules
  mkdir -p "$root"
  (cd "$root" && mkdir -p bin sbin lib lib64 usr/bin usr/sbin usr/lib usr/local/bin \
    usr/local/sbin etc dev proc sys tmp run root mnt var/tmp "lib/modules/$kver" etc/shaperctl-vm)
  # The kernel opens /dev/console before /init runs; devtmpfs is not yet
  # mounted then (CONFIG_DEVTMPFS_MOUNT only covers real root filesystems).
  mknod -m 600 "$root/dev/console" c 5 1 2>/dev/null || true

  put "$root" "$busybox" /bin/busybox
  for t in "${tools[@]}"; do put_bin "$root" "$t" "$t"; done
  while IFS= read -r a; do
    name="${a##*/}"
    case " ${skip_applets[*]} " in *" $name "*) continue ;; esac
    if [ -e "$root/$a" ] || [ -L "$root/$a" ]; then continue; fi
    mkdir -p "$root/$(dirname "$a")"
    ln -s /bin/busybox "$root/$a"
  done < <("$busybox" --list-full)

  # tc netem jitter distributions and iproute2 name tables.
  for dist in /usr/lib/x86_64-linux-gnu/tc/*.dist /usr/lib/tc/*.dist; do
    [ -f "$dist" ] && put "$root" "$dist"
  done
  [ -d /etc/iproute2 ] && cp -rL /etc/iproute2 "$root/etc/"

  # Modules plus a modules.dep for just them, so busybox modprobe (and the
  # kernel's request_module via /sbin/modprobe) works for these too. Newer
  # kernels ship them compressed, which busybox insmod cannot read: they go in
  # as plain .ko, under the name depmod then records.
  while IFS= read -r m; do
    put_module "$root" "$moddir/$m" "/lib/modules/$kver/$(plain_ko "$m")"
  done <<<"$modlist"
  cp "$moddir"/modules.order "$moddir"/modules.builtin "$moddir"/modules.builtin.modinfo \
    "$root/lib/modules/$kver/" 2>/dev/null || true
  depmod -b "$root" "$kver"
  plain_ko "$modlist" > "$root/etc/shaperctl-vm/modules"

  printf 'root:x:0:0:root:/root:/bin/sh\n' > "$root/etc/passwd"
  printf 'root:x:0:\n' > "$root/etc/group"
  printf '127.0.0.1 localhost\n::1 localhost\n' > "$root/etc/hosts"
  write_init > "$root/init"
  chmod 0755 "$root/init"
  mkcpio "$root" > "$1"
}

write_init() {
  cat <<'INIT'
#!/bin/sh
# PID 1 of the shaperctl test VM: mount the usual filesystems, load the
# modules, run /scenario.sh, print its status in a marker line, power off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root TERM=dumb
export LD_LIBRARY_PATH=/usr/local/lib
# busybox sh runs its own applets for bare names (ip, tc, ping) whatever PATH
# says, so scenarios must call the real tools through these.
export SHAPERCTL_VM=1
export IP=/usr/sbin/ip TC=/usr/sbin/tc PING=/usr/bin/ping IPERF3=/usr/bin/iperf3
[ -x /usr/sbin/ethtool ] && export ETHTOOL=/usr/sbin/ethtool
[ -x /usr/sbin/bpftool ] && export BPFTOOL=/usr/sbin/bpftool

mount -t devtmpfs devtmpfs /dev 2>/dev/null
exec </dev/console >/dev/console 2>&1
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs -o mode=755 tmpfs /run
mount -t bpf -o mode=700 bpf /sys/fs/bpf
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
hostname shaperctl-vm

kver=$(uname -r)
while read -r m; do
  [ -n "$m" ] || continue
  insmod "/lib/modules/$kver/$m" || echo "init: insmod $m failed"
done </etc/shaperctl-vm/modules
/usr/sbin/ip link set lo up
ulimit -l unlimited

status=127
echo "@@SHAPERCTL_VM_START@@"
if [ -f /scenario.sh ]; then
  args=""
  [ -f /scenario.args ] && args=$(cat /scenario.args)
  eval "set -- $args"
  cd /tmp
  /bin/sh /scenario.sh "$@" </dev/null
  status=$?
else
  echo "init: no /scenario.sh in the initramfs"
fi
echo "@@SHAPERCTL_VM_EXIT=$status@@"
sync
poweroff -f
# If ACPI power-off did not stop qemu, a reboot does (run.sh uses -no-reboot).
sleep 1
reboot -f
INIT
}

mkdir -p "$(dirname "$out")"
if [ "$use_cache" = 1 ] && [ ! -f "$base" ] && mkdir -p "$cache/initramfs" 2>/dev/null &&
   [ -w "$cache/initramfs" ]; then
  echo "build-initramfs: building base for $kver" >&2
  # Build beside the target so the rename is atomic for concurrent runs.
  base_tmp="$base.$$.tmp"
  build_base "$base_tmp"
  mv "$base_tmp" "$base"
  base_tmp=""
  # Keep the 8 most recently used bases (one per suite, other tool versions or
  # --module sets).
  find "$cache/initramfs" -name 'base-*.cpio' -printf '%T@ %p\n' | sort -rn | tail -n +9 |
    cut -d' ' -f2- | xargs -r rm -f
fi
if [ "$use_cache" = 1 ] && [ -f "$base" ]; then
  touch "$base" 2>/dev/null || true  # mtime = last use, for the pruning above
  cp "$base" "$tmp/initramfs"
else
  build_base "$tmp/initramfs"
fi

# --- per-run overlay ------------------------------------------------------

ov="$tmp/overlay"
mkdir -p "$ov"
if [ -n "$scenario" ]; then
  [ -f "$scenario" ] || die "scenario not found: $scenario"
  cp "$scenario" "$ov/scenario.sh"
  chmod 0755 "$ov/scenario.sh"
  sh_quote "${scenario_args[@]}" > "$ov/scenario.args"
fi
for b in "${bins[@]}"; do
  put_bin "$ov" "$(readlink -f "$b")" "/usr/local/bin/$(basename "$b")"
done
for spec in "${files[@]}"; do
  src="${spec%%:*}" dest="${spec#*:}"
  if [ "$src" = "$spec" ] || [ -z "$src" ] || [ -z "$dest" ]; then
    die "--file wants SRC:DEST, got '$spec'"
  fi
  [ "${dest#/}" != "$dest" ] || die "--file DEST must be absolute: '$dest'"
  case "$dest" in
    /tmp|/tmp/*|/run|/run/*) die "--file DEST under /tmp or /run would be hidden by the guest's tmpfs: '$dest'" ;;
  esac
  [ -e "$src" ] || die "--file source not found: $src"
  case "$dest" in */) dest="$dest$(basename "$src")" ;; esac
  mkdir -p "$ov$(dirname "$dest")"
  cp -rL --preserve=mode "$src" "$ov$dest"
done
if [ -n "$(ls -A "$ov")" ]; then
  mkcpio "$ov" >> "$tmp/initramfs"
fi
mv "$tmp/initramfs" "$out"
