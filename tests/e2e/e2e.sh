#!/bin/sh
# shaperctl end-to-end scenario: runs inside the stock-kernel VM (busybox sh), started by
# tests/e2e/run-e2e.sh. Prints one result line per case:
#   PASS|FAIL|XFAIL|XPASS|SKIP|INFO NAME: TEXT [SECONDS s]
# (XFAIL: a known product bug reproduced, see the case; XPASS: that bug looks fixed.)
# Indented lines are details. Exits 1 if any case FAILed.
#
# usage (in the VM): e2e.sh [CASE...]   cases: baseline tcp100k tcp20m tcp200m flows8 flood
#                                       change burst rules borrow small udp prio7 fwd upgrade
#                                       (default: all; setup and the attach/detach checks
#                                       always run, on the devices the chosen cases use)
#
# Topology (network namespaces; the sender side is shaped, edt mode, sch_fq):
#   snd: va0 10.0.0.1 <-veth-> rcv: vb0 10.0.0.2     pair 0, GSO/TSO on
#   snd: va1 10.0.1.1 <-veth-> rcv: vb1 10.0.1.2     pair 1, GSO/TSO off (ethtool -K)
#   snd: va2 10.0.2.1 <-veth-> rcv: vb2 10.0.2.2     pair 2, GSO/TSO off, fq flow_limit 1000
#   fa: a0 10.1.0.1 <-> rt: ra 10.1.0.254 | rt: rb 10.2.0.254 <-> fb: b0 10.2.0.1
#       (forwarded: shaped on the router's egress rb)
# iperf3 servers run on the sending side and receivers run the client with -R, so every
# goodput below is measured by the receiver (iperf3 interval bytes).
#
# Expected goodput. Every segment is charged its L2 length + 24 bytes (--overhead 24:
# preamble, SFD, FCS, inter-frame gap). With MTU 1500:
#   TCP with timestamps: 1448 payload = 1500 - 20 IP - 20 TCP - 12 options; 1514 on the
#     wire with the 14-byte Ethernet header; charged 1514 + 24 = 1538
#     => goodput = rate * 1448 / 1538 (94.15 kbit/s at 100 kbit, 18.83 Mbit/s at 20 Mbit)
#   UDP 1472-byte datagrams: 1472 + 8 + 20 + 14 = 1514, charged 1538 => rate * 1472 / 1538
#   UDP 100-byte datagrams: 100 + 8 + 20 + 14 = 142, charged 166 => rate * 100 / 166
set -u

LIB=/usr/local/share/shaperctl-vm/lib.sh
[ -f "$LIB" ] || LIB="$(dirname "$0")/../../vm/lib.sh"
# shellcheck source=../../vm/lib.sh
. "$LIB"
JUDGE=/usr/local/share/shaperctl-vm/judge.sh
[ -f "$JUDGE" ] || JUDGE="$(dirname "$0")/judge.sh"
# shellcheck source=judge.sh
. "$JUDGE"
# The borrow case (and its helpers) lives apart: this file is long enough.
BORROW=/usr/local/share/shaperctl-vm/borrow.sh
[ -f "$BORROW" ] || BORROW="$(dirname "$0")/borrow.sh"
# shellcheck source=borrow.sh
. "$BORROW"

PASSES=0 FAILS=0 XFAILS=0 XPASSES=0 SKIPS=0
T_START=$(uptime_s)
CASE_T0=$T_START
TCP_FRAC="1448 / 1538"

begin() { CASE_T0=$(uptime_s); echo; echo "=== $*"; }
note() { echo "  $*"; }
# result KIND NAME TEXT
result() {
  local _t
  _t=$(awk -v a="$CASE_T0" -v b="$(uptime_s)" 'BEGIN { printf "%.1f", b - a }')
  echo "$1 $2: $3 [${_t} s]"
  case $1 in
    PASS) PASSES=$((PASSES + 1)) ;;
    FAIL) FAILS=$((FAILS + 1)) ;;
    XFAIL) XFAILS=$((XFAILS + 1)) ;;
    XPASS) XPASSES=$((XPASSES + 1)) ;;
    SKIP) SKIPS=$((SKIPS + 1)) ;;
  esac
}
# p99 [FILE]: the 99th percentile of the numbers in FILE (stdin), one a line; nothing if none.
p99() { pct 0.99 "$@"; }
# pct Q [FILE]: the Q-quantile (nearest rank) of the numbers in FILE (stdin); nothing if none.
pct() { local _q=$1; shift; sort -n "$@" | awk -v q="$_q" '{ v[NR] = $1 } END { if (NR) print v[int(NR * q + 0.5)] }'; }
# within MEASURED EXPECTED TOL_PCT
within() { cond "$1 >= $2 * (1 - $3 / 100) && $1 <= $2 * (1 + $3 / 100)"; }
# check_rate NAME MEASURED_BPS EXPECTED_BPS TOL_PCT [MORE [RUN_BPS]]: MEASURED within the bound;
# with RUN_BPS (goodput_run_bps) the upper bound is judged on that instead.
check_rate() {
  local _k=FAIL _hi=${6:-$2}
  cond "$2 >= $3 * (1 - $4 / 100) && $_hi <= $3 * (1 + $4 / 100)" && _k=PASS
  result "$_k" "$1" "$(fmt_rate "$2" "$3") goodput${6:+ from 0.5 s on, $(fmt_num "$6" "$3") over the run} (expected $(fmt_num "$3" "$3"), bound ±$4%)${5:+; $5}"
}
# backlogged_enough "JUDGED WINDOWS" (clock_backlogged): at least half of the windows, and 2.
backlogged_enough() { set -- $1; [ "$1" -ge 2 ] && [ $(($1 * 2)) -ge "$2" ]; }
# judge_goodput NAME JSON SKIP_S EXPECTED_BPS TOL_PCT "JUDGED WINDOWS" [MORE]: the receiver's
# goodput of one class among several: over the whole run above the bound fails (goodput_run_bps);
# from SKIP_S on below it fails only if the class held a backlog in enough windows to say so
# (else SKIP, with what was seen).
judge_goodput() {
  local _k=PASS _why="" _run _late _b="$6"
  _run=$(goodput_run_bps "$2") _late=$(goodput_bps "$2" "$3")
  if cond "$_run > $4 * (1 + $5 / 100)"; then _k=FAIL _why="; above the bound over the run"
  elif cond "$_late < $4 * (1 - $5 / 100)"; then
    if backlogged_enough "$_b"; then _k=FAIL; else _k=SKIP _why="; the class was backlogged too little to judge"; fi
  fi
  result "$_k" "$1" "$(fmt_rate "$_late" "$4") goodput from $3 s on, $(fmt_num "$_run" "$4") over the run (expected $(fmt_num "$4" "$4"), bound ±$5%); backlogged in ${_b% *} of ${_b#* } windows${7:+; $7}$_why"
}
# run_ok NAME CMD...: runs a setup command; on failure records FAIL NAME and returns 1.
run_ok() {
  local _name _out
  _name=$1
  shift
  if ! _out=$("$@" 2>&1); then
    result FAIL "$_name" "'$*' failed: $_out"
    return 1
  fi
  [ -z "$_out" ] || note "$_out"
}
# iperf_failed NAME JSON: true (and FAIL recorded) if iperf3 reported an error.
iperf_failed() {
  local _e
  _e=$(iperf_error "$2")
  [ -z "$_e" ] && return 1
  result FAIL "$1" "iperf3: $_e"
}
sleep_until() {
  sleep "$(awk -v t="$1" -v n="$(uptime_s)" 'BEGIN { d = t - n; printf "%.2f", (d > 0 ? d : 0) }')"
}
# klass NS DEV ARGS...: change-class of class 1 (every case reconfigures it).
klass() { local ns=$1 dev=$2; shift 2; shaperctl -n "$ns" change-class --dev "$dev" --id 1 "$@"; }

WANT="${*:-baseline tcp100k tcp20m tcp200m flows8 flood delay change burst rules borrow small udp prio7 fwd upgrade}"
# The class's delay histogram against ping. Class 7 (2 Mbit/s, a 100 ms horizon, no burst) has
# two children: class 9 takes a UDP stream at four times the rate, so the parent's clock stands
# near its horizon; class 8 takes only the pings of mark 8, which wait for the parent's clock
# (up to 100 ms; less where the guest's stream paused and the backlog drained; a ping refused at
# the horizon is an error to its sender, which sends it again later: no loss). A class's
# histogram counts its own packets, so class 8's holds exactly the pings' holds; each RTT is
# that hold plus the path's own (the fastest of 5 pings outside class 8). The histogram's p50
# and p99 must each lie within the width of the bucket that holds ping's, or within twice the
# path's own jitter (those 5 pings' median less fastest) where that is wider: a TCG guest's
# jitter exceeds the narrowest buckets.
delay_within_bucket() {  # HIST_NS PING_NS BOUNDS_JSON SPREAD_NS: |hist - ping| <= the tolerance
  local _w
  _w=$(echo "$3" | jq --argjson p "$2" --argjson s "$4" '[0] + map(. // 1e18) | . as $b
    | [range(1; length)] | map(select($b[.] >= $p)) | first as $i | [$b[$i] - $b[$i - 1], $s] | max')
  cond "($1 - $2 <= $_w) && ($2 - $1 <= $_w)"
}
case_delay() {
  local _j _bounds _h50 _h99 _rtts _base _spread _p50 _p99 _n _msg _rate
  begin "delay histogram of a class whose pings wait for its parent's backlog, against ping's RTTs"
  _rate=$(command -v udp_rate || true)
  if [ -z "$_rate" ]; then
    result SKIP delay-histogram "no udp_rate in the VM (run-e2e.sh ships it from beside shaperctl)"
    return
  fi
  run_ok delay-histogram shaperctl -n snd add-class --dev va0 --id 7 --rate 2mbit --burst 1514b --horizon 100ms &&
    run_ok delay-histogram shaperctl -n snd add-class --dev va0 --id 8 --parent 7 --rate 2mbit --sparse off &&
    run_ok delay-histogram shaperctl -n snd add-class --dev va0 --id 9 --parent 7 --rate 10mbit &&
    run_ok delay-histogram shaperctl -n snd add-rule --dev va0 --class 8 --pref 8 --mark 8 &&
    run_ok delay-histogram shaperctl -n snd add-rule --dev va0 --class 9 --pref 9 --proto udp --dport 5998 || return
  _base=$(nsx snd "${PING:-ping}" -n -i 0.1 -c 5 10.0.0.2 2>/dev/null | grep -o 'time=[0-9.]*' | cut -d= -f2 | sort -n)
  _spread=$(echo "$_base" | awk '{ v[NR] = $1 } END { if (NR) printf "%d", 2 * (v[int((NR + 1) / 2)] - v[1]) * 1e6 }')
  _base=$(echo "$_base" | head -1)
  ip netns exec snd "$_rate" send --dst 10.0.0.2 --port 5998 --rate 8000000 --seconds 15 --size 1000 >/dev/null 2>&1 &
  local _stream=$!
  sleep 1
  nsx snd "${PING:-ping}" -n -m 8 -i 0.1 -c 20 -W 1 10.0.0.2 >/tmp/dl-ping.txt 2>&1 || true
  # By its command line: `ip netns exec` may run the sender as its child, which $! is not.
  kill $(ps -o pid,args | awk '/[u]dp_rate send .*--port 5998/ { print $1 }') $_stream 2>/dev/null || true
  wait $_stream 2>/dev/null || true
  note "senders left: $(ps -o pid,args | grep -c '[u]dp_rate send')"
  _j=$(status_json snd va0 | jq -c '{b: .delay_bucket_le_ns, c: (.classes[] | select(.id == 8))}')
  _bounds=$(echo "$_j" | jq -c .b)
  _h50=$(echo "$_j" | jq '.c.delay_p50_ns // -1')
  _h99=$(echo "$_j" | jq '.c.delay_p99_ns // -1')
  _rtts=$(grep -o 'time=[0-9.]*' /tmp/dl-ping.txt | cut -d= -f2 | sort -n)
  _n=$(echo "$_rtts" | grep -c . || true)
  _p50=$(echo "$_rtts" | awk -v b="${_base:-0}" '{ v[NR] = ($1 - b) * 1e6 } END { if (NR) printf "%d", v[int((NR + 1) / 2)] }')
  _p99=$(echo "$_rtts" | awk -v b="${_base:-0}" '{ v[NR] = ($1 - b) * 1e6 } END { if (NR) printf "%d", v[int(NR * 0.99 + 0.5)] }')
  note "class 8: $(echo "$_j" | jq -c '.c | {packets, drops, delay_buckets}'); ping RTTs (ms): $(echo $_rtts); $(tail -2 /tmp/dl-ping.txt | head -1)"
  _msg="class 8's histogram p50 $_h50 ns, p99 $_h99 ns; its pings less the path's ${_base:-?} ms (jitter tolerance ${_spread:-?} ns): p50 ${_p50:-?} ns, p99 ${_p99:-?} ns of $_n replies"
  if [ "$_n" -ge 5 ] && [ "$_h50" -ge 0 ] && delay_within_bucket "$_h50" "$_p50" "$_bounds" "${_spread:-0}" &&
      delay_within_bucket "$_h99" "$_p99" "$_bounds" "${_spread:-0}"; then
    result PASS delay-histogram "$_msg"
  else
    result FAIL delay-histogram "$_msg (bound: each within the width of ping's bucket, or twice the path's jitter)"
  fi
  shaperctl -n snd del-rule --dev va0 --pref 8 >/dev/null
  shaperctl -n snd del-rule --dev va0 --pref 9 >/dev/null
  wait_drained snd va0 7 >/dev/null 2>&1 || sleep 1
  for c in 8 9 7; do shaperctl -n snd del-class --dev va0 --id $c >/dev/null || true; done
}

want() { case " $WANT " in *" $1 "*) return 0 ;; esac; return 1; }

