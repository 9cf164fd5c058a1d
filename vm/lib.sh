# Helpers for the scenarios that run in the VM (or on a host with sch_fq): the end-to-end tests,
# the demo and the benches source it. vm/run.sh puts it in every guest at
# /usr/local/share/shaperctl-vm/lib.sh.
# POSIX sh plus `local`: runs under busybox ash in the VM, and under bash/dash on a host with sch_fq.
# Needs $IP $TC $IPERF3 (and $ETHTOOL for gso toggles), jq and awk.

: "${IP:=$(command -v ip)}" "${TC:=$(command -v tc)}" "${IPERF3:=$(command -v iperf3)}"
: "${ETHTOOL:=$(command -v ethtool)}" "${SHAPERCTL:=$(command -v shaperctl)}"
# busybox runs its own ip/tc applets for bare names: always go through these. The variables
# hold paths (resolved before these functions exist), so the functions never call themselves.
ip() { "$IP" "$@"; }
tc() { "$TC" "$@"; }
ethtool() { "$ETHTOOL" "$@"; }
shaperctl() { "$SHAPERCTL" "$@"; }
nsx() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

# Seconds since boot, 10 ms resolution, without forking.
uptime_s() { read -r _up _rest < /proc/uptime; echo "$_up"; }
# Floating-point arithmetic: calc 'EXPR' (awk syntax; only our own numbers go in).
calc() { awk "BEGIN { printf \"%.6f\", $1 }"; }
# Succeeds when the awk condition holds: cond '1.5 > 1'.
cond() { awk "BEGIN { exit !($1) }"; }
elapsed_since() { calc "$(uptime_s) - $1"; }

# --- topology ---------------------------------------------------------------

# veth_pair NS_A DEV_A CIDR_A NS_B DEV_B CIDR_B
veth_pair() {
  ip link add "$2" netns "$1" type veth peer name "$5" netns "$4" &&
    ip -n "$1" addr add "$3" dev "$2" &&
    ip -n "$4" addr add "$6" dev "$5" &&
    ip -n "$1" link set "$2" up &&
    ip -n "$4" link set "$5" up
}

# new_ns NAME: a namespace without IPv6, so that no router solicitation or DAD packet slips
# into the exact packet accounting.
new_ns() {
  ip netns add "$1" && ip -n "$1" link set lo up &&
    nsx "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 &&
    nsx "$1" sysctl -qw net.ipv6.conf.default.disable_ipv6=1
}

# iperf3 servers run in the background; their pids are kept for cleanup.
IPERF_PIDS=""
# iperf_server NS PORT
iperf_server() {
  nsx "$1" "$IPERF3" -s -p "$2" >"/tmp/iperf-server-$1-$2.log" 2>&1 &
  IPERF_PIDS="$IPERF_PIDS $!"
}
# wait_listen NS PORT: until a TCP socket listens on PORT in NS (5 s at most).
wait_listen() {
  local _hex _i=0
  _hex=$(printf '%04X' "$2")
  until nsx "$1" cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -q ":$_hex [0-9A-F:]* 0A "; do
    _i=$((_i + 1))
    [ "$_i" -lt 100 ] || return 1
    sleep 0.05
  done
}
stop_iperf_servers() {
  local _p
  # `|| true`: a killed server's status (143) must not end a caller running under set -e.
  for _p in $IPERF_PIDS; do kill "$_p" 2>/dev/null || true; done
  for _p in $IPERF_PIDS; do wait "$_p" 2>/dev/null || true; done
  IPERF_PIDS=""
}

# --- measurements -----------------------------------------------------------

