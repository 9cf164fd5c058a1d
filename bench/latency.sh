#!/bin/sh
# Bounded delay and fairness inside one class: a 20 Mbit class and a ping every 50 ms,
# in three scenarios: 8 bulk TCP flows; 64 bulk TCP flows; 8 bulk TCP flows plus a UDP flood at
# 5x the class rate in the same class. For each variant of the class (plain EDT: one clock, a
# virtual FIFO; sparse flows first; fair shares; CoDel with ECN or dropping) it prints ping RTT,
# TCP (and UDP) goodput, their sum against the expected 20 Mbit x 1448/1538, Jain's index over
# the TCP flows, and the class's counters.
#
#   sudo bench/latency.sh [--bin build/cli/shaperctl] [SCENARIO...]   (flows8 flows64 udpflood)
#
# Pacing needs sch_fq: the measurement runs in the stock-kernel VM (vm/run.sh) unless this
# kernel has sch_fq. Takes about four minutes. Prints Markdown tables; no assertions.
set -eu

if [ -z "${SHAPERCTL_VM:-}" ] && [ -z "${SHAPERCTL_LATENCY_HERE:-}" ]; then
  here="$(cd "$(dirname "$0")" && pwd)"
  bin="$here/../build/cli/shaperctl"
  if [ "${1:-}" = --bin ]; then bin="$2"; shift 2; fi
  vm="$here/../vm"
  linkdir="$(mktemp -d)"
  trap 'rm -rf "$linkdir"' EXIT
  ln -s "$(readlink -f "$bin")" "$linkdir/shaperctl"
  exec "$vm/run.sh" --timeout 900 --bin "$linkdir/shaperctl" "$0" "$@"
fi

. "${LIB:-/usr/local/share/shaperctl-vm/lib.sh}"
RATE=20mbit EXPECTED=18.83 SECONDS_BULK=14
SCENARIOS=${*:-flows8 flows64 udpflood}
new_ns la
new_ns lb
veth_pair la va 10.9.0.1/24 lb vb 10.9.0.2/24
nsx la sysctl -qw net.ipv4.tcp_ecn=1   # the bulk senders negotiate ECN; CoDel may mark
shaperctl -n la attach --dev va >/dev/null
iperf_server lb 5201
iperf_server lb 5202
wait_listen lb 5201
wait_listen lb 5202

measure() {  # measure NAME OPTS FLOWS FLOOD
  name=$1 opts=$2 flows=$3 flood=$4
  shaperctl -n la set-default --dev va --none >/dev/null 2>&1 || true
  shaperctl -n la del-class --dev va --id 1 >/dev/null 2>&1 || true
  # shellcheck disable=SC2086
  shaperctl -n la add-class --dev va --id 1 --rate $RATE --overhead 24 $opts
  shaperctl -n la set-default --dev va --class 1
  iperf_tx la 10.9.0.2 5201 /tmp/bulk.json -P "$flows" -t $SECONDS_BULK &
  bulk=$!
  udp=""
  if [ "$flood" = 1 ]; then
    iperf_tx la 10.9.0.2 5202 /tmp/flood.json -u -b 100M -l 1400 -t $SECONDS_BULK &
    udp=$!
  fi
  sleep 3
  nsx la ping -n -i 0.05 -c 180 10.9.0.2 >/tmp/ping.txt 2>&1 || true
  wait $bulk || true
  [ -n "$udp" ] && { wait "$udp" || true; }
  rtts=$(grep -o 'time=[0-9.]*' /tmp/ping.txt | cut -d= -f2 | sort -n)
  n=$(echo "$rtts" | grep -c . || true)
  lost=$(grep -o '[0-9.]*% packet loss' /tmp/ping.txt | cut -d% -f1)
  p50=$(echo "$rtts" | awk -v n="$n" 'NR == int(n * 0.50 + 0.5) { print; exit }')
  p99=$(echo "$rtts" | awk -v n="$n" 'NR == int(n * 0.99 + 0.5) { print; exit }')
  goodput=$(jq '.end.sum_received.bits_per_second / 1e6' /tmp/bulk.json)
  jain=$(jq '[.end.streams[].receiver.bits_per_second] | (add * add) / (length * (map(. * .) | add))' /tmp/bulk.json)
  udp_mbit=0
  [ "$flood" = 1 ] && udp_mbit=$(jq '(.end.sum_received // .end.sum).bits_per_second / 1e6' /tmp/flood.json)
  st=$(status_json la va)
  drops=$(echo "$st" | jq -r '.classes[0] | "\(.drops_horizon)/\(.drops_aqm)/\(.drops_fair)"')
  marks=$(echo "$st" | jq -r '.classes[0] | "\(.ecn_marks)/\(.fair_marks)"')
  sparse=$(echo "$st" | jq '.classes[0].sparse')
  printf '| %s | %s | %s | %s | %.2f | %.1f %% | %.2f | %.4f | %s | %s | %s |\n' "$name" "${p50:-?}" \
    "${p99:-?}" "${lost:-?}" "$goodput" "$(calc "($goodput + $udp_mbit) / $EXPECTED * 100")" "$udp_mbit" "$jain" \
    "$drops" "$marks" "$sparse"
  sleep 1
}

for scenario in $SCENARIOS; do
  case $scenario in
    flows8) flows=8 flood=0 title="8 bulk TCP flows + ping" ;;
    flows64) flows=64 flood=0 title="64 bulk TCP flows + ping" ;;
    udpflood) flows=8 flood=1 title="8 bulk TCP flows + UDP flood at 100 Mbit (5x) + ping" ;;
    *) echo "latency.sh: unknown scenario $scenario (flows8 flows64 udpflood)" >&2; exit 2 ;;
  esac
  echo
  echo "### $title, one 20 Mbit class"
  echo
  echo "| variant | ping p50 ms | ping p99 ms | ping loss % | TCP goodput Mbit/s | of expected | UDP Mbit/s | Jain (TCP) | drops horizon/codel/fair | marks codel/fair | sparse |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  for variant in "plain EDT:--sparse off --fair off --aqm off" \
                 "sparse flows:--sparse on --fair off --aqm off" \
                 "sparse + fair shares (default):--sparse on --fair on --aqm off" \
                 "sparse + fair + CoDel ECN:--sparse on --fair on --aqm codel --ecn on" \
                 "sparse + fair + CoDel drop:--sparse on --fair on --aqm codel --ecn off"; do
    measure "${variant%%:*}" "${variant#*:}" "$flows" "$flood"
  done
done
shaperctl -n la detach --dev va >/dev/null
stop_iperf_servers
exit 0