# --- setup ------------------------------------------------------------------

begin "setup: kernel $(uname -r), $(nproc) cpus, $SHAPERCTL"
for ns in snd rcv fa rt fb; do new_ns "$ns" || { echo "FAIL setup: netns $ns"; exit 1; }; done
veth_pair snd va0 10.0.0.1/24 rcv vb0 10.0.0.2/24 &&
  veth_pair snd va1 10.0.1.1/24 rcv vb1 10.0.1.2/24 &&
  veth_pair snd va2 10.0.2.1/24 rcv vb2 10.0.2.2/24 &&
  veth_pair fa a0 10.1.0.1/24 rt ra 10.1.0.254/24 &&
  veth_pair rt rb 10.2.0.254/24 fb b0 10.2.0.1/24 &&
  ip -n fa route add 10.2.0.0/24 via 10.1.0.254 &&
  ip -n fb route add 10.1.0.0/24 via 10.2.0.254 &&
  nsx rt sysctl -qw net.ipv4.ip_forward=1 ||
  { echo "FAIL setup: topology"; exit 1; }
for d in va1 va2; do
  nsx snd ethtool -K $d gso off tso off || { echo "FAIL setup: ethtool -K $d gso off tso off"; exit 1; }
  note "$d: $(nsx snd ethtool -k $d | grep -E '^(tcp-segmentation-offload|generic-segmentation-offload):' | tr '\n' ' ')"
done
# A non-default root on rb, which detach must bring back.
tc -n rt qdisc replace dev rb root fq_codel limit 1234 || { echo "FAIL setup: fq_codel on rb"; exit 1; }
iperf_server snd 5201   # via va0
iperf_server snd 5204   # via va0, sent from port 5204: the rules case puts it in class 2
iperf_server snd 5205   # via va0, the flood case's UDP
iperf_server snd 5202   # via va1
iperf_server snd 5203   # via va2
iperf_server rcv 5201   # the burst probe sends from snd
iperf_server fa 5201    # forwarded
for s in "snd 5201" "snd 5202" "snd 5203" "snd 5204" "rcv 5201" "fa 5201"; do
  # shellcheck disable=SC2086
  wait_listen $s || { echo "FAIL setup: iperf3 server $s did not start"; exit 1; }
done
trap 'stop_iperf_servers' EXIT

# root_qdisc NS DEV: the root qdisc's kind and options, as JSON.
root_qdisc() {
  tc -n "$1" -j qdisc show dev "$2" | jq -c '[.[] | select(.root == true) | {kind, options}]'
}
PRIOR_va0=$(root_qdisc snd va0) PRIOR_va1=$(root_qdisc snd va1) PRIOR_va2=$(root_qdisc snd va2)
PRIOR_rb=$(root_qdisc rt rb)
note "prior roots: va0 $PRIOR_va0, va1 $PRIOR_va1, va2 $PRIOR_va2, rb $PRIOR_rb"

# --- cases ------------------------------------------------------------------

BASE_BPS=0 ATTACH_OK=1 ATTACHED=""
case_baseline() {
  begin "baseline: unshaped TCP over va0, 2 s"
  iperf_rx rcv 10.0.0.1 5201 /tmp/base.json -t 2 -i 0.5
  iperf_failed unshaped-veth /tmp/base.json && return
  BASE_BPS=$(goodput_bps /tmp/base.json 0.5)
  result INFO unshaped-veth "$(fmt_rate "$BASE_BPS") TCP goodput without shaping (this VM's ceiling)"
}

# The hook attach must take: TCX from 6.6 on (the kernel's version is fine here: a test knows
# what it runs on), tc clsact before.
if [ "$(uname -r | awk -F. '{ print ($1 * 1000 + $2 >= 6006) }')" = 1 ]; then
  HOOK="tcx egress"
else
  HOOK="tc clsact egress"
fi
# attach_check NS DEV [attach args]: attach and assert the hook and fq on every tx queue.
attach_check() {
  local _ns _dev _st
  _ns=$1 _dev=$2
  shift 2
  run_ok "attach-$_dev" shaperctl -n "$_ns" attach --dev "$_dev" "$@" || { ATTACH_OK=0; return 1; }
  ATTACHED="$ATTACHED $_dev"
  _st=$(status_json "$_ns" "$_dev" | jq -c '{mode, attach_point, qdisc}')
  note "$_dev: $_st"
  if [ "$(echo "$_st" | jq --arg hook "$HOOK" '.qdisc.fq_everywhere == true and .mode == "edt" and .attach_point == $hook')" = true ]; then
    result PASS "attach-$_dev" "mode edt on $HOOK, qdisc.fq_everywhere true ($(echo "$_st" |
      jq -r '"root \(.qdisc.root), fq on \(.qdisc.fq_queues)/\(.qdisc.queues) tx queues"'))"
  else
    result FAIL "attach-$_dev" "status says $_st (expected mode edt on $HOOK, fq everywhere)"
  fi
  run_ok "attach-$_dev" shaperctl -n "$_ns" add-class --dev "$_dev" --id 1 --rate 20mbit --overhead 24 &&
    run_ok "attach-$_dev" shaperctl -n "$_ns" set-default --dev "$_dev" --class 1
}

case_tcp100k() {
  local _k0 _c0 _t0 _on0 _p0 _p1 _exp _i _name _c1 _t1 _on1 _tcp0 _gso _rttlog _tol
  begin "one TCP flow at 100 kbit on va0 (GSO/TSO on) and va1 (off) at once, 16 s, first 3 s skipped, tcp_tso_rtt_log=0"
  # TCP sizes its GSO packets itself (the device's gso off only moves the segmentation after
  # sch_fq). Since Linux 5.18, tcp_tso_rtt_log (default 9) adds gso_max_size >> (min_rtt /
  # 512 us) bytes: with the sub-millisecond min RTT of an idle veth that is 32-64 KB, so GSO
  # packets of 6-45 segments, 0.7-5.5 s each at 100 kbit. Each is charged and sent as a unit:
  # the next lands beyond the 2 s horizon and is dropped whole, and RTOs stall the flow for
  # seconds (measured: 20 drops in 11 s, 0-byte seconds, 3x bursts, goodput off by +-11%).
  # With tcp_tso_rtt_log=0 GSO packets stay at ~2 segments (pacing-rate autosizing) and the
  # run is smooth. This is a product limitation at low rates: see the report.
  _rttlog=$(nsx snd sysctl -n net.ipv4.tcp_tso_rtt_log 2>/dev/null || echo 9)
  nsx snd sysctl -qw net.ipv4.tcp_tso_rtt_log=0
  klass snd va0 --rate 100kbit && klass snd va1 --rate 100kbit ||
    { result FAIL tcp-100kbit "change-class failed"; return; }
  _c0=$(class_counters snd va1 1) _t0=$(tx_counters snd va1) _on0=$(class_counters snd va0 1)
  _tcp0=$(tcp_stats snd)
  # The first 3 s are TCP's start-up, not the class: the initial window (10 segments) takes
  # 1.2 s at 100 kbit, past the 1 s initial RTO, and the spurious retransmissions that follow
  # leave a second or two short (5.8-8.7 KB instead of 11.6). From then on each second carries
  # 4 or 5 GSO packets of 2 segments: 13 s keep that granularity (2.9 KB) near 2 %.
  clock_start snd va0 1 17 /tmp/k0.clock
  _k0=$CLOCK_PID
  clock_start snd va1 1 17 /tmp/k1.clock
  iperf_rx rcv 10.0.0.1 5201 /tmp/k0.json -t 16 -i 1 &
  _p0=$!
  iperf_rx rcv 10.0.1.1 5202 /tmp/k1.json -t 16 -i 1 &
  _p1=$!
  wait $_p0
  wait $_p1
  wait "$_k0" "$CLOCK_PID"
  wait_drained snd va0 1
  wait_drained snd va1 1
  _c1=$(class_counters snd va1 1) _t1=$(tx_counters snd va1) _on1=$(class_counters snd va0 1)
  note "TCP in snd (both flows): $(tcp_stats_delta "$_tcp0" "$(tcp_stats snd)")"
  _exp=$(calc "100000 * $TCP_FRAC")
  for _i in 0 1; do
    if [ $_i = 0 ]; then
      _name=tcp-100kbit-gso-on _tol=5 _gso=$(echo "$_on0 $_on1" | awk '{ printf "%d GSO packets of %d segments, %d horizon drops", $6 - $1, $7 - $2, $9 - $4 }')
    else
      _name=tcp-100kbit-gso-off _tol=10 _gso=$(echo "$_c0 $_c1" | awk '{ printf "%d GSO packets of %d segments, %d horizon drops", $6 - $1, $7 - $2, $9 - $4 }')
    fi
    iperf_failed $_name /tmp/k$_i.json && continue
    note "$_name per-second receive bytes: $(jq -r '[.intervals[].sum.bytes] | join(" ")' /tmp/k$_i.json)"
    judge_goodput $_name /tmp/k$_i.json 3 "$_exp" "$_tol" \
      "$(clock_backlogged /tmp/k$_i.clock 3.2 16)" "tc saw $_gso"
  done
  # Per-segment charging: with GSO off at the device, TCP still hands tc GSO packets (it always
  # builds them); they are segmented after sch_fq, so the device counts segments. Every byte
  # charged must be a transmitted byte plus 24 per transmitted segment, exactly.
  check_identity gso-off-per-segment-charge "$_c0" "$_c1" "$_t0" "$_t1"
  nsx snd sysctl -qw net.ipv4.tcp_tso_rtt_log="$_rttlog"
}

# check_identity NAME CLASS0 CLASS1 TX0 TX1: charged bytes == tx bytes + 24 * tx packets.
check_identity() {
  local _line _k
  _line=$(echo "$2 $3 $4 $5" | awk '{
    charged = $8 - $3; pk = $13 - $11; by = $14 - $12; want = by + 24 * pk
    printf "%d %d %d %d %d", (charged == want), charged, by, pk, $6 - $1 }')
  set -- "$1" $_line
  if [ "$2" = 1 ]; then _k=PASS; else _k=FAIL; fi
  result $_k "$1" "charged $3 B = $4 B transmitted + 24 x $5 segments (tc saw $6 packets)"
}

# Where rate_run sends: class 1 of RC_DEV in RC_NS, from the iperf3 server RC_SERVER:RC_PORT
# (on the sending side) to the receiver in RC_CLIENT; va0 by default.
RC_NS=snd RC_DEV=va0 RC_CLIENT=rcv RC_SERVER=10.0.0.1 RC_PORT=5201
# rate_run NAME RATE_BPS SECONDS [iperf3 args]: TCP in class 1 at RATE_BPS, sampled by
# class_clock; leaves /tmp/NAME.json (receiver) and /tmp/NAME.clock (the datapath).
rate_run() {
  local _n=$1 _r=$2 _s=$3
  shift 3
  klass "$RC_NS" "$RC_DEV" --rate "$(calc "$_r / 1000" | cut -d. -f1)kbit" || { echo "change-class failed"; return 1; }
  clock_start "$RC_NS" "$RC_DEV" 1 "$(calc "$_s + 1.5")" "/tmp/$_n.clock" "$(cond "$_r > 50e6" && echo 2 || echo 10)"
  iperf_rx "$RC_CLIENT" "$RC_SERVER" "$RC_PORT" "/tmp/$_n.json" -t "$_s" -i 0.5 "$@"
  wait "$CLOCK_PID" || { echo "class_clock failed: $(cat "/tmp/$_n.clock.err")"; return 1; }
}