# iperf_rx NS SERVER PORT OUT [iperf3 args]: the receiver in NS runs the client with -R, so
# the JSON intervals are receive-side measurements. Fails if iperf3 does.
iperf_rx() {
  local _ns=$1 _srv=$2 _port=$3 _out=$4
  shift 4
  nsx "$_ns" "$IPERF3" -c "$_srv" -p "$_port" -R -J "$@" >"$_out" 2>"$_out.err"
}
# iperf_tx NS SERVER PORT OUT [iperf3 args]: the sender in NS runs the client.
iperf_tx() {
  local _ns=$1 _srv=$2 _port=$3 _out=$4
  shift 4
  nsx "$_ns" "$IPERF3" -c "$_srv" -p "$_port" -J "$@" >"$_out" 2>"$_out.err"
}
# goodput_bps JSON SKIP: receiver bits/s over the intervals that start at SKIP seconds or
# later, leaving out the last one: the sender stops before it ends (for UDP it ran ~3% low).
goodput_bps() {
  jq -r --argjson skip "$2" '[.intervals[:-1][].sum | select(.start >= $skip - 0.001)]
    | if length == 0 then 0 else ((map(.bytes) | add) * 8 / (map(.seconds) | add)) end' "$1"
}
# goodput_run_bps JSON: receiver bits/s from its start to the end of its last full interval. A
# hard upper bound for a shaper with no burst on any machine: at the start the receiver holds
# nothing unread, so a starved receiver reads late but never more than arrived; goodput_bps
# over later intervals can count a backlog of unread bytes it held when the window opened.
goodput_run_bps() { goodput_bps "$1" 0; }
# iperf_error JSON: iperf3's error message, empty when it ran.
iperf_error() {
  jq -r '.error // empty' "$1" 2>/dev/null ||
    { echo "no JSON from iperf3: $(head -c 300 "$1") $(head -c 300 "$1.err" 2>/dev/null)"; }
}
# interval_rates JSON: "start end bits_per_second" per interval.
interval_rates() {
  jq -r '.intervals[].sum | "\(.start) \(.end) \(.bits_per_second)"' "$1"
}

# status_json NS DEV [SAMPLE]: shaperctl status --json into stdout.
status_json() { shaperctl -n "$1" status --dev "$2" --json --sample "${3:-0}"; }
# class_counters NS DEV ID: "packets segments bytes drops backlog_ns" of one class.
class_counters() {
  status_json "$1" "$2" | jq -r --argjson id "$3" \
    '.classes[] | select(.id == $id) | "\(.packets) \(.segments) \(.bytes) \(.drops) \(.backlog_ns)"'
}
# class_actions NS DEV ID: "name=value ..." of what one class did to packets (drops by cause,
# marks, holds).
class_actions() {
  status_json "$1" "$2" | jq -r --argjson id "$3" '.classes[] | select(.id == $id)
    | "drops_horizon=\(.drops_horizon) drops_aqm=\(.drops_aqm) drops_fair=\(.drops_fair) ecn_marks=\(.ecn_marks) fair_marks=\(.fair_marks) fair_holds=\(.fair_holds // 0)"'
}
# action_delta NAME BEFORE AFTER: how much one of class_actions' counters moved.
action_delta() {
  echo "$2 | $3" | awk -v k="$1" '{ for (i = 1; i <= NF; i++) { if ($i == "|") { a = 1; continue }
      split($i, kv, "="); if (kv[1] == k) v[a] = kv[2] } } END { print v[1] - v[0] }'
}
# class_sparse NS DEV ID: packets of the class's sparse flows sent ahead of its backlog.
class_sparse() {
  status_json "$1" "$2" | jq -r --argjson id "$3" '.classes[] | select(.id == $id) | .sparse'
}
# class_actions_delta BEFORE AFTER: as tcp_stats_delta.
class_actions_delta() { tcp_stats_delta "$@"; }
# tx_counters NS DEV: "packets bytes" the device transmitted.
tx_counters() {
  ip -n "$1" -s -j link show dev "$2" | jq -r '.[0].stats64.tx | "\(.packets) \(.bytes)"'
}
# rx_counters NS DEV: "packets bytes" the device received.
rx_counters() {
  ip -n "$1" -s -j link show dev "$2" | jq -r '.[0].stats64.rx | "\(.packets) \(.bytes)"'
}
# fq_drops NS DEV: packets dropped by every sch_fq on DEV.
fq_drops() {
  tc -n "$1" -s -j qdisc show dev "$2" | jq '[.[] | select(.kind == "fq") | .drops] | add // 0'
}
# wait_drained NS DEV ID: until the class clock is idle (every stamped packet has left).
wait_drained() {
  local _i=0
  while :; do
    set -- "$1" "$2" "$3" "$(class_counters "$1" "$2" "$3" | cut -d' ' -f5)"
    [ "$4" = 0 ] && return 0
    _i=$((_i + 1))
    [ "$_i" -lt 60 ] || return 1
    sleep 0.1
  done
}

