#!/usr/bin/env bash
# Boots a stock Debian cloud kernel under qemu (TCG) with an initramfs that
# runs SCENARIO.sh, streams its output, and exits with the scenario's status.
#
# usage: vm/run.sh [--suite SUITE] [--timeout SECONDS] [--bin PATH]...
#          [--file SRC:DEST]... [--module NAME]... [--mem MB] [--smp N]
#          [--append KERNEL_ARGS] [--log FILE] [--verbose] SCENARIO.sh [ARGS...]
# --suite: bookworm (6.1, default), trixie (6.12), trixie-backports (7.x), bullseye (5.10);
# also from $SHAPERCTL_VM_SUITE. --verbose shows the whole (non-quiet) boot; --log keeps
# the raw console. Every guest gets the scenario library, vm/lib.sh, at
# /usr/local/share/shaperctl-vm/lib.sh.
#
# Exit status: the scenario's; 124 on timeout; 125 if the guest never reported
# a status (kernel panic, qemu failure) or the kernel/initramfs could not be
# prepared; 2 on usage errors (an unknown suite too). Each failure is one line.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
timeout=300 mem=1024 smp=2 verbose=0 log="" append=""
# The scenario library, in every guest: scenarios source it from there.
build_args=(--file "$here/lib.sh:/usr/local/share/shaperctl-vm/lib.sh")

usage() { sed -n '5,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
say() { echo "run.sh: $*" >&2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --timeout) [ $# -ge 2 ] || usage; timeout="$2"; shift 2 ;;
    --suite) [ $# -ge 2 ] || usage; export SHAPERCTL_VM_SUITE="$2"; shift 2 ;;
    --mem) [ $# -ge 2 ] || usage; mem="$2"; shift 2 ;;
    --smp) [ $# -ge 2 ] || usage; smp="$2"; shift 2 ;;
    --bin|--file|--module) [ $# -ge 2 ] || usage; build_args+=("$1" "$2"); shift 2 ;;
    --log) [ $# -ge 2 ] || usage; log="$2"; shift 2 ;;
    --append) [ $# -ge 2 ] || usage; append="$append $2"; shift 2 ;;
    --verbose|-v) verbose=1; shift ;;
    -h|--help) usage ;;
    --) shift; break ;;
    -*) usage ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || usage
scenario="$1"; shift
[ -f "$scenario" ] || { say "scenario not found: $scenario"; exit 2; }
[[ "$timeout" =~ ^[0-9]+$ ]] || { say "--timeout wants whole seconds"; exit 2; }
command -v qemu-system-x86_64 >/dev/null || { say "qemu-system-x86_64 missing (scripts/install-deps.sh)"; exit 2; }