# rate_case NAME RATE_BPS TOL_PCT SECONDS [iperf3 args]: one class at RATE_BPS, judged by the
# datapath's samples (judge.sh) from 0.6 s on (1.1 s with -P: the flows open one by one), and
# the receiver's goodput over the run never above the expectation + TOL_PCT. Too few windows to judge: once
# more, then at half the rate, which a starved guest can offer; after that SKIP with what was
# seen.
rate_case() {
  local _n=$1 _r=$2 _tol=$3 _s=$4 _try _v _g _run _e _at _from=0.6
  shift 4
  case " $* " in *" -P "*) _from=1.1 ;; esac
  for _try in 1 2 3; do
    [ "$_try" != 3 ] || _r=$(calc "$_r / 2")
    _v=$(rate_run "$_n" "$_r" "$_s" "$@") || { result FAIL "$_n" "$_v"; return; }
    iperf_failed "$_n" "/tmp/$_n.json" && return
    _e=$(calc "$_r * $TCP_FRAC") _g=$(goodput_bps "/tmp/$_n.json" 0.5) _run=$(goodput_run_bps "/tmp/$_n.json")
    _v=$(clock_judge "/tmp/$_n.clock" "$_r" "$_from" "$_s" "$_tol")
    _at="at $(fmt_num "$_r" 1e6) Mbit: receiver $(fmt_rate "$_g" 1e6) goodput from 0.5 s on, $(fmt_num "$_run" 1e6) over the run (expected $(fmt_num "$_e" 1e6))"
    note "$_n try $_try $_at; ${_v#*|}"
    if cond "$_run > $_e * (1 + $_tol / 100)"; then
      result FAIL "$_n" "$_at: above the bound +$_tol%; ${_v#*|}"; return
    fi
    case ${_v%%|*} in
      PASS) result PASS "$_n" "$_at; ${_v#*|}"; return ;;
      FAIL) result FAIL "$_n" "$_at; ${_v#*|}"; return ;;
    esac
  done
  result SKIP "$_n" "the guest could not keep the class backlogged, even at half the rate: $_at; ${_v#*|}"
}

case_tcp20m() {
  begin "one TCP flow at 20 Mbit on va0, 3 s"
  rate_case tcp-20mbit 20e6 3 3
}

case_tcp200m() {
  local _ceil
  begin "one TCP flow at 200 Mbit on va0, 2.5 s (and 1 Gbit for information)"
  rate_case tcp-200mbit 200e6 5 2.5
  # 1 Gbit is beyond what TCG moves: that run measures the VM's ceiling through the same path.
  klass snd va0 --rate 1gbit || return
  iperf_rx rcv 10.0.0.1 5201 /tmp/g1.json -t 2 -i 0.5
  iperf_failed tcp-1gbit /tmp/g1.json && return
  _ceil=$(goodput_bps /tmp/g1.json 0.5)
  result INFO tcp-1gbit "$(fmt_rate "$_ceil" 1e6) goodput (expected $(fmt_num "$(calc "1e9 * $TCP_FRAC")" 1e6) if the VM could: TCG is the limit$([ "$BASE_BPS" = 0 ] || echo "; unshaped $(fmt_rate "$BASE_BPS" 1e6) at the start"))"
}

# Jain's index over an iperf3 JSON's streams.
jain() { jq '[.end.streams[].receiver.bits_per_second] | (add * add) / (length * (map(. * .) | add)) * 10000 | round / 10000' "$1"; }

case_flows8() {
  local _rtts _n _p99 _jain
  begin "8 parallel TCP flows in one 20 Mbit class on va0 and a ping (sparse flow), 6 s"
  klass snd va0 --rate 20mbit || { result FAIL tcp-8flows-20mbit "change-class failed"; return; }
  local _tcp0 _act0 _sp0 _sp _segs0
  _tcp0=$(tcp_stats snd) _act0=$(class_actions snd va0 1) _segs0=$(tcp_segs snd)
  clock_start snd va0 1 7.5 /tmp/p8.clock
  iperf_rx rcv 10.0.0.1 5201 /tmp/p8.json -t 6 -P 8 -i 0.5 &
  local _bulk=$! _v _k
  sleep 2
  _sp0=$(class_sparse snd va0 1)
  nsx snd "${PING:-ping}" -n -i 0.05 -c 60 10.0.0.2 >/tmp/p8-ping.txt 2>&1 || true
  _sp=$(( $(class_sparse snd va0 1) - ${_sp0:-0} ))
  wait $_bulk
  wait "$CLOCK_PID"
  local _act1 _drops _fair
  _act1=$(class_actions snd va0 1)
  note "class 1: $(class_actions_delta "$_act0" "$_act1"); TCP in snd: $(tcp_stats_delta "$_tcp0" "$(tcp_stats snd)")"
  iperf_failed tcp-8flows-20mbit /tmp/p8.json && return
  # Local TCP senders without ECN (Debian's tcp_ecn=2 does not ask for it), on the device their
  # route leaves by: a drop there (fair shares, or the horizon when a busy host stalls the
  # guest) is refused to the socket's transmit, which sends the packet again later and shrinks
  # its window: a signal, not a loss. At most 0.1 % of the segments are retransmitted.
  _drops=$(( $(action_delta drops_aqm "$_act0" "$_act1") + $(action_delta drops_horizon "$_act0" "$_act1") ))
  _fair=$(action_delta drops_fair "$_act0" "$_act1")
  set -- $_segs0 $(tcp_segs snd)
  local _re=$(($3 - $1)) _out=$(($4 - $2))
  _msg="$_re of $_out segments retransmitted; class drops $_fair by fair shares, $_drops at the horizon and by CoDel; TCP in snd: $(tcp_stats_delta "$_tcp0" "$(tcp_stats snd)")"
  if [ "$_out" -gt 0 ] && [ $((_re * 1000)) -le "$_out" ]; then result PASS loss-free-8flows "$_msg"
  else result FAIL loss-free-8flows "$_msg (bound: retransmits <= 0.1 %)"; fi
  _per=$(jq -r '[.end.streams[].receiver.bits_per_second / 1e6 | . * 100 | round / 100] | sort | join(" ")' /tmp/p8.json)
  _jain=$(jain /tmp/p8.json)
  # The rate is judged from 1.1 s on (the datapath's samples, judge.sh): eight connections open
  # one after another, and on a starved guest the last of them starts late.
  note "tcp-8flows-20mbit intervals: $(jq -r '[.intervals[].sum.bits_per_second / 1e6 | . * 100 | round / 100] | join(" ")' /tmp/p8.json) Mbit/s"
  _v=$(clock_judge /tmp/p8.clock 20e6 1.1 6 5)
  _k=${_v%%|*}
  [ "$_k" != UNJUDGED ] || _k=SKIP
  if cond "$(goodput_run_bps /tmp/p8.json) > 20e6 * $TCP_FRAC * 1.05"; then _k=FAIL; fi
  result "$_k" tcp-8flows-20mbit "receiver $(fmt_rate "$(goodput_bps /tmp/p8.json 1)" 1e6) from 1 s on, $(fmt_num "$(goodput_run_bps /tmp/p8.json)" 1e6) over the run (expected $(fmt_num "$(calc "20e6 * $TCP_FRAC")" 1e6), at most +5% over the run); ${_v#*|}; per flow $_per Mbit/s over the run, Jain $_jain"
  # Sparse flows: the ping leaves ahead of the backlog (plain EDT: ~400 ms). The datapath says
  # so (its sparse counter took at least every echo request); the RTT bound only tells ahead
  # from behind: a busy host stalls the TCG guest tens of ms now and then (a p99 of 24.9 ms
  # was seen with one host core kept busy), the backlog is ten times that.
  _rtts=$(grep -o 'time=[0-9.]*' /tmp/p8-ping.txt | cut -d= -f2 | sort -n)
  _n=$(echo "$_rtts" | grep -c . || true)
  _p99=$(echo "$_rtts" | p99)
  if [ "$_n" -ge 50 ] && [ "${_sp:-0}" -ge "$_n" ] && cond "${_p99:-1e9} <= 40"; then
    result PASS sparse-ping-under-8flows "ping p99 $_p99 ms over $_n replies, $_sp sparse packets in the class meanwhile (bounds: 40 ms, every request sparse; plain EDT ~400 ms)"
  elif [ "$_k" = SKIP ] && [ "$_n" -ge 50 ] && cond "${_p99:-1e9} <= 40"; then
    # The guest stalled through the judged windows (tcp-8flows-20mbit): a request that found the
    # class run dry had no backlog to jump, and left at once without counting as sparse.
    result SKIP sparse-ping-under-8flows "ping p99 $_p99 ms over $_n replies, ${_sp:-?} sparse packets in the class meanwhile: the guest stalled, the class ran dry under some requests (busy host)"
  else
    result FAIL sparse-ping-under-8flows "ping p99 ${_p99:-?} ms over $_n replies, ${_sp:-?} sparse packets in the class meanwhile (bounds: 40 ms, every request sparse)"
  fi
  # Fair shares: the bench measures 0.999 over 14 s; a generous bound for 6 s on TCG.
  if cond "$_jain >= 0.95"; then
    result PASS fairness-8flows "Jain $_jain over the 8 bulk flows in 6 s (bound 0.95)"
  else
    result FAIL fairness-8flows "Jain $_jain over the 8 bulk flows in 6 s (bound 0.95)"
  fi

}

case_flood() {
  local _rtts _n _p90 _p99 _j _tcp _udp _share _sp0 _sp _act0 _act1 _fdrops _k _tcp0
  begin "8 TCP flows + a 100 Mbit UDP flood (5x) in one 20 Mbit class on va0, and a ping, 8 s"
  klass snd va0 --rate 20mbit || { result FAIL udp-flood-in-class "change-class failed"; return; }
  _act0=$(class_actions snd va0 1) _tcp0=$(tcp_stats snd)
  iperf_rx rcv 10.0.0.1 5201 /tmp/fl-tcp.json -t 8 -P 8 &
  local _bulk=$!
  iperf_rx rcv 10.0.0.1 5205 /tmp/fl-udp.json -t 8 -u -b 100M -l 1400 &
  local _flood=$!
  sleep 2
  _sp0=$(class_sparse snd va0 1)
  nsx snd "${PING:-ping}" -n -i 0.05 -c 100 10.0.0.2 >/tmp/fl-ping.txt 2>&1 || true
  _sp=$(( $(class_sparse snd va0 1) - ${_sp0:-0} ))
  wait $_bulk $_flood
  _act1=$(class_actions snd va0 1)
  iperf_failed udp-flood-in-class /tmp/fl-tcp.json && return
  _tcp=$(jq '.end.sum_received.bits_per_second / 1e6 * 100 | round / 100' /tmp/fl-tcp.json)
  _udp=$(jq '(.end.sum_received // .end.sum).bits_per_second / 1e6 * 100 | round / 100' /tmp/fl-udp.json)
  _j=$(jain /tmp/fl-tcp.json)
  note "udp-flood-in-class: TCP per flow $(jq -r '[.end.streams[].receiver.bits_per_second / 1e6 | . * 100 | round / 100] | sort | join(" ")' /tmp/fl-tcp.json) Mbit/s; class 1: $(class_actions_delta "$_act0" "$_act1"); TCP in snd: $(tcp_stats_delta "$_tcp0" "$(tcp_stats snd)")"
  _rtts=$(grep -o 'time=[0-9.]*' /tmp/fl-ping.txt | cut -d= -f2)
  _n=$(echo "$_rtts" | grep -c . || true)
  _p90=$(echo "$_rtts" | pct 0.9) _p99=$(echo "$_rtts" | p99)
  _share=$(awk 'BEGIN { printf "%.2f", 20 / 9 }')
  # The flood is held near two fair shares (of 9 flows); the TCP flows share the rest evenly;
  # the ping leaves ahead of the backlog: the datapath says so (its sparse counter took every
  # echo request), the RTT only tells ahead (~1 ms) from behind (hundreds of ms). Its p90, not
  # its p99: one guest stall beside the host's tests (54 ms once) takes the two worst replies.
  _msg="ping p90 ${_p90:-?} ms, p99 ${_p99:-?} ms over $_n replies, $_sp sparse packets meanwhile; TCP $_tcp Mbit/s (Jain $_j), UDP $_udp Mbit/s (share $_share)"
  if [ "$_n" -ge 80 ] && [ "${_sp:-0}" -ge "$_n" ] &&
      cond "${_p90:-1e9} <= 40 && $_j >= 0.95 && $_udp <= 3 * $_share && $_tcp >= 12"; then
    result PASS udp-flood-in-class "$_msg"
  else
    result FAIL udp-flood-in-class "$_msg (bounds: every request sparse, p90 40 ms, Jain 0.95, UDP 3 shares, TCP 12 Mbit/s)"
  fi
  # UDP is not held (no TCP small queues behind it): the flood is dropped past its share.
  _fdrops=$(action_delta drops_fair "$_act0" "$_act1")
  if [ "$_fdrops" -gt 0 ]; then _k=PASS; else _k=FAIL; fi
  result "$_k" udp-flood-dropped "$_fdrops packets dropped for a flow above its share (the flood's: bound, some), $(action_delta fair_holds "$_act0" "$_act1") TCP packets held to theirs"
  # sch_fq hashes socketless and unconnected packets into flows, pings by address alone; the
  # class goes into that hash, so a ping of class 1 never queues in class 9's fq flow.
  run_ok fq-flows-apart shaperctl -n snd add-class --dev va0 --id 9 --rate 100kbit --horizon 3s &&
    run_ok fq-flows-apart shaperctl -n snd add-rule --dev va0 --class 9 --pref 9 --mark 9 || return
  nsx snd "${PING:-ping}" -n -m 9 -s 1000 -i 0.01 -w 6 10.0.0.2 >/dev/null 2>&1 &
  local _slow=$!
  sleep 1
  nsx snd "${PING:-ping}" -n -i 0.05 -c 60 10.0.0.2 >/tmp/fq-ping.txt 2>&1 || true
  wait $_slow || true
  _rtts=$(grep -o 'time=[0-9.]*' /tmp/fq-ping.txt | cut -d= -f2)
  _n=$(echo "$_rtts" | grep -c . || true)
  _p99=$(echo "$_rtts" | p99)
  # Sharing class 9's fq flow would hold class 1's pings for seconds; 40 ms allows the guest's
  # own stalls on a busy host.
  _msg="class 1 ping p99 ${_p99:-?} ms over $_n replies while class 9 (100 kbit) holds seconds of pings to the same host"
  if [ "$_n" -ge 55 ] && cond "${_p99:-1e9} <= 40"; then
    result PASS fq-flows-apart "$_msg"
  else
    result FAIL fq-flows-apart "$_msg (bound 40 ms; seconds if it shared class 9's fq flow)"
  fi
  shaperctl -n snd del-rule --dev va0 --pref 9 >/dev/null
  wait_drained snd va0 9 >/dev/null 2>&1 || sleep 3
  shaperctl -n snd del-class --dev va0 --id 9 >/dev/null || true
}

