#!/bin/sh
# Bounded delay and fairness inside one class (issue 6): a 20 Mbit class, 8 bulk TCP flows and a
# ping, for each variant of the class: plain EDT (one clock: a virtual FIFO), sparse flows first,
# CoDel with ECN, CoDel dropping. Prints ping RTT p50/p99, goodput against the expected
# 20 Mbit x 1448/1538, Jain's index over the bulk flows, and the class's counters.
#
#   sudo bench/latency.sh [--bin build/cli/shaperctl]
#
# Pacing needs sch_fq: the measurement runs in the stock-kernel VM (tests/vm/run.sh) unless this
# kernel has sch_fq. Takes about two minutes. Prints a Markdown table; no assertions.
set -eu

if [ -z "${SHAPERCTL_VM:-}" ] && [ -z "${SHAPERCTL_LATENCY_HERE:-}" ]; then
  here="$(cd "$(dirname "$0")" && pwd)"
  bin="$here/../build/cli/shaperctl"
  [ "${1:-}" = --bin ] && bin="$2"
  vm="$here/../tests/vm"
  linkdir="$(mktemp -d)"
  trap 'rm -rf "$linkdir"' EXIT
  ln -s "$(readlink -f "$bin")" "$linkdir/shaperctl"
  exec "$vm/run.sh" --timeout 600 --bin "$linkdir/shaperctl" \
    --file "$vm/e2e/lib.sh:/usr/local/share/shaperctl-e2e/lib.sh" "$0"
fi

. "${LIB:-/usr/local/share/shaperctl-e2e/lib.sh}"
RATE=20mbit EXPECTED=18.83 FLOWS=8 SECONDS_BULK=14
new_ns la
new_ns lb
veth_pair la va 10.9.0.1/24 lb vb 10.9.0.2/24
nsx la sysctl -qw net.ipv4.tcp_ecn=1   # the bulk senders negotiate ECN; CoDel may mark
shaperctl -n la attach --dev va >/dev/null
iperf_server lb 5201
wait_listen lb 5201

echo "| variant | ping p50 ms | ping p99 ms | goodput Mbit/s | of expected | Jain | drops | marks | sparse |"
echo "|---|---|---|---|---|---|---|---|---|"
for variant in "plain EDT:--sparse off --aqm off" "sparse flows:--sparse on --aqm off" \
               "sparse + CoDel ECN:--sparse on --aqm codel --ecn on" \
               "sparse + CoDel drop:--sparse on --aqm codel --ecn off" \
               "CoDel ECN only:--sparse off --aqm codel --ecn on"; do
  name=${variant%%:*} opts=${variant#*:}
  shaperctl -n la set-default --dev va --none >/dev/null 2>&1 || true
  shaperctl -n la del-class --dev va --id 1 >/dev/null 2>&1 || true
  # shellcheck disable=SC2086
  shaperctl -n la add-class --dev va --id 1 --rate $RATE --overhead 24 $opts
  shaperctl -n la set-default --dev va --class 1
  iperf_tx la 10.9.0.2 5201 /tmp/bulk.json -P $FLOWS -t $SECONDS_BULK &
  bulk=$!
  sleep 3
  nsx la ping -n -i 0.05 -c 180 10.9.0.2 >/tmp/ping.txt 2>&1 || true
  wait $bulk || true
  rtts=$(grep -o 'time=[0-9.]*' /tmp/ping.txt | cut -d= -f2 | sort -n)
  n=$(echo "$rtts" | grep -c . || true)
  p50=$(echo "$rtts" | awk -v n="$n" 'NR == int(n * 0.50 + 0.5) { print; exit }')
  p99=$(echo "$rtts" | awk -v n="$n" 'NR == int(n * 0.99 + 0.5) { print; exit }')
  goodput=$(jq '.end.sum_received.bits_per_second / 1e6' /tmp/bulk.json)
  jain=$(jq '[.end.streams[].receiver.bits_per_second] | (add * add) / (length * (map(. * .) | add))' /tmp/bulk.json)
  st=$(status_json la va)
  drops=$(echo "$st" | jq '.classes[0].drops')
  marks=$(echo "$st" | jq '.classes[0].ecn_marks')
  sparse=$(echo "$st" | jq '.classes[0].sparse')
  printf '| %s | %s | %s | %.2f | %.1f %% | %.4f | %s | %s | %s |\n' "$name" "${p50:-?}" "${p99:-?}" \
    "$goodput" "$(calc "$goodput / $EXPECTED * 100")" "$jain" "$drops" "$marks" "$sparse"
  sleep 1
done
shaperctl -n la detach --dev va >/dev/null
stop_iperf_servers
exit 0