start=$SECONDS
# fetch-kernel.sh says in one line what went wrong; 2 is an unknown suite.
kinfo="$("$here/fetch-kernel.sh")" || { rc=$?; [ "$rc" = 2 ] && exit 2; exit 125; }
SUITE="$(sed -n 's/^SUITE=//p' <<<"$kinfo")"
KVER="$(sed -n 's/^KVER=//p' <<<"$kinfo")"
KERNEL="$(sed -n 's/^KERNEL=//p' <<<"$kinfo")"
MODULES="$(sed -n 's/^MODULES=//p' <<<"$kinfo")"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/shaperctl-vm.XXXXXX")"
qpid="" tpid=""
# shellcheck disable=SC2317  # only reached through the trap
cleanup() {
  # Never leave a qemu behind, whatever ended us.
  [ -n "$qpid" ] && kill "$qpid" 2>/dev/null && wait "$qpid" 2>/dev/null
  [ -n "$tpid" ] && kill "$tpid" 2>/dev/null && wait "$tpid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT
trap 'say "terminated"; exit 143' TERM

if ! "$here/build-initramfs.sh" --modules "$MODULES" --out "$tmp/initramfs" \
       ${build_args[@]+"${build_args[@]}"} "$scenario" "$@"; then
  say "build-initramfs.sh failed"; exit 125
fi

# Serial output: drop CRs and the terminal resets/escapes SeaBIOS emits.
clean() { sed -u 's/\r$//; s/\x1bc//g; s/\x1b\[[0-9;?]*[A-Za-z]//g'; }

console="$tmp/console.log"
quiet=" quiet"
[ "$verbose" = 1 ] && quiet=""

# One boot: qemu's status in qrc, the console in $console.
boot_once() {
  : > "$console"
  boot=$SECONDS
  # stdin from /dev/null so qemu never touches the caller's terminal. -nodefaults
  # drops the default NIC and VGA, which the test needs neither of. timeout's
  # --kill-after covers a qemu that ignores SIGTERM.
  timeout --kill-after=5 "$timeout" \
    qemu-system-x86_64 -accel tcg -cpu max -smp "$smp" -m "$mem" \
      -nodefaults -nographic -no-reboot -serial stdio -monitor none \
      -kernel "$KERNEL" -initrd "$tmp/initramfs" \
      -append "console=ttyS0 panic=-1 oops=panic${quiet}${append}" \
      </dev/null >"$console" 2>&1 &
  qpid=$!

  # Live view of the console: CRs stripped, boot noise hidden until /init says
  # the scenario starts and after it ended (unless --verbose), markers hidden.
  tail -n +1 -s 0.2 -f --pid="$qpid" "$console" | clean | awk -v verbose="$verbose" '
    /@@SHAPERCTL_VM_START@@/ { started = 1; next }
    /@@SHAPERCTL_VM_EXIT=[0-9]+@@/ { started = 0; next }
    started || verbose { print; fflush() }' &
  tpid=$!

  set +e
  wait "$qpid"
  qrc=$?
  set -e
  qpid=""
  wait "$tpid" 2>/dev/null || true
  tpid=""
}

# A kernel that panics while it boots, before the scenario starts, has run nothing of ours:
# under TCG that happens now and then (code patched while another vCPU runs it). Boot again,
# at most twice, and say so; a panic in the scenario, or a third one, is a failure.
panicked_before_start() {
  grep -aq 'Kernel panic - not syncing' "$console" && ! grep -aq '@@SHAPERCTL_VM_START@@' "$console"
}
for attempt in 1 2 3; do
  boot_once
  [ "$attempt" -lt 3 ] && panicked_before_start || break
  say "$KVER panicked while booting ($(grep -a -m1 -o 'Kernel panic - not syncing:.*' "$console" | clean)), before the scenario started; booting again (attempt $((attempt + 1)) of 3)"
done

[ -n "$log" ] && clean < "$console" > "$log"
status="$(clean < "$console" | grep -ao '@@SHAPERCTL_VM_EXIT=[0-9]*@@' | tail -n1 | tr -dc '0-9' || true)"
elapsed=$((SECONDS - start)) vmtime=$((SECONDS - boot))

kernel="kernel $KVER ($SUITE)"
if [ -n "$status" ]; then
  say "scenario $(basename "$scenario") exited $status ($kernel, vm ${vmtime}s, total ${elapsed}s)"
  exit "$status"
fi

# No status: one line saying why, the whole console kept in a file for the details.
keep="$(mktemp "${TMPDIR:-/tmp}/shaperctl-vm-console.XXXXXX.log")"
clean < "$console" > "$keep"
panic="$(grep -a -m1 -o 'Kernel panic - not syncing:.*' "$keep" || true)"
if [ -n "$panic" ]; then
  say "FAILED: $kernel panicked ($panic) $(grep -aq '@@SHAPERCTL_VM_START@@' "$keep" &&
    echo "in scenario $(basename "$scenario")" || echo "before the scenario started"); console: $keep"
elif [ "$qrc" -eq 124 ] || [ "$qrc" -eq 137 ]; then
  say "TIMEOUT: killed qemu after ${timeout}s; scenario $(basename "$scenario") did not finish on $kernel; console: $keep"
  exit 124
elif ! grep -aq '@@SHAPERCTL_VM_START@@' "$keep"; then
  say "FAILED: $kernel never reached the scenario (qemu status $qrc; last console line: $(grep -a . "$keep" | tail -n1 | cut -c1-160)); console: $keep"
else
  say "FAILED: the guest ended without an exit marker (qemu status $qrc, $kernel; init failure?); console: $keep"
fi
exit 125