case_change() {
  local _p _est20 _est5 _a _c _t1 _pre _post _msg _k _try
  begin "change-class 20 -> 5 Mbit under load on va0 (TCP, 8 s, change at ~3 s), judged by the datapath's samples"
  for _try in 1 2; do
    klass snd va0 --rate 20mbit || { result FAIL change-class-20-to-5mbit "change-class failed"; return; }
    sleep 0.2
    clock_start snd va0 1 9.5 /tmp/cc.clock
    iperf_rx rcv 10.0.0.1 5201 /tmp/cc.json -t 8 -i 0.5 &
    _p=$!
    sleep 0.9
    _est20=$(status_json snd va0 1s | jq '.classes[0].rate_estimate_bps')
    sleep_until "$(calc "$(uptime_s) + 3 - $(clock_now_s /tmp/cc.clock)")"
    # The change takes effect somewhere between asking (_a) and the command's return (_c): a
    # busy guest can take half a second between them. Before is judged up to _a, after from _c.
    _a=$(clock_now_s /tmp/cc.clock)
    klass snd va0 --rate 5mbit
    _c=$(clock_now_s /tmp/cc.clock)
    sleep 0.5
    _est5=$(status_json snd va0 1s | jq '.classes[0].rate_estimate_bps')
    wait $_p
    wait "$CLOCK_PID"
    iperf_failed change-class-20-to-5mbit /tmp/cc.json && return
    # Packets stamped before the change leave by the class clock as it stood then; from there on
    # every departure is at 5 Mbit. Before: never faster than 20 Mbit from the start; after:
    # never faster than 5 Mbit from that clock on, and each backlogged window at the rate.
    _t1=$(awk -v c="$_c" 'NR == 1 { t0 = $1 } { s = ($1 - t0) / 1e9 } s >= c { d = ($2 - t0) / 1e9; printf "%.3f", (d > c ? d : c); exit }' /tmp/cc.clock)
    _pre=$(clock_judge /tmp/cc.clock 20e6 0.6 "$(calc "$_a - 0.05")" 5)
    _post=$(clock_judge /tmp/cc.clock 5e6 "$(calc "$_t1 + 0.5")" 8 5 "$_t1")
    note "change asked at +$_a s, done by +$_c s, the old stamps done at +$_t1 s; before: ${_pre#*|}; after: ${_post#*|}"
    note "receiver intervals (start end Mbit/s): $(interval_rates /tmp/cc.json | awk '{ printf "%.1f-%.1f:%.2f ", $1, $2, $3 / 1e6 }')"
    _msg="before: ${_pre#*|}; after: ${_post#*|}; status rate_estimate $(fmt_num "$_est20" 1e6) -> $(fmt_num "$_est5" 1e6) Mbit/s charged (1 s samples, ±5% + 0.52 Mbit)"
    case "${_pre%%|*} ${_post%%|*}" in
      *FAIL*) _k=FAIL ;;
      "PASS PASS") _k=PASS ;;
      *) _k=UNJUDGED ;;
    esac
    # (busybox awk has no ^)
    if [ $_k != FAIL ] && ! cond "$_est20 - 20e6 <= 1524288 && 20e6 - $_est20 <= 1524288 && $_est5 - 5e6 <= 774288 && 5e6 - $_est5 <= 774288"; then
      _k=FAIL _msg="rate_estimate off: $_msg"
    fi
    [ $_k = UNJUDGED ] || break
  done
  [ $_k != UNJUDGED ] || _k=SKIP _msg="the guest could not keep the class backlogged: $_msg"
  result $_k change-class-20-to-5mbit "$_msg"
}

