#!/usr/bin/env bash
# The VM harness on bad input: an unknown suite, a registry that cannot be reached, a kernel
# that panics, a guest that never reports. Each must end run.sh with its own exit status and
# one line on stderr naming what went wrong, and leave no qemu behind.
# usage: vm/harness-errors.sh   (boots two short VMs of the default suite)
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/shaperctl-harness.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
printf 'echo never here\n' > "$tmp/scenario.sh"
fails=0

# expect NAME STATUS PATTERN [env VAR=VALUE...] -- run.sh ARGS...: run.sh's exit status is STATUS
# and its stderr one line matching PATTERN (fetch-kernel.sh's progress lines and run.sh's
# "booting again" after a panic at boot aside; $tmp/err keeps them all).
expect() {
  local name="$1" want="$2" pattern="$3" rc lines
  shift 3
  # run.sh's temporary files and kept console go under $tmp too, its qemu's -initrd with them.
  env TMPDIR="$tmp" "$@" "$tmp/scenario.sh" >/dev/null 2>"$tmp/err"
  rc=$?
  lines="$(grep -v '^fetch-kernel: fetching\|^build-initramfs: building\|, before the scenario started; booting again' "$tmp/err")"
  if [ "$rc" = "$want" ] && [ "$(grep -c . <<<"$lines")" = 1 ] && grep -Eq "$pattern" <<<"$lines"; then
    echo "PASS $name: exit $rc: $lines"
  else
    echo "FAIL $name: exit $rc (expected $want), stderr: $(cat "$tmp/err")"
    fails=$((fails + 1))
  fi
}

expect unknown-suite 2 "unknown suite 'nosuch'" \
  "$here/run.sh" --suite nosuch
# A fresh cache and a mirror nobody listens on: the lists cannot be fetched.
expect registry-unreachable 125 "cannot fetch the bullseye package lists from http://127.0.0.1:9/debian" \
  SHAPERCTL_VM_CACHE="$tmp/cache" SHAPERCTL_VM_MIRROR=http://127.0.0.1:9/debian "$here/run.sh" --suite bullseye
# No init in the initramfs: the kernel panics looking for a root filesystem.
expect kernel-panic 125 "FAILED: kernel .* panicked \(Kernel panic - not syncing: .*\) before the scenario started" \
  "$here/run.sh" --append rdinit=/nonexistent
# A panic at boot runs nothing of ours (TCG panics a guest now and then): booted three times.
if [ "$(grep -c 'before the scenario started; booting again (attempt [23] of 3)' "$tmp/err")" = 2 ]; then
  echo "PASS kernel-panic-booted-again: two more boots, each said"
else
  echo "FAIL kernel-panic-booted-again: stderr: $(cat "$tmp/err")"
  fails=$((fails + 1))
fi
expect never-reports 124 "TIMEOUT: killed qemu after 2s" \
  "$here/run.sh" --timeout 2

if pgrep -f "qemu-system-x86_64 .*-initrd $tmp/" >/dev/null; then
  echo "FAIL no-qemu-left: a qemu of this test is still running"
  fails=$((fails + 1))
fi
[ "$fails" = 0 ]
