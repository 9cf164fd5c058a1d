#!/bin/sh
# Smoke scenario for the stock-kernel VM (runs inside the guest under busybox
# sh): proves sch_fq pacing works on Debian's cloud kernel over veth.
#   1. unshaped veth TCP throughput (baseline, must exceed the target by 20%)
#   2. fq maxrate RATE on the sender's veth: goodput within 20% of RATE
#   3. a 2-queue veth with mq at the root and fq under 1:1 and 1:2
# usage (host): vm/smoke.sh [RATE_MBIT]   (default 20; boots the VM)
#           or: vm/run.sh [run options] vm/smoke.sh [RATE_MBIT]
#
# bare ip/tc/ping are busybox applets here: always go through $IP/$TC.
set -eu

# On the host, run ourselves in the VM (never touch the host's network).
if [ "${SHAPERCTL_VM:-}" != 1 ]; then
  exec "$(dirname "$0")/run.sh" --timeout 180 "$0" "$@"
fi

rate_mbit="${1:-20}"
: "${IP:=/usr/sbin/ip}" "${TC:=/usr/sbin/tc}" "${IPERF3:=/usr/bin/iperf3}"
fail=0

step() { echo; echo "=== $*"; }
bad() { echo "FAIL: $*"; fail=1; }

# Receiver goodput (bits/s) from iperf3 -J output, without needing jq.
goodput() {
  awk '/"sum_received"/ { f = 1 } f && /"bits_per_second"/ { v = $2; sub(/,$/, "", v); print v; exit }' "$1"
}
mbit() { awk -v b="$1" 'BEGIN { printf "%.2f", b / 1e6 }'; }

# Runs an iperf3 client in ns a against ns b; prints goodput in bits/s.
measure() {
  out="/tmp/iperf-$1.json"; shift
  if ! ip netns exec a "$IPERF3" -c "$@" -J > "$out" 2>&1; then
    echo "iperf3 client failed:" >&2; cat "$out" >&2; echo 0; return
  fi
  goodput "$out"
}
ip() { "$IP" "$@"; }
tc() { "$TC" "$@"; }

step "kernel $(uname -r), $(nproc) cpus"
for f in /sys/kernel/btf/vmlinux /sys/fs/bpf /sys/fs/cgroup/cgroup.controllers; do
  if [ -e "$f" ]; then echo "present: $f"; else echo "absent:  $f"; fi
done

step "topology: ns a (10.0.0.1, 10.0.1.1) <-veth-> ns b (10.0.0.2, 10.0.1.2)"
ip netns add a
ip netns add b
ip link add va netns a type veth peer name vb netns b
# A second pair with two tx/rx queues for the mq test.
ip link add va2 netns a numtxqueues 2 numrxqueues 2 type veth \
  peer name vb2 netns b numtxqueues 2 numrxqueues 2
for ns in a b; do ip -n "$ns" link set lo up; done
ip -n a addr add 10.0.0.1/24 dev va
ip -n b addr add 10.0.0.2/24 dev vb
ip -n a addr add 10.0.1.1/24 dev va2
ip -n b addr add 10.0.1.2/24 dev vb2
ip -n a link set va up
ip -n b link set vb up
ip -n a link set va2 up
ip -n b link set vb2 up

ip netns exec b "$IPERF3" -s >/tmp/iperf-server.log 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
# Wait for the server socket instead of sleeping a guessed time.
i=0
until ip netns exec b cat /proc/net/tcp6 /proc/net/tcp 2>/dev/null | grep -q ':1451 .* 0A '; do
  i=$((i + 1)); [ "$i" -lt 50 ] || { bad "iperf3 server did not start"; cat /tmp/iperf-server.log; exit 1; }
  sleep 0.1
done

step "1. unshaped veth TCP (3 s)"
base_bps="$(measure base 10.0.0.2 -t 3)"
echo "unshaped goodput: $(mbit "$base_bps") Mbit/s"
awk -v b="$base_bps" -v r="$rate_mbit" 'BEGIN { exit !(b > r * 1.2e6) }' ||
  bad "baseline $(mbit "$base_bps") Mbit/s is too slow to tell shaping at $rate_mbit Mbit/s"

step "2. fq maxrate ${rate_mbit}mbit on va (3 s)"
tc -n a qdisc add dev va root fq maxrate "${rate_mbit}mbit"
shaped_bps="$(measure shaped 10.0.0.2 -t 3)"
echo "shaped goodput: $(mbit "$shaped_bps") Mbit/s (target ${rate_mbit} Mbit/s, accepted 80%..120%)"
tc -n a -s qdisc show dev va
if awk -v b="$shaped_bps" -v r="$rate_mbit" 'BEGIN { exit !(b >= r * 0.8e6 && b <= r * 1.2e6) }'; then
  echo "PASS: fq maxrate holds the flow within 20% of ${rate_mbit} Mbit/s"
else
  bad "shaped goodput $(mbit "$shaped_bps") Mbit/s is not within 20% of ${rate_mbit} Mbit/s"
fi

step "2b. same fq, 2 parallel flows (2 s): maxrate is per flow, not per device"
par_bps="$(measure parallel 10.0.0.2 -t 2 -P 2)"
echo "2-flow aggregate: $(mbit "$par_bps") Mbit/s"

step "3. mq root with fq under 1:1 and 1:2 on 2-queue veth va2"
echo "va2 tx queues: $(ip netns exec a sh -c 'ls -d /sys/class/net/va2/queues/tx-*' | wc -l)"
if tc -n a qdisc add dev va2 root handle 1: mq &&
   tc -n a qdisc add dev va2 parent 1:1 fq maxrate "${rate_mbit}mbit" &&
   tc -n a qdisc add dev va2 parent 1:2 fq maxrate "${rate_mbit}mbit"; then
  mq_bps="$(measure mq 10.0.1.2 -t 2 -P 4)"
  echo "mq+fq 4-flow aggregate: $(mbit "$mq_bps") Mbit/s"
  tc -n a -s qdisc show dev va2
  n="$(tc -n a qdisc show dev va2 | grep -c '^qdisc fq ' || true)"
  if [ "$n" -eq 2 ]; then echo "PASS: mq with 2 fq children"; else bad "expected 2 fq children under mq, got $n"; fi
else
  bad "mq/fq setup on a 2-queue veth failed"
fi

step "result"
if [ "$fail" -eq 0 ]; then echo "SMOKE OK"; else echo "SMOKE FAILED"; fi
exit "$fail"