# burst_probe OUT: samples vb0's rx_bytes in rcv (every ~0.2 ms, 10 ms clock) while snd
# sends 90 UDP datagrams of 1472 bytes as fast as it can; writes "time bytes gap" lines to OUT
# when the bytes changed or the probe had not looked for 30 ms or more (gap: centiseconds since
# its last look). The guest has one vCPU: a stall of the guest blinds the probe as long.
burst_probe() {
  local _end _sp
  _end=$(( $(uptime_s | tr -d .) + 300 ))
  # shellcheck disable=SC2016
  nsx rcv sh -c 'last=x; p=""; while :; do read -r u x < /proc/uptime; read -r b < /sys/class/net/vb0/statistics/rx_bytes
      c=${u%.*}${u#*.}; g=$((c - ${p:-$c})); p=$c
      if [ "$b" != "$last" ] || [ $g -ge 3 ]; then echo "$u $b $g"; fi; last=$b; [ "$c" -ge "$1" ] && break; done' sh "$_end" >"$1" &
  _sp=$!
  sleep 0.3
  iperf_tx snd 10.0.0.2 5201 /tmp/burst-iperf.json -u -l 1472 -b 1G -k 90
  wait $_sp
}
# burst_analyse SAMPLES: "datagrams within 50 ms of the first one, seconds until the last, ms
# from the first to datagram 42 (the burst's last), ms from datagram 50 to 89 (paced)" (-1: not
# seen), then the ms the probe was blind (stalled) within each of those three spans: an arrival
# seen after a stall may have come any time during it. Datagrams are 1514 bytes on the wire;
# iperf3's control packets are far smaller, so the data starts at the first jump of >= 1400
# bytes between two samples.
burst_analyse() {
  awk 'function blind(from, to,   j, s) { for (j = from; j <= to; j++) s += bl[j]; return s }
    { t[NR] = $1; b[NR] = $2; bl[NR] = ($3 >= 3 ? ($3 - 1) * 10 : 0) }
    END {
      for (i = 2; i <= NR; i++) if (b[i] - b[i - 1] >= 1400) break
      if (i > NR) { print "0 0 -1 -1"; exit }
      t0 = t[i]; pre = b[i - 1]
      for (j = i; j <= NR && t[j] <= t0 + 0.05 + 1e-9; j++) w = b[j] - pre
      for (k = i; k <= NR && b[k] - pre < 90 * 1514; k++) {}
      s = i
      for (d = 0; d < 90; d++) {
        while (s <= NR && b[s] - pre < (d + 1) * 1514) s++
        at[d] = s <= NR ? (t[s] - t0) * 1000 : -1; seen[d] = s
      }
      printf "%d %.3f %.1f %.1f %d %d %d\n", int(w / 1514), (k <= NR ? t[k] - t0 : -1), at[42],
        (at[89] >= 0 && at[50] >= 0 ? at[89] - at[50] : -1),
        blind(i, k), blind(i, seen[42]), blind(seen[50], seen[89]) }' "$1"
}

case_burst() {
  local _T _w _span _espan _msg _burst _paced
  begin "burst: 1 Mbit class with --burst 64kb, idle, then 90 x 1514-byte datagrams at once (va0)"
  # Departure = max(now, clock - burst): after 0.52 s idle (64 KiB at 1 Mbit) a class owes
  # nothing for its first 65536 bytes. Charged 1538 per datagram, datagram k (from 0) leaves at
  # max(0, k x 12.304 - 524.288) ms: 43 at once (42 x 1538 <= 65536 < 43 x 1538), then one per
  # 12.304 ms from +4.8 ms: 47 by +50 ms, the last (k = 89) at 570.8 ms. Without the burst:
  # k x 12.304 ms, 5 by +50 ms, the last at 1095 ms. The probe's clock has 10 ms steps and
  # iperf3 takes a few ms to write the datagrams: up to 2 more are allowed in the window. The
  # span gets ±15%: on a busy host the guest's vCPUs stall for tens of ms (0.64 s seen once).
  _T=$(calc "1538 * 8 / 1e6")
  klass snd va0 --rate 1mbit --burst 64kb || { result FAIL burst-64kb-1mbit "change-class failed"; return; }
  sleep 1
  burst_probe /tmp/burst64.txt
  iperf_failed burst-64kb-1mbit /tmp/burst-iperf.json && return
  set -- $(burst_analyse /tmp/burst64.txt)
  _w=$1 _span=$2 _burst=$3 _paced=$4 _bspan=$5 _bburst=$6 _bpaced=$7 _espan=$(calc "89 * $_T - 65536 * 8 / 1e6")
  note "samples (s bytes): $(awk 'NR <= 400 { printf "%s:%s ", $1, $2 }' /tmp/burst64.txt | cut -c1-600)"
  # The burst's 43 arrive within half the time pacing alone would take them (258 ms), datagrams
  # 50 to 89 arrive paced (39 x 12.304 = 480 ms apart, ±15%), the last at its time (±15%); each
  # bound widened by the time the probe was blind within that span (a stalled guest releases
  # what fell due meanwhile at once, and sees it late). The count in the first 50 ms (47) is
  # judged only when the burst arrived within 20 ms: a starved guest writes (and its probe sees)
  # a datagram a millisecond, and datagrams written after their departure time leave as they
  # are written.
  _msg="$_w datagrams arrived within 50 ms of the first (expected 47: 43 at once + 4 paced; bound 40..49 when the burst took < 20 ms); the burst's 43rd after $_burst ms (bound < 258 + $_bburst blind); datagrams 50 to 89 $_paced ms apart (expected 480 ±15% ± $_bpaced ms blind); the last after $_span s (expected $(printf %.3f "$_espan") ±15% ± $_bspan ms blind)"
  if cond "$_burst >= 0 && $_burst < 258 + $_bburst" && cond "$_paced >= 408 - $_bpaced && $_paced <= 552 + $_bpaced" &&
     cond "$_span >= $_espan * 0.85 - $_bspan / 1000 && $_span <= $_espan * 1.15 + $_bspan / 1000" &&
     { cond "$_burst > 20" || cond "$_w >= 40 && $_w <= 49"; }; then
    result PASS burst-64kb-1mbit "$_msg"
  else
    result FAIL burst-64kb-1mbit "$_msg"
  fi

  begin "burst control: the same with --burst 0"
  klass snd va0 --burst 0 || { result FAIL burst-0-1mbit "change-class failed"; return; }
  sleep 1
  burst_probe /tmp/burst0.txt
  iperf_failed burst-0-1mbit /tmp/burst-iperf.json && return
  set -- $(burst_analyse /tmp/burst0.txt)
  _w=$1 _span=$2 _bspan=$5 _espan=$(calc "89 * $_T")
  _msg="$_w datagrams within 50 ms of the first (expected 5, bound <= 7), the last after $_span s (expected $(printf %.3f "$_espan") ±15% ± $_bspan ms blind)"
  if cond "$_w >= 1 && $_w <= 7" &&
     cond "$_span >= $_espan * 0.85 - $_bspan / 1000 && $_span <= $_espan * 1.15 + $_bspan / 1000"; then
    result PASS burst-0-1mbit "$_msg"
  else
    result FAIL burst-0-1mbit "$_msg"
  fi
}

# two_flows NAME1 EXP1 NAME2 EXP2 NOTE: TCP from snd ports 5201 and 5204 over va0 at once, 3 s;
# their receivers' JSON in /tmp/tf1.json and /tmp/tf2.json; 1 if either iperf3 failed.
two_flows() {
  local _p1 _p2
  iperf_rx rcv 10.0.0.1 5201 /tmp/tf1.json -t 3 -i 0.5 &
  _p1=$!
  iperf_rx rcv 10.0.0.1 5204 /tmp/tf2.json -t 3 -i 0.5 &
  _p2=$!
  wait $_p1
  wait $_p2
  iperf_failed "$1" /tmp/tf1.json && return 1
  iperf_failed "$3" /tmp/tf2.json && return 1
  return 0
}

case_rules() {
  local _e1 _e2 _hits _st _sum _sum_hi _e _g1 _g2 _msg
  begin "two classes selected by a rule on va0: sport 5204 -> class 2 (5 Mbit), the rest -> class 1 (10 Mbit), two TCP flows at once, 3 s"
  klass snd va0 --rate 10mbit --burst 0 || { result FAIL rules-two-classes "change-class failed"; return; }
  run_ok rules-two-classes shaperctl -n snd add-class --dev va0 --id 2 --rate 5mbit --overhead 24 &&
    run_ok rules-two-classes shaperctl -n snd add-rule --dev va0 --class 2 --pref 10 --proto tcp --sport 5204 ||
    return
  # Each class's receiver goodput says something of the shaper only while that class held a
  # backlog (class_clock of each): below half of its windows, once more, then SKIP. Above the
  # bound is a failure whatever the guest did.
  _e1=$(calc "10e6 * $TCP_FRAC") _e2=$(calc "5e6 * $TCP_FRAC")
  local _try _b1 _b2 _c1 _c2
  for _try in 1 2; do
    clock_start snd va0 1 4.5 /tmp/tf1.clock
    _c1=$CLOCK_PID
    clock_start snd va0 2 4.4 /tmp/tf2.clock
    _c2=$CLOCK_PID
    two_flows rules-class1-10mbit "" rules-class2-5mbit "" || return
    wait "$_c1" "$_c2"
    _b1=$(clock_backlogged /tmp/tf1.clock 0.6 3) _b2=$(clock_backlogged /tmp/tf2.clock 0.5 2.9)
    note "try $_try: class 1 backlogged in ${_b1% *} of ${_b1#* } windows, class 2 in ${_b2% *} of ${_b2#* }"
    backlogged_enough "$_b1" && backlogged_enough "$_b2" && break
  done
  _hits=$(status_json snd va0 | jq -r '.rules[] | select(.pref == 10) | "rule \"\(.match)\" matched \(.packets) packets"')
  judge_goodput rules-class1-10mbit /tmp/tf1.json 0.5 "$_e1" 5 "$_b1" "default class"
  judge_goodput rules-class2-5mbit /tmp/tf2.json 0.5 "$_e2" 5 "$_b2" "$_hits"

  begin "hierarchy: classes 1 and 2 at 8 Mbit under parent 3 at 10 Mbit, same two flows, 3 s shared by both"
  # A packet leaves at the latest of its class's and its parent's departures: the parent caps
  # the sum at 10 Mbit; how the two share it is not specified (no fair queueing between them).
  # Each flow's own iperf3 window would start when that flow did: on a busy guest one flow
  # runs alone for a while and the sum of two skewed averages exceeds the parent. So the sum
  # is measured over one window both flows share, from the receiver's TCP byte counts.
  run_ok hierarchy-parent-10mbit shaperctl -n snd add-class --dev va0 --id 3 --rate 10mbit --overhead 24 &&
    run_ok hierarchy-parent-10mbit klass snd va0 --rate 8mbit --parent 3 &&
    run_ok hierarchy-parent-10mbit shaperctl -n snd change-class --dev va0 --id 2 --rate 8mbit --parent 3 ||
    return
  clock_start snd va0 3 25 /tmp/hier.clock
  shared_window hierarchy-parent-10mbit || { kill "$CLOCK_PID"; return; }
  local _end _v
  _end=$(clock_now_s /tmp/hier.clock)
  kill "$CLOCK_PID" 2>/dev/null; wait "$CLOCK_PID" 2>/dev/null
  # The device carries the two children only: it is the parent's traffic, judged as one class
  # at 10 Mbit (judge.sh) while the parent holds a backlog, which it does once both flow.
  _v=$(clock_judge /tmp/hier.clock 10e6 0.6 "$_end" 5)
  note "parent 3 on va0: ${_v#*|}"
  # Judged on the bounds of the window (the readings take time on a slow guest): the sum over
  # the longest window it can have been must not exceed the parent, the sum over the shortest
  # must reach it.
  _e1=$(calc "8e6 * $TCP_FRAC") _e=$(calc "10e6 * $TCP_FRAC")
  _sum=$(calc "($SW_B1 + $SW_B2) * 8 / $SW_LONG") _sum_hi=$(calc "($SW_B1 + $SW_B2) * 8 / $SW_SHORT")
  _g1=$(calc "$SW_B1 * 8 / $SW_LONG") _g2=$(calc "$SW_B2 * 8 / $SW_LONG")
  _msg="sum of class 1 $(fmt_rate "$_g1" 1e6) + class 2 $(fmt_rate "$_g2" 1e6), each within its 8 Mbit ($(fmt_num "$_e1" 1e6) +5%), over the $SW_LONG s both flows ran at most (at least $SW_SHORT s: up to $(fmt_rate "$_sum_hi" 1e6))"
  _msg="$_msg; the parent by the datapath: ${_v#*|}"
  if cond "$_g1 > $_e1 * 1.05 || $_g2 > $_e1 * 1.05"; then
    result FAIL hierarchy-parent-10mbit "a child beyond its own 8 Mbit: $_msg"
  elif cond "$_sum > $_e * 1.05" || [ "${_v%%|*}" = FAIL ]; then
    result FAIL hierarchy-parent-10mbit "$(fmt_rate "$_sum" 1e6) goodput (expected $(fmt_num "$_e" 1e6), at most +5%); $_msg"
  elif [ "${_v%%|*}" = UNJUDGED ]; then
    result SKIP hierarchy-parent-10mbit "the parent held no backlog long enough to judge: $(fmt_rate "$_sum" 1e6) goodput; $_msg"
  else
    result PASS hierarchy-parent-10mbit "$(fmt_rate "$_sum" 1e6) goodput (expected $(fmt_num "$_e" 1e6), at most +5%); $_msg"
  fi
}

# shared_window NAME: flows to ports 5201 and 5204 at once; once both have received for
# 0.5 s, the bytes each received over the next 3 s in SW_B1 and SW_B2, and the window's length
# bounds in SW_SHORT and SW_LONG (guest seconds; the readings bracket their instants). The flows
# are asked for 30 s and stopped after the window: however starved the guest, they outlast it.
shared_window() {
  local _name=$1 _a _b _i=0 _g1 _g2 _p1 _p2
  iperf_rx rcv 10.0.0.1 5201 /tmp/sw1.json -t 30 &
  _p1=$!
  iperf_rx rcv 10.0.0.1 5204 /tmp/sw2.json -t 30 &
  _p2=$!
  # Both data connections established and receiving (the control connections carry bytes too,
  # so "receiving" is more than 64 KB each).
  until [ "$(tcp_rx_bytes rcv 5201 5204 | awk 'NR > 1 && $2 > 65536 { n[$1] = 1 } END { print length(n) }')" = 2 ]; do
    _i=$((_i + 1))
    [ "$_i" -lt 100 ] || break
    sleep 0.1
  done
  sleep 0.5
  _a=$(tcp_rx_bytes rcv 5201 5204)
  sleep 3
  _b=$(tcp_rx_bytes rcv 5201 5204)
  # Stop iperf3's clients in rcv (the servers in snd keep listening for later cases).
  pkill -INT -f "$IPERF3 -c 10.0.0.1 -p 520[14] " 2>/dev/null || true
  wait "$_p1" "$_p2" || true
  set -- $(printf '%s\n' "$_a" | head -1) $(printf '%s\n' "$_b" | head -1)
  SW_SHORT=$(printf %.2f "$(calc "$3 - $2")") SW_LONG=$(printf %.2f "$(calc "$4 - $1")")
  # Per port, the bytes of its biggest connection (the data one) at each reading.
  _g1=$(printf '%s\n' "$_a" | awk 'NR > 1 && $1 == 5201 && $2 > m { m = $2 } END { print m + 0 }')
  _g2=$(printf '%s\n' "$_b" | awk 'NR > 1 && $1 == 5201 && $2 > m { m = $2 } END { print m + 0 }')
  SW_B1=$((_g2 - _g1))
  _g1=$(printf '%s\n' "$_a" | awk 'NR > 1 && $1 == 5204 && $2 > m { m = $2 } END { print m + 0 }')
  _g2=$(printf '%s\n' "$_b" | awk 'NR > 1 && $1 == 5204 && $2 > m { m = $2 } END { print m + 0 }')
  SW_B2=$((_g2 - _g1))
  note "$_name: receiver's readings (guest seconds before and after, then TCP bytes by server port): $(echo $_a) -> $(echo $_b)"
  if [ "$SW_B1" -le 0 ] || [ "$SW_B2" -le 0 ]; then
    result FAIL "$_name" "the two flows did not both receive during the window: $(echo $_a) -> $(echo $_b)"
    return 1
  fi
}

# udp_run NAME NS DEV SERVER PORT RCV_DEV ARGS...: a UDP run, receiver-measured, with the
# class, device and sch_fq counters before and after. Sets U_GOOD and U_RUN (bits/s from 0.5 s
# on and over the run: goodput_run_bps), U_PASSED and
# U_DROPS (class packets and horizon drops), U_FQDROPS, U_CHARGED (bytes), U_TXP (device
# packets sent), U_RXP (receiving device packets), U_SENT (datagrams iperf3 wrote), and the
# raw counters U_T0C U_T1C (class) U_T0T U_T1T (device) for check_identity.
udp_run() {
  local _name _ns _dev _srv _port _rdev _rns _c0 _t0 _r0 _f0 _s0 _s1 _c1 _t1 _r1 _f1
  _name=$1 _ns=$2 _dev=$3 _srv=$4 _port=$5 _rdev=$6 _rns=rcv
  shift 6
  [ "$_rdev" = b0 ] && _rns=fb
  _c0=$(class_counters "$_ns" "$_dev" 1) _t0=$(tx_counters "$_ns" "$_dev")
  _r0=$(rx_counters "$_rns" "$_rdev") _f0=$(fq_drops "$_ns" "$_dev") _s0=$(uptime_s)
  iperf_rx "$_rns" "$_srv" "$_port" "/tmp/$_name.json" -u -t 3 -i 0.5 "$@"
  _s1=$(uptime_s)
  wait_drained "$_ns" "$_dev" 1
  _c1=$(class_counters "$_ns" "$_dev" 1) _t1=$(tx_counters "$_ns" "$_dev")
  _r1=$(rx_counters "$_rns" "$_rdev") _f1=$(fq_drops "$_ns" "$_dev")
  iperf_failed "$_name" "/tmp/$_name.json" && return 1
  U_GOOD=$(goodput_bps "/tmp/$_name.json" 0.5) U_RUN=$(goodput_run_bps "/tmp/$_name.json")
  set -- $_c0 $_c1
  U_PASSED=$(($6 - $1)) U_DROPS=$(($9 - $4)) U_CHARGED=$(($8 - $3))
  set -- $_t0 $_t1
  U_TXP=$(($3 - $1))
  set -- $_r0 $_r1
  U_RXP=$(($3 - $1))
  U_FQDROPS=$((_f1 - _f0))
  U_T0C="$_c0" U_T1C="$_c1" U_T0T="$_t0" U_T1T="$_t1"
  U_SENT=$(jq '.end.sum_sent.packets // 0' "/tmp/$_name.json")
  note "$_name: class passed $U_PASSED pkts / $U_CHARGED B charged, horizon drops $U_DROPS; sch_fq drops $U_FQDROPS;" \
    "$_dev sent $U_TXP pkts; receiver device got $U_RXP pkts; iperf3 sender wrote $U_SENT datagrams in $(calc "$_s1 - $_s0" | cut -c1-4) s"
  note "$_name: receive intervals (Mbit/s): $(jq -r '[.intervals[].sum.bits_per_second / 1e6 | . * 100 | round / 100] | join(" ")' "/tmp/$_name.json")"
}

case_small() {
  local _per _c0 _t0 _c1 _t1 _share _k _e _cpu
  begin "small packets: UDP 100-byte datagrams at 8 Mbit on va2 (GSO/TSO off, fq flow_limit 1000), sent as fast as iperf3 can (-b 0), 3 s"
  # 8 Mbit / (166 B x 8) = 6024 datagrams/s => 4.819 Mbit/s of payload. iperf3 writes without
  # pacing and blocks when its socket buffer is full (~280 datagrams waiting in sch_fq), which
  # keeps the class busy; va2's sch_fq flow limit (1000) is above that, so nothing is dropped.
  # With the default limit (100) delivery collapses: see udp-small-overload-defaults.
  klass snd va2 --rate 8mbit || { result FAIL udp-100b-8mbit "change-class failed"; return; }
  udp_run udp-100b-8mbit snd va2 10.0.2.1 5203 vb2 -l 100 -b 0 || return
  _per=$(calc "$U_CHARGED / $U_PASSED")
  _e=$(calc "8e6 * 100 / 166")
  _cpu=$(jq '.end.cpu_utilization_percent.remote_total // 0 | floor' /tmp/udp-100b-8mbit.json)
  note "sender (iperf3 server) CPU: ${_cpu}%"
  # A busy class passes exactly its rate (its clock advances by what it charges), 6024/s here.
  # Fewer, with nothing dropped anywhere, means the class sat idle: the sender could not write
  # fast enough (busy host), and the goodput says nothing about the shaper.
  if ! within "$U_GOOD" "$_e" 5 && [ "$U_DROPS" = 0 ] && [ "$U_FQDROPS" = 0 ] &&
     cond "$U_PASSED < 0.97 * 6024 * 3"; then
    result SKIP udp-100b-8mbit "$(fmt_rate "$U_GOOD" 1e6) (expected $(fmt_num "$_e" 1e6)), but the class passed only $U_PASSED packets in 3 s (18072 when busy) and dropped none: iperf3 wrote $U_SENT at ${_cpu}% CPU, host too busy to fill the class"
  else
    check_rate udp-100b-8mbit "$U_GOOD" "$_e" 5 \
      "$(printf %.2f "$_per") B charged per packet (expected 166 = 142 wire + 24)" "$U_RUN"
  fi
  if cond "$_per >= 166 * 0.99 && $_per <= 166 * 1.01"; then _k=PASS; else _k=FAIL; fi
  result $_k udp-100b-per-packet-charge "$(printf %.2f "$_per") B per packet over $U_PASSED packets (expected 166 = 142 + 24, ±1% for iperf3's control packets)"
  check_identity udp-100b-charge-identity "$U_T0C" "$U_T1C" "$U_T0T" "$U_T1T"

  begin "small writes: TCP -N -l 100 at 8 Mbit on va2 (GSO/TSO off), 3 s"
  # Under backpressure TCP coalesces 100-byte writes into full segments whatever TCP_NODELAY
  # says, so this is not a small-packet test; the charge identity must still hold and the
  # goodput must follow from the segments actually sent.
  _c0=$(class_counters snd va2 1) _t0=$(tx_counters snd va2)
  iperf_rx rcv 10.0.2.1 5203 /tmp/tcpsmall.json -t 3 -i 0.5 -N -l 100
  wait_drained snd va2 1
  _c1=$(class_counters snd va2 1) _t1=$(tx_counters snd va2)
  iperf_failed tcp-nodelay-100b-8mbit /tmp/tcpsmall.json && return
  # payload share of what was charged: (tx bytes - 66 per segment) / (tx bytes + 24 per segment)
  _share=$(echo "$_t0 $_t1" | awk '{ p = $3 - $1; b = $4 - $2; printf "%.6f %.1f", (b - 66 * p) / (b + 24 * p), b / p }')
  set -- $_share
  _good=$(goodput_bps /tmp/tcpsmall.json 0.5) _e=$(calc "8e6 * $1")
  # A busy class charges exactly its rate (1e6 B/s here) for as long as the sender sends. Less,
  # with nothing dropped, means the class sat idle: 100-byte writes are a system call each, and
  # a busy host's TCG guest could not make them fast enough; a low goodput says nothing then
  # (a high one still fails).
  _secs=$(jq '.end.sum_sent.seconds // 0' /tmp/tcpsmall.json)
  _charged=$(echo "$_c0 $_c1" | awk '{ print $8 - $3 }')
  _drops=$(echo "$_c0 $_c1" | awk '{ print $9 - $4 }')
  _cpu=$(jq '.end.cpu_utilization_percent.remote_total // 0 | floor' /tmp/tcpsmall.json)
  if cond "$_good < $_e * 0.95" && [ "$_drops" = 0 ] && cond "$_charged < 0.97 * 1e6 * $_secs"; then
    result SKIP tcp-nodelay-100b-8mbit "$(fmt_rate "$_good" 1e6) (expected $(fmt_num "$_e" 1e6)), but the class charged $_charged B in the sender's $_secs s ($(calc "1e6 * $_secs" | cut -d. -f1) when busy) and dropped none: the sender, at ${_cpu}% CPU, could not fill the class"
  else
    check_rate tcp-nodelay-100b-8mbit "$_good" "$_e" 5 \
      "expected = 8 Mbit x (tx bytes - 66/segment) / (tx bytes + 24/segment); mean segment $2 B on the wire" "$(goodput_run_bps /tmp/tcpsmall.json)"
  fi
  check_identity tcp-nodelay-100b-charge-identity "$_c0" "$_c1" "$_t0" "$_t1"
}

case_udp() {
  local _e _off _msg
  begin "UDP at 5x the class rate: 50 Mbit/s of 1472-byte datagrams into 10 Mbit, --horizon 50ms (va1), 3 s"
  # Expected 10 Mbit x 1472 / 1538 = 9.571 Mbit/s. The 50 ms horizon (40 datagrams) is below
  # what the socket buffer (~90 datagrams) or sch_fq's flow limit (100) would queue, so the
  # excess is dropped by the shaper, uncharged, and counted in status drops.
  _e=$(calc "10e6 * 1472 / 1538")
  klass snd va1 --rate 10mbit --horizon 50ms || { result FAIL udp-5x-10mbit "change-class failed"; return; }
  if udp_run udp-5x-10mbit snd va1 10.0.1.1 5202 vb1 -l 1472 -b 50M; then
    _off=$(calc "($U_PASSED + $U_DROPS) * 1538 * 8 / 3")
    _msg="$(fmt_rate "$U_GOOD" 1e6) delivered (expected $(fmt_num "$_e" 1e6), bound -5%..+2%); offered ~$(fmt_rate "$_off" 1e6) on the wire; status drops $U_DROPS, sch_fq drops $U_FQDROPS; class passed $U_PASSED = $U_RXP received on vb1"
    # What is judged is the class under overload, not how fast a TCG guest can write: a guest
    # that offered less than twice the rate has not overloaded it.
    if cond "$_off < 2 * 10e6"; then
      result SKIP udp-5x-10mbit "$_msg: the guest offered under 2x the rate, host too busy to overload the class"
    elif cond "$U_GOOD >= $_e * 0.95 && $U_RUN <= $_e * 1.02 && $U_DROPS > 0 && $U_FQDROPS == 0 && $U_PASSED - $U_RXP <= 2 && $U_RXP - $U_PASSED <= 2"; then
      result PASS udp-5x-10mbit "$_msg"
    else
      result FAIL udp-5x-10mbit "$_msg"
    fi
  fi

  begin "UDP at 5x the class rate with the default 2 s horizon (va1), 3 s"
  klass snd va1 --horizon 2s || return
  if udp_run udp-5x-10mbit-default-horizon snd va1 10.0.1.1 5202 vb1 -l 1472 -b 50M; then
    _off=$(jq '.end.sum_sent.bits_per_second' /tmp/udp-5x-10mbit-default-horizon.json)
    _msg="$(fmt_rate "$U_GOOD" 1e6) delivered (expected $(fmt_num "$_e" 1e6), bound -5%..+2%); status drops $U_DROPS, sch_fq drops $U_FQDROPS: the sender's socket buffer filled (packets waiting in sch_fq still count against it) and blocked iperf3, which sent only $(fmt_rate "$_off" 1e6)"
    if cond "$U_GOOD >= $_e * 0.95 && $U_RUN <= $_e * 1.02"; then
      result PASS udp-5x-10mbit-default-horizon "$_msg"
    else
      result FAIL udp-5x-10mbit-default-horizon "$_msg"
    fi
  fi

  begin "small UDP over the rate with the default horizon (2 s) and attach's fq limits, va1, 3 s"
  # The class charges every packet at tc egress; with a 2 s horizon the clock runs far ahead.
  # With the kernel's fq flow_limit (100 packets = 17 ms at 8 Mbit) sch_fq dropped newcomers
  # whose slots were already charged and delivery collapsed to ~0.3 Mbit/s; attach now sets
  # fq's limits high (100000 per flow) so fq never drops what a class admitted.
  klass snd va1 --rate 8mbit --horizon 2s || return
  if udp_run udp-small-overload-defaults snd va1 10.0.1.1 5202 vb1 -l 100 -b 6M; then
    _e=$(calc "8e6 * 100 / 166")
    _msg="$(fmt_rate "$U_GOOD" 1e6) delivered (expected $(fmt_num "$_e" 1e6)); the class charged $U_PASSED packets, sch_fq dropped $U_FQDROPS of them (flow_limit), $U_TXP left the device; iperf3 wrote $U_SENT datagrams"
    # What this case guards is sch_fq dropping what the class admitted. Under TCG on a busy host
    # iperf3 may not write the 18,072 datagrams 3 s of the class take: then the class never held a
    # backlog and the goodput says only how fast the guest ran (17,181 written, 95 % of the rate,
    # delivered 94.8 % over the window in one run); every datagram written must still have
    # arrived, none dropped.
    if cond "$U_GOOD >= $_e * 0.95 && $U_FQDROPS == 0"; then
      result PASS udp-small-overload-defaults "$_msg"
    elif cond "$U_SENT < 3 * 8e6 / (166 * 8) && $U_FQDROPS == 0 && $U_DROPS == 0 && $U_RXP >= $U_SENT"; then
      result PASS udp-small-overload-defaults "$_msg (the guest could not offer the class rate; all it wrote arrived)"
    else
      result FAIL udp-small-overload-defaults "$_msg"
    fi
  fi
  wait_drained snd va1 1 || true
}

# udp_bound NS PORT: until a UDP socket is bound to PORT in NS (5 s at most).
udp_bound() {
  local _hex _i=0
  _hex=$(printf '%04X' "$2")
  until nsx "$1" cat /proc/net/udp 2>/dev/null | grep -q "^ *[0-9]*: [0-9A-F]*:$_hex "; do
    _i=$((_i + 1))
    [ "$_i" -lt 100 ] || return 1
    sleep 0.05
  done
}

case_prio7() {
  local _rate _e _got _off _msg _c
  begin "SO_PRIORITY 7: 20 Mbit/s of 1472-byte UDP datagrams into a 5 Mbit class (va0), 3 s window"
  # sch_fq before 6.8 sends packets of priority 7 (TC_PRIO_CONTROL) from its internal queue at
  # once, whatever their departure time; root of a container's namespace may set it. The
  # datapath gives such a packet priority 6 when it stamps it to leave later. Without that, the
  # class would let out everything charged within its 2 s horizon at once: 20 Mbit/s until the
  # clock is 2 s ahead (0.6 s), so ~8 Mbit/s over the window instead of 4.79. The rule on
  # priority 7 must match the original priority. The receiver counts by the kernel's receive
  # times, over 3 s from its first datagram.
  _rate=$(command -v udp_rate || true)
  if [ -z "$_rate" ]; then
    result SKIP so-priority-7 "no udp_rate in the VM (run-e2e.sh ships it from beside shaperctl)"
    return
  fi
  run_ok so-priority-7 shaperctl -n snd add-class --dev va0 --id 7 --rate 5mbit --overhead 24 &&
    run_ok so-priority-7 shaperctl -n snd add-rule --dev va0 --class 7 --pref 7 --priority 7 || return
  nsx rcv "$_rate" recv --port 5999 --window 3 --timeout 20 >/tmp/p7-recv.json 2>&1 &
  local _recv=$!
  udp_bound rcv 5999 || { result FAIL so-priority-7 "the receiver did not bind port 5999"; return; }
  nsx snd "$_rate" send --dst 10.0.0.2 --port 5999 --rate 20000000 --seconds 5 --priority 7 >/tmp/p7-send.json 2>&1
  wait $_recv
  wait_drained snd va0 7 || true
  _c=$(class_counters snd va0 7)
  note "sender: $(cat /tmp/p7-send.json); receiver: $(cat /tmp/p7-recv.json); class 7 (packets segments bytes drops backlog): $_c"
  _e=$(calc "5e6 * 1472 / 1538")
  _got=$(jq -r '.bps // 0' /tmp/p7-recv.json 2>/dev/null || echo 0)
  _off=$(jq -r '(.sent // 0) * 1472 * 8 / 5' /tmp/p7-send.json 2>/dev/null || echo 0)
  _msg="$(fmt_rate "$_got" 1e6) delivered over 3 s (expected $(fmt_num "$_e" 1e6), bound ±5%); offered $(fmt_rate "$_off" 1e6); class 7 (rule priority 7) passed $(echo "$_c" | cut -d' ' -f1) packets, dropped $(echo "$_c" | cut -d' ' -f4)"
  # Under 1.2x the class rate offered, an unpaced class would hardly show: a busy host.
  if cond "$_off < 1.2 * $_e"; then
    result SKIP so-priority-7 "$_msg: the VM could not offer enough, host too busy to tell"
  elif within "$_got" "$_e" 5 && [ "$(echo "$_c" | cut -d' ' -f1)" -gt 0 ]; then
    result PASS so-priority-7 "$_msg"
  else
    result FAIL so-priority-7 "$_msg"
  fi
  shaperctl -n snd del-rule --dev va0 --pref 7 >/dev/null
  shaperctl -n snd del-class --dev va0 --id 7 >/dev/null || true
}

case_fwd() {
  begin "forwarded: fa -> rt -> fb, shaped on rt's egress rb"
  RC_NS=rt RC_DEV=rb RC_CLIENT=fb RC_SERVER=10.1.0.1
  rate_case fwd-tcp-20mbit 20e6 5 3
  note "rb class: $(status_json rt rb | jq -r '.classes[0] | "\(.packets) skbs / \(.segments) segments charged, drops \(.drops)"'); sch_fq drops $(fq_drops rt rb)"

  # No socket of the router holds a forwarded flow's queue, and a lone flow has no fair share to
  # pass: without a bound it filled the class to its 2 s horizon and lost bursts there. Its
  # backlog, the class clock ahead of now in the datapath's samples, stays under half of it.
  begin "forwarded: a lone TCP flow into 2 Mbit, 6 s: its queue bounded well inside the horizon"
  local _h0 _h1 _v _max
  _h0=$(status_json rt rb | jq '.classes[0].drops_horizon')
  if ! _v=$(rate_run fwd-lone-2mbit 2e6 6); then
    result FAIL fwd-lone-2mbit "$_v"
  elif ! iperf_failed fwd-lone-2mbit /tmp/fwd-lone-2mbit.json; then
    _h1=$(status_json rt rb | jq '.classes[0].drops_horizon')
    _max=$(awk 'NR == 1 { t0 = $1 } $1 - t0 >= 2e9 && $2 - $1 > m { m = $2 - $1 } END { printf "%d", m }' /tmp/fwd-lone-2mbit.clock)
    _v="largest backlog from 2 s on $(calc "$_max / 1e6" | cut -d. -f1) ms (bound 1000), horizon drops $((_h1 - _h0)); goodput $(fmt_rate "$(goodput_bps /tmp/fwd-lone-2mbit.json 0.5)" 1e6)"
    if [ "$_max" -lt 1000000000 ] && [ "$_h1" = "$_h0" ]; then result PASS fwd-lone-2mbit "$_v"; else result FAIL fwd-lone-2mbit "$_v"; fi
  fi
  RC_NS=snd RC_DEV=va0 RC_CLIENT=rcv RC_SERVER=10.0.0.1

  begin "forwarded small-packet UDP: 100-byte datagrams, 2 Mbit/s of payload into 2 Mbit, --horizon 50ms, 3 s"
  # 2 Mbit / (166 x 8) = 1506 datagrams/s => 1.205 Mbit/s of payload; 2500/s offered. Nothing
  # pushes back on forwarded packets: the 50 ms horizon (75 datagrams) must drop the excess
  # before sch_fq's flow limit (100) does, or delivery collapses (udp-small-overload-defaults).
  klass rt rb --rate 2mbit --horizon 50ms || { result FAIL fwd-udp-100b-2mbit "change-class failed"; return; }
  udp_run fwd-udp-100b-2mbit rt rb 10.1.0.1 5201 b0 -l 100 -b 2M || return
  check_rate fwd-udp-100b-2mbit "$U_GOOD" "$(calc "2e6 * 100 / 166")" 5 \
    "status drops $U_DROPS (the excess), sch_fq drops $U_FQDROPS, $(calc "$U_CHARGED / $U_PASSED" | cut -c1-6) B charged per packet" "$U_RUN"
}

# --- upgrade ----------------------------------------------------------------
# shaperctl_next is the same shaperctl with a BPF program one instruction longer
# (tests/e2e/shaper_next.bpf.c): another tag, so attaching either build over the other one
# swaps the program in place, each time a new program id.
NEXT=$(command -v shaperctl_next || true)
shaperctl_next() { "$NEXT" "$@"; }
shaperctl_current() { shaperctl "$@"; }
# Wall-clock seconds with microseconds: ping -D stamps its replies with the same clock.
rt_now() { jq -n now; }
# fq_qdiscs NS DEV: the fq qdiscs as "handle@parent=packets" words.
fq_qdiscs() {
  tc -n "$1" -s -j qdisc show dev "$2" | jq -r '[.[] | select(.kind == "fq") | "\(.handle)@\(.parent)=\(.packets)"] | join(" ")'
}
# class_entry PIN_DIR ID: the class's entry, config and clocks (bpftool map lookup, JSON).
class_entry() {
  "$BPFTOOL" -j map lookup pinned "$1/shaper_classes" key $(printf '%d %d %d %d' $(($2 & 255)) $(($2 >> 8 & 255)) $(($2 >> 16 & 255)) $(($2 >> 24)))
}
# prog_uses_map PROG_ID MAP_ID: the program references the map (bpftool).
prog_uses_map() {
  [ "$("$BPFTOOL" -j prog show id "$1" | jq --argjson m "$2" '.map_ids | index($m) != null')" = true ]
}

# swap_bound ELSEWHERE FLOOR: a swap's bound in ms, from the guest's own worst elsewhere in the
# run: that plus 20 ms, or doubled past 20 ms, and never below FLOOR.
swap_bound() {
  local own
  own=$(calc "($1 > 20 ? 2 * $1 : $1 + 20)")
  calc "($own > $2 ? $own : $2)"
}

case_upgrade() {
  local _e _g _dump0 _dump1 _st _id0 _tag0 _id _pin _clk _fq0 _fq1 _t0 _p _pp _pq _tat0 _tat1 _b _last=current _sa _sb _out _again _n=0 _win _v _k _bad _msg _line
  begin "upgrade: shaperctl_next and shaperctl attached in turn over the running program of va0 (up to 4 swaps), TCP at 20 Mbit (20 s, 0.2 s intervals), a ping every 5 ms, a clock probe"
  if [ -z "$NEXT" ]; then
    result SKIP upgrade "no shaperctl_next in the VM (run-e2e.sh --next PATH; CMake builds it beside shaperctl)"
    return
  fi
  # Class 10 takes the TCP flow (burst 0: pure pacing), class 11 the ping. Class 12 is the clock
  # probe: just before the swaps, 70 full-size pings sent at once to 10.0.0.3 put its clock
  # 8.6 s ahead (123 ms each at 100 kbit) and wait in sch_fq meanwhile. Nothing else is charged
  # to it, so its clock entry must read exactly the same after the swaps (a fresh one reads 0;
  # the TCP flow's own clock moves all the time and its backlog, 50-80 ms, is shorter than a
  # swap), and all 70 must come back (a re-created fq would drop them). The probe has its own
  # destination: sch_fq puts unconnected sockets' packets in flows by address, and the 5 ms
  # ping would wait behind the probe's throttled fq flow. Rule 4 never matches (another shape,
  # port segments): the whole rule index must survive the swaps.
  ip -n rcv addr add 10.0.0.3/24 dev vb0 || { result FAIL upgrade "ip addr add 10.0.0.3 on vb0"; return; }
  run_ok upgrade shaperctl -n snd add-class --dev va0 --id 10 --rate 20mbit --overhead 24 &&
    run_ok upgrade shaperctl -n snd add-class --dev va0 --id 11 --rate 2mbit --overhead 24 &&
    run_ok upgrade shaperctl -n snd add-class --dev va0 --id 12 --rate 100kbit --overhead 24 --horizon 10s &&
    run_ok upgrade shaperctl -n snd add-rule --dev va0 --class 12 --pref 1 --dst 10.0.0.3 &&
    run_ok upgrade shaperctl -n snd add-rule --dev va0 --class 10 --pref 2 --proto tcp --sport 5201 &&
    run_ok upgrade shaperctl -n snd add-rule --dev va0 --class 11 --pref 3 --proto icmp &&
    run_ok upgrade shaperctl -n snd add-rule --dev va0 --class 10 --pref 4 --dst 10.9.0.0/16 --proto udp --dport 1000-2000 ||
    return
  _dump0=$(shaperctl -n snd dump --dev va0)
  _st=$(status_json snd va0)
  _id0=$(echo "$_st" | jq .program_id) _tag0=$(echo "$_st" | jq -r .program_tag)
  _pin=/sys/fs/bpf/shaperctl/ns$(echo "$_st" | jq .netns)/if$(echo "$_st" | jq .ifindex)
  _clk=$("$BPFTOOL" -j map show pinned "$_pin/shaper_classes" | jq .id)
  _fq0=$(fq_qdiscs snd va0)
  note "before: prog $_id0 tag $_tag0; class clock map id $_clk; fq (handle@parent=packets) $_fq0"

  clock_start snd va0 10 21.5 /tmp/up.clock
  _t0=$(rt_now)
  iperf_rx rcv 10.0.0.1 5201 /tmp/up.json -t 20 -i 0.2 &
  _p=$!
  sleep 0.5
  nsx snd "$PING" -n -D -i 0.005 -c 3800 10.0.0.2 >/tmp/up-ping.txt 2>&1 &
  _pp=$!
  sleep 1
  nsx snd "$PING" -n -q -l 70 -c 70 -S 400000 -s 1472 10.0.0.3 >/tmp/up-probe.txt 2>&1 &
  _pq=$!
  # Its 70 packets charged: class 12's entry set and the same over 0.2 s (a guest beside a busy
  # host took more than 0.3 s to send them).
  _tat0="" _i=0
  while [ "$_i" -lt 50 ]; do
    sleep 0.2
    _prev=$_tat0 _tat0=$(class_entry "$_pin" 12) _i=$((_i + 1))
    [ -n "$_prev" ] && [ "$_prev" = "$_tat0" ] &&
      [ "$(echo "$_tat0" | jq '[.value[] | select(. != "0x00")] | length')" -gt 0 ] && break
  done
  # Each swap: its wall-clock start and end, then what status says after it. An attach takes
  # 1.5-7 s under TCG (the verifier): no swap starts in the last 7 s of the traffic.
  : >/tmp/up-swaps.txt
  for _b in next current next current; do
    _sa=$(rt_now)
    cond "$_sa < $_t0 + 13" || break
    _n=$((_n + 1)) _last=$_b
    _out=$(shaperctl_$_b -n snd attach --dev va0 2>&1)
    _sb=$(rt_now)
    _st=$(status_json snd va0 | jq -r '"\(.program_id) \(.program_tag) " + (.classes[] | select(.id == 10) | "\(.packets) \(.backlog_ns)")')
    echo "$_b $(calc "$_sa - $_t0") $(calc "$_sb - $_t0") $_st $(echo "$_out" | tr ' \n' '__')" >>/tmp/up-swaps.txt
  done
  _tat1=$(class_entry "$_pin" 12)
  wait $_p
  wait "$CLOCK_PID"
  wait $_pp
  wait $_pq
  # After the traffic: the build running now says "nothing changed" when attached again, and
  # its program uses the pinned clock map.
  _again=$(shaperctl_$_last -n snd attach --dev va0 2>&1)
  _id=$(status_json snd va0 | jq .program_id)
  _dump1=$(shaperctl -n snd dump --dev va0)
  _fq1=$(fq_qdiscs snd va0)
  iperf_failed upgrade-tcp-20mbit /tmp/up.json && return
  # (busybox sh: no arrays) swap lines: build start end id tag packets backlog_ns output
  note "swaps (build, start-end s after iperf3 started, prog id, tag, class 10 packets, backlog ns, output):"
  while read -r _line; do note "  $_line"; done </tmp/up-swaps.txt
  note "fq after: $_fq1"

  # The swaps themselves: each one an upgrade to a new program of the build attached, the
  # tags alternating, the class counters going on.
  _v=$(awk -v id0="$_id0" -v tag0="$_tag0" '
    { b = $1; id = $4; tag = $5; pk = $6; n++
      if ($8 !~ /upgraded_in_place/) bad = bad " not-upgraded@" n
      if (id == prev_id || id == id0) bad = bad " same-id@" n
      if (b == "current" && tag != tag0) bad = bad " tag@" n
      if (b == "next" && (tag == tag0 || (next_tag != "" && tag != next_tag))) bad = bad " tag@" n
      if (b == "next") next_tag = tag
      if (pk <= prev_pk) bad = bad " counters@" n
      prev_id = id; prev_pk = pk; ids = ids " -> " id }
    END { printf "%s|%s|%s\n", bad == "" ? "ok" : bad, ids, next_tag }' /tmp/up-swaps.txt)
  _bad=${_v%%|*} _v=${_v#*|}
  _msg="$_n swaps in the traffic, each 'program upgraded in place'; prog $_id0${_v%%|*}; tag $_tag0 / ${_v#*|} in turn; class 10 packets grew at every swap; the $_last build attached again: '$(echo "$_again" | head -c 80)'"
  case "$_again" in *"nothing changed"*) ;; *) _bad="${_bad#ok} same-build-again" ;; esac
  prog_uses_map "$_id" "$_clk" || _bad="${_bad#ok} clock-map"
  if [ "$_n" -lt 2 ]; then
    result SKIP upgrade-swaps "only $_n swap(s) started in the first 13 s of traffic: the VM is too slow to tell; $_msg"
  elif [ "$_bad" = ok ]; then
    result PASS upgrade-swaps "$_msg; the program running uses the pinned clock map (id $_clk)"
  else
    result FAIL upgrade-swaps "$_msg; violations:$_bad"
  fi

  # The probe: its clock entry unchanged across the swaps, and every one of its packets, held
  # in sch_fq for up to 8.6 s while the programs changed, delivered.
  _v=$(sed -n 's/.* \([0-9]*\) received.*/\1/p' /tmp/up-probe.txt)
  _msg="clock of class 12 before the swaps $(echo "$_tat0" | jq -c '.formatted.value.tat_ns // .value[:8]'), after $(echo "$_tat1" | jq -c '.formatted.value.tat_ns // .value[:8]') ($(echo "$_tat0" | jq '.value | length')-byte entry compared whole); ${_v:-0} of 70 probe packets queued in sch_fq across the swaps came back"
  if [ -n "$_tat0" ] && [ "$(echo "$_tat0" | jq -c .value)" = "$(echo "$_tat1" | jq -c .value)" ] &&
     [ "$(echo "$_tat0" | jq '[.value[] | select(. != "0x00")] | length')" -gt 0 ] && [ "${_v:-0}" = 70 ]; then
    result PASS upgrade-clock-kept "$_msg"
  else
    result FAIL upgrade-clock-kept "$_msg"
  fi

  # Configuration and pacing state left alone: dump identical, the same fq qdiscs still
  # counting (a re-created fq would drop what it held and restart its counters).
  _v=$(echo "$_fq0 | $_fq1" | awk '{ for (i = 1; i <= NF; i++) { if ($i == "|") { a = 1; continue }
      split($i, f, "="); if (a) { n1++; sum1 += f[2]; if (!(f[1] in p) || f[2] < p[f[1]]) bad = 1 } else { n0++; sum0 += f[2]; p[f[1]] = f[2] } } }
    END { print (bad || n0 != n1 || n0 == 0 || sum1 <= sum0) ? "changed" : "kept" }')
  if [ "$_dump0" = "$_dump1" ] && [ "$_v" = kept ]; then
    result PASS upgrade-config-kept "dump identical after the swaps ($(echo "$_dump1" | jq -c '.devices[0] | "\(.classes | length) classes, \(.rules | length) rules, default class \(.default_class)"' | tr -d '"')); fq qdiscs the same, their counters went on"
  else
    result FAIL upgrade-config-kept "dump $([ "$_dump0" = "$_dump1" ] && echo same || echo changed); fq $_v ($_fq0 -> $_fq1)"
    [ "$_dump0" = "$_dump1" ] || note "dump before: $(echo "$_dump0" | jq -c .)" "after: $(echo "$_dump1" | jq -c .)"
  fi

  # Traffic across the swaps, judged by the datapath's samples of class 10 (judge.sh): never
  # faster than 20 Mbit from the start (a fresh clock would let out the backlog at once), and at
  # the rate over every window the class was backlogged in (a swap that lost packets or the
  # clock would leave it backlogged and short, or dry right after drops). A swap verifies the
  # program in the guest: windows where the guest stalled meanwhile are not judged.
  _e=$(calc "20e6 * $TCP_FRAC") _g=$(goodput_run_bps /tmp/up.json)
  note "receiver intervals (start:Mbit/s): $(interval_rates /tmp/up.json | awk '{ printf "%.1f:%.2f ", $1, $3 / 1e6 }')"
  _v=$(clock_judge /tmp/up.clock 20e6 0.6 19.5 5)
  _k=${_v%%|*}
  [ "$_k" != UNJUDGED ] || _k=SKIP
  cond "$_g <= $_e * 1.05" || _k=FAIL
  result "$_k" upgrade-tcp-20mbit "receiver $(fmt_rate "$_g" 1e6) over the run (expected $(fmt_num "$_e" 1e6), at most +5%); ${_v#*|}"

  # The ping (class 11, never backlogged): replies lost, and the RTTs and reply gaps from 50 ms
  # before a swap to 200 ms after it, against the rest of the run. A loaded host stalls the
  # TCG guest's vCPUs for tens of ms now and then, swap or not: the bounds allow for that.
  rm -f /tmp/up-rtt-swap.txt /tmp/up-rtt-else.txt
  _win=$(awk '{ printf "%s %s ", $2, $3 }' /tmp/up-swaps.txt)
  _v=$(awk -v t0="$_t0" -v w="$_win" '
    BEGIN { nw = split(w, W, " ") }
    /icmp_seq=/ { t = substr($1, 2, length($1) - 2) - t0
      for (i = 2; i <= NF; i++) if ($i ~ /^time=/) rtt = substr($i, 6) + 0
      near = 0
      for (k = 1; k < nw; k += 2) if (t > W[k] - 0.05 && t < W[k + 1] + 0.2) near = 1
      if (near) { nn++; if (rtt > wmax) wmax = rtt; if (prev != "" && t - prev > wgap) wgap = t - prev; print rtt > "/tmp/up-rtt-swap.txt" }
      else { no++; if (rtt > omax) omax = rtt; if (prev != "" && t - prev > ogap) ogap = t - prev; print rtt > "/tmp/up-rtt-else.txt" }
      prev = t }
    / packets transmitted/ { tx = $1; rx = $4 }
    END { printf "%d %d %d %.3f %.1f %d %.3f %.1f\n", tx, rx, nn, wmax, wgap * 1000, no, omax, ogap * 1000 }' /tmp/up-ping.txt)
  set -- $_v "$(p99 /tmp/up-rtt-swap.txt)" "$(p99 /tmp/up-rtt-else.txt)"
  # The bounds at the swaps: none lost, and 50 ms RTT, or what the guest's own stalls gave
  # elsewhere in the run, plus 20 ms or doubled, when those were larger (a swap must add no
  # outage of its own). An outage shows as replies lost or late, each timed from its own
  # request. The largest gap between replies is printed, not judged: with every reply back
  # quickly, a gap means ping itself did not run (a swap verifies the program in the guest,
  # seconds of a vCPU, and a busy host stalls TCG's vCPUs: 139 ms once, every reply within
  # 2.5 ms of its request).
  _rb=$(swap_bound "$7" 50)
  _msg="$2 of $1 replies (every 5 ms); at the swaps ($3 replies) RTT p99 $9 ms, max $4 ms, largest gap between replies $5 ms; elsewhere ($6) p99 ${10} ms, max $7 ms, gap $8 ms (bounds at the swaps: none lost, max RTT $(printf %.1f "$_rb") ms)"
  if [ "$1" -gt 1000 ] && [ "$1" = "$2" ] && [ "$3" -gt 50 ] && cond "$4 <= $_rb"; then
    result PASS upgrade-ping "$_msg"
  else
    result FAIL upgrade-ping "$_msg"
  fi

  for _v in "del-rule --pref 1" "del-rule --pref 2" "del-rule --pref 3" "del-rule --pref 4" \
            "del-class --id 10" "del-class --id 11" "del-class --id 12"; do
    # shellcheck disable=SC2086
    shaperctl -n snd $_v --dev va0 || note "cleanup: $_v failed"
  done
  ip -n rcv addr del 10.0.0.3/24 dev vb0

  case_upgrade_police
}

case_upgrade_police() {
  local _d0 _d1 _s0 _s1 _out _msg
  begin "upgrade in police mode: shaperctl_next attached over shaperctl on a new veth pair vp0"
  veth_pair snd vp0 10.0.3.1/24 rcv vq0 10.0.3.2/24 || { result FAIL upgrade-police "veth pair vp0"; return; }
  run_ok upgrade-police shaperctl -n snd attach --dev vp0 --mode police &&
    run_ok upgrade-police shaperctl -n snd add-class --dev vp0 --id 10 --rate 5mbit --overhead 24 &&
    run_ok upgrade-police shaperctl -n snd add-class --dev vp0 --id 11 --rate 1mbit --parent 10 --burst 64kb &&
    run_ok upgrade-police shaperctl -n snd add-rule --dev vp0 --class 11 --pref 1 --proto icmp &&
    run_ok upgrade-police shaperctl -n snd set-default --dev vp0 --class 10 ||
    { shaperctl -n snd detach --dev vp0 >/dev/null 2>&1; ip -n snd link del vp0; return; }
  nsx snd "$PING" -n -q -c 20 -i 0.01 10.0.3.2 >/dev/null 2>&1
  _d0=$(shaperctl -n snd dump --dev vp0)
  _s0=$(status_json snd vp0 | jq -r '"\(.program_id) \(.program_tag) \(.mode) " + (.classes[] | select(.id == 11) | "\(.packets)")')
  _out=$(shaperctl_next -n snd attach --dev vp0 --mode police 2>&1)
  nsx snd "$PING" -n -q -c 20 -i 0.01 10.0.3.2 >/dev/null 2>&1
  _d1=$(shaperctl -n snd dump --dev vp0)
  _s1=$(status_json snd vp0 | jq -r '"\(.program_id) \(.program_tag) \(.mode) " + (.classes[] | select(.id == 11) | "\(.packets)")')
  set -- $_s0 $_s1
  _msg="'$_out'; prog $1 -> $5, tag $2 -> $6, mode $7; dump $([ "$_d0" = "$_d1" ] && echo identical || echo CHANGED); class 11 packets $4 -> $8 (20 pings between)"
  if case "$_out" in *"upgraded in place"*) true ;; *) false ;; esac &&
     [ "$1" != "$5" ] && [ "$2" != "$6" ] && [ "$7" = police ] && [ "$_d0" = "$_d1" ] && [ "$8" -ge $(($4 + 20)) ]; then
    result PASS upgrade-police "$_msg"
  else
    result FAIL upgrade-police "$_msg"
  fi
  shaperctl -n snd detach --dev vp0 >/dev/null || note "detach vp0 failed"
  ip -n snd link del vp0
}

