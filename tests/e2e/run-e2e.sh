#!/usr/bin/env bash
# shaperctl end-to-end tests in the stock-kernel VM: boots ONE VM (qemu TCG, a Debian cloud
# kernel) running tests/e2e/e2e.sh, prints one line per case, exits non-zero if any
# case fails (or the VM does not finish). Builds nothing: give it a built shaperctl.
#
# usage: tests/e2e/run-e2e.sh [--bin PATH | PATH] [--next PATH] [--suite SUITE] [--refusal]
#          [--verbose] [--log FILE] [--timeout S] [CASE...]
#   PATH      shaperctl binary (default: build/cli/shaperctl)
#   --next    the newer build the upgrade case attaches over it (default: shaperctl_next
#             beside PATH, which CMake builds with the tests)
#   --suite   the kernel: bookworm (6.1, default), trixie, trixie-backports, bullseye (run.sh)
#   --refusal run refusal.sh instead: attach and doctor refuse in one line (a kernel too old)
#   --verbose also show each case's details (they always go to the log)
#   CASE      baseline tcp100k tcp20m tcp200m flows8 flood delay change burst rules borrow small udp
#             prio7 fwd upgrade (default all; attach and detach checks always run). The prio7 case
#             sends with udp_rate, taken from beside PATH (CMake builds it there).
# Lines: PASS/FAIL NAME: measured (expected, bound); XFAIL = a known product bug reproduced
# (does not fail the run), XPASS = that bug no longer reproduces; INFO and SKIP as said.
# Takes about 5 minutes on a 2-core machine.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
bin="$repo/build/cli/shaperctl" next="" verbose=0 log="" timeout=600 scenario=e2e.sh
cases=() vm_args=()

usage() { sed -n '6,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) [ $# -ge 2 ] || usage; bin="$2"; shift 2 ;;
    --next) [ $# -ge 2 ] || usage; next="$2"; shift 2 ;;
    --suite) [ $# -ge 2 ] || usage; vm_args+=(--suite "$2"); shift 2 ;;
    --refusal) scenario=refusal.sh; shift ;;
    --verbose|-v) verbose=1; shift ;;
    --log) [ $# -ge 2 ] || usage; log="$2"; shift 2 ;;
    --timeout) [ $# -ge 2 ] || usage; timeout="$2"; shift 2 ;;
    -h|--help) usage ;;
    -*) usage ;;
    */*) bin="$1"; shift ;;
    *) cases+=("$1"); shift ;;
  esac
done
if [ ! -x "$bin" ]; then
  echo "run-e2e: no shaperctl at $bin; build it first:" >&2
  echo "  cmake -S $repo -B $repo/build && make -C $repo/build -j2" >&2
  exit 2
fi
[ -n "$next" ] || next="$(dirname "$bin")/shaperctl_next"
if [ ${#cases[@]} -gt 0 ] && [[ " ${cases[*]} " != *" upgrade "* ]]; then
  next=""  # only the upgrade case runs it
elif [ ! -x "$next" ]; then
  echo "run-e2e: note: no newer build at $next: the upgrade case will SKIP"
  next=""
fi
[ -n "$log" ] || log="$(mktemp "${TMPDIR:-/tmp}/shaperctl-e2e.XXXXXX.log")"
# The guest finds the binaries as "shaperctl" and "shaperctl_next" in /usr/local/bin (run.sh
# keeps the basename).
linkdir="$(mktemp -d "${TMPDIR:-/tmp}/shaperctl-e2e-bin.XXXXXX")"
trap 'rm -rf "$linkdir"' EXIT
# named PATH NAME: PATH, or a symlink to it named NAME.
named() {
  if [ "$(basename "$1")" = "$2" ]; then echo "$1"; return; fi
  ln -s "$(readlink -f "$1")" "$linkdir/$2"
  echo "$linkdir/$2"
}
bins=(--bin "$(named "$bin" shaperctl)")
[ -z "$next" ] || bins+=(--bin "$(named "$next" shaperctl_next)")
for helper in udp_rate class_clock; do
  [ ! -x "$(dirname "$bin")/$helper" ] || bins+=(--bin "$(dirname "$bin")/$helper")
done
load="$(cut -d' ' -f1 /proc/loadavg)"
if awk -v l="$load" -v n="$(nproc)" 'BEGIN { exit !(l > n) }'; then
  echo "run-e2e: note: host load $load on $(nproc) cpus; the TCG guest will be slow (rate cases may SKIP)"
fi

start=$SECONDS
set +e
"$repo/vm/run.sh" ${vm_args[@]+"${vm_args[@]}"} --timeout "$timeout" "${bins[@]}" \
    --file "$here/judge.sh:/usr/local/share/shaperctl-vm/judge.sh" \
    --file "$here/borrow.sh:/usr/local/share/shaperctl-vm/borrow.sh" \
    "$here/$scenario" ${cases[@]+"${cases[@]}"} 2>&1 |
  tee "$log" |
  awk -v verbose="$verbose" '
    /^(PASS|FAIL|XFAIL|XPASS|SKIP|INFO) / || /^(E2E|REFUSAL) SUMMARY/ || /^(run\.sh|fetch-kernel): / || verbose { print; fflush() }'
rc=${PIPESTATUS[0]}
set -e

fails=$(grep -c '^FAIL ' "$log" || true)
summary=$(grep -Ec '^(E2E|REFUSAL) SUMMARY' "$log" || true)
echo "run-e2e: $((SECONDS - start)) s wall; full log: $log"
if [ "$rc" -ne 0 ] || [ "$fails" -ne 0 ] || [ "$summary" -ne 1 ]; then
  [ "$summary" -eq 1 ] || echo "run-e2e: FAILED: the scenario did not finish (run.sh exit $rc)"
  exit 1
fi