# tcp_rx_bytes NS PORT...: "T0 T1" (guest seconds just before and after the reading), then
# "PORT BYTES" per established TCP connection in NS to one of the remote PORTs, BYTES being the
# payload received so far (ss's bytes_received). Sampled twice, it gives the goodput of several
# flows over a window they share, however skewed their starts; the times bracket the reading,
# so a slow guest widens the window's bounds instead of skewing it.
tcp_rx_bytes() {
  local _ns=$1 _f="" _p
  shift
  for _p in "$@"; do _f="${_f:+$_f or }dport = :$_p"; done
  nsx "$_ns" sh -c 'read -r t0 _ </proc/uptime; ss -tinH state established "$1" >/tmp/ss.$$
    read -r t1 _ </proc/uptime; echo "$t0 $t1"; cat /tmp/ss.$$; rm -f /tmp/ss.$$' sh "( $_f )" |
    awk 'NR == 1 { print; next } /^[0-9]/ { n = split($4, a, ":"); port = a[n] }
      match($0, /bytes_received:[0-9]+/) { print port, substr($0, RSTART + 15, RLENGTH - 15) }'
}

# tcp_stats NS: "name=value ..." of the TCP loss and retransmission counters in NS.
tcp_stats() {
  nsx "$1" cat /proc/net/netstat | awk '$1 == "TcpExt:" { if (!h) { for (i = 2; i <= NF; i++) n[i] = $i; h = 1 }
    else for (i = 2; i <= NF; i++) if (n[i] ~ /^(TCPTimeouts|TCPSpuriousRTOs|TCPLossProbes|TCPSlowStartRetrans|TCPFastRetrans|TCPLostRetransmit|TCPSpuriousRtxHostQueues)$/) printf "%s=%s ", n[i], $i }'
}
# tcp_segs NS: the namespace's TCP RetransSegs and OutSegs (/proc/net/snmp).
tcp_segs() { nsx "$1" cat /proc/net/snmp | awk '$1 == "Tcp:" { if (h) print $13, $12; h = 1 }'; }
# tcp_stats_delta BEFORE AFTER: the counters that moved, as name=+N.
tcp_stats_delta() {
  echo "$1 | $2" | awk '{ for (i = 1; i <= NF; i++) { if ($i == "|") { after = 1; continue }
      split($i, kv, "="); if (after) { d = kv[2] - v[kv[1]]; if (d) printf "%s=+%d ", kv[1], d } else v[kv[1]] = kv[2] } }
    END { print "" }'
}

# --- formatting -------------------------------------------------------------

# fmt_rate BPS [REF_BPS]: "18.83 Mbit/s" (unit picked from REF_BPS, default BPS).
fmt_rate() {
  awk -v b="$1" -v r="${2:-$1}" 'BEGIN {
    if (r >= 1e9) printf "%.3f Gbit/s", b / 1e9
    else if (r >= 1e6) printf "%.2f Mbit/s", b / 1e6
    else printf "%.1f kbit/s", b / 1e3 }'
}
# fmt_num BPS REF: the number alone, in REF's unit.
fmt_num() { fmt_rate "$1" "$2" | cut -d' ' -f1; }
