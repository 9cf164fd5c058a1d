#!/bin/sh
# The demo: one TCP flow over a veth between two network namespaces, shaped by shaperctl (edt
# mode, sch_fq) at 5, 20 and 100 Mbit/s, changed live with change-class; prints configured vs
# measured vs expected goodput, then `shaperctl status --json`. ~1 minute. Needs root.
#
# usage: sudo scripts/demo.sh [--bin PATH]   (no --bin: builds first, then runs build/cli/shaperctl)
#
# sch_fq does the pacing. If this host's kernel has it (probed by adding one in a throwaway
# network namespace), the demo runs here, in its own namespaces. Otherwise it says so and runs in
# the stock-kernel VM (vm/run.sh: Debian 12's cloud kernel under qemu TCG).
# Expected goodput: every 1448-byte TCP payload (MTU 1500, timestamps on) costs 1514 bytes
# on the wire plus 24 of Ethernet overhead (--overhead 24), so goodput = rate x 1448 / 1538.
set -u

RATES="5 20 100"   # Mbit/s, 3 s each

# --- on the host: build, decide where to run -----------------------------------------

if [ "${SHAPERCTL_VM:-}" != 1 ] && [ "${SHAPERCTL_DEMO_HERE:-}" != 1 ]; then
  here="$(cd "$(dirname "$0")" && pwd)"
  repo="$(cd "$here/.." && pwd)"
  bin=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --bin) [ $# -ge 2 ] || { echo "usage: $0 [--bin PATH]" >&2; exit 2; }; bin="$2"; shift 2 ;;
      -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
      *) echo "usage: $0 [--bin PATH]" >&2; exit 2 ;;
    esac
  done
  if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/demo.sh: run as root" >&2
    exit 1
  fi
  if [ -z "$bin" ]; then
    bash "$repo/scripts/build.sh" || exit 1
    bin="$repo/build/cli/shaperctl"
  fi
  if [ ! -x "$bin" ]; then
    echo "demo: no shaperctl at $bin; build it first:" >&2
    echo "  cmake -S $repo -B $repo/build && make -C $repo/build -j2" >&2
    exit 2
  fi
  # Does this kernel have sch_fq? Try one on a dummy device in a throwaway namespace.
  has_fq=0
  if [ "$(id -u)" = 0 ] && command -v ip >/dev/null && command -v tc >/dev/null; then
    probe="shaperctl-fqprobe-$$"
    if ip netns add "$probe" 2>/dev/null; then
      if ip -n "$probe" link add fqprobe0 type dummy 2>/dev/null &&
         tc -n "$probe" qdisc add dev fqprobe0 root fq 2>/dev/null; then
        has_fq=1
      fi
      ip netns del "$probe"
    fi
  fi
  if [ "$has_fq" = 1 ]; then
    for t in iperf3 jq; do
      command -v "$t" >/dev/null || { echo "demo: $t is missing (scripts/install-deps.sh)" >&2; exit 2; }
    done
    echo "demo: this kernel ($(uname -r)) has sch_fq: running here, in namespaces of its own"
    SHAPERCTL="$(readlink -f "$bin")" SHAPERCTL_DEMO_HERE=1 LIB="$repo/vm/lib.sh" exec sh "$0"
  fi
  echo "demo: this kernel ($(uname -r)) has no sch_fq: running in the stock-kernel VM (Debian 12 cloud kernel, qemu TCG; a few seconds to boot)"
  # The guest finds the binary as /usr/local/bin/shaperctl (run.sh keeps the basename).
  if [ "$(basename "$bin")" != shaperctl ]; then
    linkdir="$(mktemp -d "${TMPDIR:-/tmp}/shaperctl-demo-bin.XXXXXX")"
    trap 'rm -rf "$linkdir"' EXIT
    ln -s "$(readlink -f "$bin")" "$linkdir/shaperctl"
    bin="$linkdir/shaperctl"
  fi
  "$repo/vm/run.sh" --timeout 240 --bin "$bin" "$0"
  exit $?
fi

# --- the demo (in the VM, or on a host with sch_fq) ----------------------------------

: "${LIB:=/usr/local/share/shaperctl-vm/lib.sh}"
# shellcheck source=../vm/lib.sh
. "$LIB"

A="demo-a-$$" B="demo-b-$$"
[ "${SHAPERCTL_VM:-}" = 1 ] && A=demo-a B=demo-b
cleanup() {
  shaperctl -n "$A" detach --dev va >/dev/null 2>&1
  stop_iperf_servers
  ip netns del "$A" 2>/dev/null
  ip netns del "$B" 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# run CMD...: show a shaperctl command, then run it.
run() {
  echo "\$ shaperctl $*"
  shaperctl "$@" || { echo "demo: shaperctl $* failed" >&2; exit 1; }
}

echo "kernel $(uname -r); $A (va 10.0.0.1) <-veth-> $B (vb 10.0.0.2); shaped on va"
new_ns "$A" && new_ns "$B" && veth_pair "$A" va 10.0.0.1/24 "$B" vb 10.0.0.2/24 ||
  { echo "demo: could not build the namespaces" >&2; exit 1; }
iperf_server "$A" 5201
wait_listen "$A" 5201 || { echo "demo: iperf3 server did not start" >&2; exit 1; }

set -- $RATES
run -n "$A" attach --dev va
run -n "$A" add-class --dev va --id 1 --rate "${1}mbit" --overhead 24
run -n "$A" set-default --dev va --class 1

rows=""
first=1
for r in $RATES; do
  [ "$first" = 1 ] || run -n "$A" change-class --dev va --id 1 --rate "${r}mbit"
  first=0
  # The receiver runs the client with -R: goodput as the receiver saw it, first 0.5 s left out.
  if ! iperf_rx "$B" 10.0.0.1 5201 "/tmp/demo-$$-$r.json" -t 3 -i 0.5; then
    echo "demo: iperf3 failed: $(iperf_error "/tmp/demo-$$-$r.json")" >&2
    exit 1
  fi
  g=$(goodput_bps "/tmp/demo-$$-$r.json" 0.5)
  e=$(calc "$r * 1e6 * 1448 / 1538")
  rows="$rows$(printf '%-12s %-18s %-14s %s' "$r Mbit/s" "$(fmt_rate "$g" 1e6)" "$(fmt_rate "$e" 1e6)" \
    "$(awk -v g="$g" -v e="$e" 'BEGIN { printf "%+.1f%%", (g / e - 1) * 100 }')")
"
  rm -f "/tmp/demo-$$-$r.json" "/tmp/demo-$$-$r.json.err"
done

echo
printf '%-12s %-18s %-14s %s\n' configured "measured goodput" expected error
printf '%s' "$rows"
echo "(expected = rate x 1448 / 1538: 1448 TCP payload bytes per 1514-byte frame + 24 bytes of overhead)"

echo
echo "final status, sampled over 500 ms of a running flow:"
iperf_rx "$B" 10.0.0.1 5201 "/tmp/demo-$$-status.json" -t 2 &
p=$!
sleep 1
echo "\$ shaperctl -n $A status --dev va --json --sample 500ms"
shaperctl -n "$A" status --dev va --json --sample 500ms
wait $p
rm -f "/tmp/demo-$$-status.json" "/tmp/demo-$$-status.json.err"
echo
run -n "$A" detach --dev va