# --- run --------------------------------------------------------------------

want baseline && case_baseline
# Each attach runs the verifier (seconds under TCG): only the devices the chosen cases use.
begin "attach (edt) on va0, va1 (tcp100k, udp), rb (fwd) with default sch_fq options, va2 (small) with --fq-flow-limit 1000"
attach_check snd va0
{ want tcp100k || want udp; } && attach_check snd va1
want small && attach_check snd va2 --fq-flow-limit 1000
want fwd && attach_check rt rb
if [ "$ATTACH_OK" = 1 ]; then
  want tcp100k && case_tcp100k
  want tcp20m && case_tcp20m
  want tcp200m && case_tcp200m
  want flows8 && case_flows8
  want flood && case_flood
  want delay && case_delay
  want change && case_change
  want burst && case_burst
  want rules && case_rules
  want borrow && case_borrow
  want small && case_small
  want udp && case_udp
  want prio7 && case_prio7
  want fwd && case_fwd
  want upgrade && case_upgrade
else
  result SKIP traffic-cases "not run: attach failed (see above)"
fi

begin "detach: previous root qdiscs back, clsact gone, no pins"
for d in "snd va0" "snd va1" "snd va2" "rt rb"; do
  set -- $d
  case " $ATTACHED " in *" $2 "*) ;; *) continue ;; esac
  if ! _o=$(shaperctl -n "$1" detach --dev "$2" 2>&1); then
    result FAIL "detach-$2" "$_o"
    continue
  fi
  _prior=""
  eval "_prior=\$PRIOR_$2"
  _now=$(root_qdisc "$1" "$2")
  _cls=$(tc -n "$1" qdisc show dev "$2" | grep -c clsact)
  # fq_codel's target and interval live in the kernel in 1024 ns units and are dumped
  # rounded down to microseconds, so re-creating a dumped fq_codel loses up to 1 us each
  # time (a known product bug); compare those two fields to 1 us and report the drift.
  _loose='[.[] | .options |= del(.target, .interval)]'
  if [ "$_now" = "$_prior" ] && [ "$_cls" = 0 ]; then
    result PASS "detach-$2" "root restored: $_now; no clsact"
  elif [ "$(echo "$_now" | jq -c "$_loose")" = "$(echo "$_prior" | jq -c "$_loose")" ] && [ "$_cls" = 0 ] &&
       cond "$(echo "$_now $_prior" | jq -s '[.[0][0].options.target - .[1][0].options.target, .[0][0].options.interval - .[1][0].options.interval] | map(. * .) | add') <= 2"; then
    result PASS "detach-$2" "root restored: $(echo "$_now" | jq -c '.[0].kind') with the same options but for fq_codel times; no clsact"
    result XFAIL "detach-$2-exact" "fq_codel target/interval came back as $(echo "$_now" | jq -r '.[0].options | "\(.target)/\(.interval)"') us, were $(echo "$_prior" | jq -r '.[0].options | "\(.target)/\(.interval)"') us"
  else
    result FAIL "detach-$2" "root now $_now (was $_prior); clsact qdiscs: $_cls"
  fi
done
_pins=$(find /sys/fs/bpf/shaperctl 2>/dev/null | head -20 | tr '\n' ' ')
_list=$(shaperctl list --json 2>&1 | jq -c . 2>&1)
# Nothing else in this VM loads BPF: once detached, no program and no link (TCX or other) may
# remain. The kernel frees a released program after an RCU grace period: up to 2 s for that.
_i=0
while :; do
  _progs=$("$BPFTOOL" -j prog show 2>&1 | jq -c '[.[] | "\(.type) \(.name // "?") id \(.id)"]' 2>&1)
  _links=$("$BPFTOOL" -j link show 2>&1 | jq -c '[.[] | "\(.type) id \(.id)"]' 2>&1)
  [ "$_progs$_links" = "[][]" ] && break
  _i=$((_i + 1))
  [ "$_i" -lt 20 ] || break
  sleep 0.1
done
if [ -z "$_pins" ] && [ "$_list" = "[]" ] && [ "$_progs$_links" = "[][]" ]; then
  result PASS detach-no-pins "/sys/fs/bpf/shaperctl is gone; shaperctl list --json: []; no BPF program or link left"
else
  result FAIL detach-no-pins "left behind: ${_pins:-no pins}; list: $_list; programs $_progs; links $_links"
fi

stop_iperf_servers
for ns in snd rcv fa rt fb; do ip netns del "$ns" 2>/dev/null; done
echo
echo "E2E SUMMARY: $PASSES passed, $FAILS failed, $XFAILS known bugs (XFAIL), $XPASSES XPASS, $SKIPS skipped in $(elapsed_since "$T_START" | cut -d. -f1) s"
[ "$FAILS" -eq 0 ]
