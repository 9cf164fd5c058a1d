#!/bin/sh
# Forwarded traffic: TCP flows through a ROUTER that shapes its egress toward the receiver, the
# packets forwarded (no local socket: skb->sk is NULL on the shaped device). Three namespaces in
# the stock-kernel VM:
#   fa  the sender    a0 10.31.1.2/24, default route via 10.31.1.1
#   r   the router    va 10.31.1.1/24 (to fa), vb 10.31.2.1/24 (to fb), ip_forward=1
#   fb  the receiver  b0 10.31.2.2/24, default route via 10.31.2.1
# The limit sits on r's vb EGRESS. The data flows fa -> r -> fb: iperf3 -s -1 in fa, the client in
# fb with -R -P FLOWS (the receiver measures). A ping fa -> fb every 50 ms from 2 s after the flows
# start: its requests cross the shaped egress as a sparse flow (the replies come back unshaped).
# Peers, each row configuring vb's egress afresh and tearing it down (vb back to noqueue):
#   shaperctl    shaperctl -n r attach --dev vb; add-class --id 1 --rate RATE --overhead 24;
#                set-default --class 1 (edt, sch_fq, sparse flows and fair shares on: the defaults)
#   shaperctl-codel  the same with --aqm codel (CoDel on every packet of the class)
#   htb-fqcodel  HTB root, one class at RATE with overhead 24, fq_codel under it
#   none         (not run unless asked) unshaped: the VM's ceiling for the forwarded flows
# Rows: for each ECN setting, each flow count, each rate, each peer. Per row: goodput and error vs
# rate x 1448/1514, the sender's retransmits (RetransSegs of OutSegs in fa), Jain's index over the
# flows' goodputs (iperf3's end.streams, receiver side), ping p50/p99, and the shaper's drops by
# cause and CE marks. A benchmark, not a test: no assertion on the numbers.
#
#   sudo bench/forwarded.sh [--bin build/cli/shaperctl] [--out DIR] [--peers "shaperctl htb-fqcodel"]
#                           [--flows "1 8 64"] [--rates "2 20 200"] [--ecn "debian on"] [--seconds 12]
#
# Rates in Mbit. --ecn: the TCP ends' net.ipv4.tcp_ecn in fa and fb: debian (2, Debian's default:
# ECN answered, never asked for) and/or on (1 at both ends: a bench condition, named as one).
# Writes DIR/forwarded.json (every row with its exact commands: .rows[].commands, .rows[].traffic)
# and DIR/forwarded.md (printed too); DIR defaults to bench/results. Runs in the stock-kernel VM
# (vm/run.sh: Debian 12's cloud kernel 6.1 under qemu TCG; sch_fq, sch_htb and sch_fq_codel are in
# the harness's default module set, as accuracy.sh relies on); everything it creates lives and
# dies in the VM. About 12 minutes for the default 36 rows on the 2-core dev box.
set -u

ALL_PEERS="shaperctl shaperctl-codel htb-fqcodel none"

# ================================= on the host ==========================================

if [ -z "${SHAPERCTL_VM:-}" ]; then
  here="$(cd "$(dirname "$0")" && pwd)"
  repo="$(cd "$here/.." && pwd)"
  bin="$repo/build/cli/shaperctl" out="$here/results"
  peers="shaperctl htb-fqcodel" flows="1 8 64" rates="2 20 200" ecn="debian on" seconds=12
  while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || case "$1" in -h|--help) ;; *) echo "forwarded: $1 wants a value" >&2; exit 2 ;; esac
    case "$1" in
      --bin) bin="$2"; shift 2 ;;
      --out) out="$2"; shift 2 ;;
      --peers) peers="$2"; shift 2 ;;
      --flows) flows="$2"; shift 2 ;;
      --rates) rates="$2"; shift 2 ;;
      --ecn) ecn="$2"; shift 2 ;;
      --seconds) seconds="$2"; shift 2 ;;
      -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
      *) echo "usage: $0 [--bin PATH] [--out DIR] [--peers \"...\"] [--flows \"N...\"] [--rates \"MBIT...\"] [--ecn \"debian on\"] [--seconds S]" >&2; exit 2 ;;
    esac
  done
  if [ -z "$peers" ] || [ -z "$flows" ] || [ -z "$rates" ] || [ -z "$ecn" ]; then
    echo "forwarded: --peers, --flows, --rates and --ecn want at least one value" >&2; exit 2
  fi
  for p in $peers; do
    case " $ALL_PEERS " in *" $p "*) ;; *) echo "forwarded: unknown peer $p ($ALL_PEERS)" >&2; exit 2 ;; esac
  done
  for n in $flows $rates; do
    case "$n" in ''|0|*[!0-9]*) echo "forwarded: --flows and --rates want positive whole numbers, got $n" >&2; exit 2 ;; esac
  done
  for e in $ecn; do
    case "$e" in debian|on) ;; *) echo "forwarded: --ecn wants debian and/or on, got $e" >&2; exit 2 ;; esac
  done
  case "$seconds" in ''|*[!0-9]*) echo "forwarded: --seconds wants whole seconds, got $seconds" >&2; exit 2 ;; esac
  [ "$seconds" -ge 4 ] || { echo "forwarded: --seconds wants 4 or more (the ping starts at 2 s)" >&2; exit 2; }
  [ -x "$bin" ] || { echo "forwarded: no shaperctl at $bin (make -C build -j2 shaperctl)" >&2; exit 2; }
  for t in jq awk; do command -v $t >/dev/null || { echo "forwarded: $t missing (scripts/install-deps.sh)" >&2; exit 2; }; done
  nrows=$(( $(echo "$peers" | wc -w) * $(echo "$flows" | wc -w) * $(echo "$rates" | wc -w) * $(echo "$ecn" | wc -w) ))
  binopt=""
  [ "$(readlink -f "$bin")" = "$(readlink -f "$repo/build/cli/shaperctl")" ] || binopt=" --bin $bin"
  mkdir -p "$out"
  tmp="$(mktemp -d "${TMPDIR:-/tmp}/shaperctl-forwarded.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  trap 'exit 130' INT TERM HUP PIPE
  # The guest finds the binary as /usr/local/bin/shaperctl (run.sh keeps the basename).
  mkdir "$tmp/bin" && ln -s "$(readlink -f "$bin")" "$tmp/bin/shaperctl"
  t0=$(date +%s)
  load0=$(cut -d' ' -f1-3 /proc/loadavg)
  echo "forwarded: booting the stock-kernel VM for $nrows rows of $seconds s (host load $load0)"
  # Rows come back as "@@FWD {json}" lines; everything else is progress, shown as it comes.
  # The deadline: each row's iperf3 has SECONDS + 90 s at most; a typical row takes SECONDS + 5.
  "$repo/vm/run.sh" --timeout $((300 + nrows * (seconds + 45))) --bin "$tmp/bin/shaperctl" \
    --file "$here/tcp-rows.sh:/usr/local/share/shaperctl-bench/tcp-rows.sh" \
    "$0" "$peers" "$flows" "$rates" "$ecn" "$seconds" \
    2>&1 | tee "$tmp/console.txt" | grep --line-buffered -v '^@@FWD '
  rc=$(sed -n 's/^run.sh: scenario .* exited \([0-9]*\).*/\1/p' "$tmp/console.txt")
  grep '^@@FWD ' "$tmp/console.txt" | sed 's/^@@FWD //' >"$tmp/rows.jsonl"
  secs=$(($(date +%s) - t0))
  load1=$(cut -d' ' -f1-3 /proc/loadavg)
  # A line cut by the console (a kernel message in the middle of it) is left out, and said so.
  jq -R -c 'fromjson? // empty' "$tmp/rows.jsonl" >"$tmp/rows.ok"
  bad=$(( $(wc -l <"$tmp/rows.jsonl") - $(wc -l <"$tmp/rows.ok") ))
  [ "$bad" = 0 ] || echo "forwarded: $bad row line(s) from the VM did not parse, left out" >&2
  jq -s -e 'any(.[]; .peer != null)' "$tmp/rows.ok" >/dev/null 2>&1 ||
    { echo "forwarded: the VM returned no rows (status ${rc:-none})" >&2; exit 1; }
  cmdline="sudo bench/forwarded.sh${binopt} --peers \"$peers\" --flows \"$flows\" --rates \"$rates\" --ecn \"$ecn\" --seconds $seconds"
  jq -s --argjson secs "$secs" --arg load0 "$load0" --arg load1 "$load1" \
     --arg commit "$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
     --argjson dirty "$(git -C "$repo" status --porcelain -- bpf loader cli 2>/dev/null | wc -l)" \
     --arg host "$(uname -r)" --arg date "$(date -u +%FT%TZ)" --arg status "${rc:-none}" \
     --arg cmd "$cmdline" --argjson bad "$bad" '
    { bench: "forwarded", date: $date, commit: $commit, uncommitted_files_in_bpf_loader_cli: $dirty,
      command: $cmd, host_kernel: $host, host_load_before: $load0, host_load_after: $load1,
      vm: (map(select(.meta)) | last | .meta), vm_status: $status, wall_seconds: $secs,
      unparsed_lines: $bad,
      method: {
        topology: "netns fa (sender): a0 10.31.1.2/24 <-veth-> netns r (router, ip_forward=1): va 10.31.1.1/24, vb 10.31.2.1/24 <-veth-> netns fb (receiver): b0 10.31.2.2/24; default routes via r; the limit on r vb egress (forwarded packets, no local socket); MTU 1500, GSO/TSO on; iperf3 server (-1) in fa sends, client in fb with -R -P FLOWS receives",
        expected: "rate x 1448/1514: 1448 payload bytes per 1514-byte frame; both peers also charge 24 bytes of L1 overhead per frame (shaperctl per segment, HTB per packet, a GSO packet counting once), so a wire-exact shaper reads 1514/1538 - 1 = -1.6 %",
        goodput: "the receiver application bytes (iperf3 -i 0.1 in fb) from 1 s to the last full interval, mean",
        retransmits: "the sender namespace fa: Tcp RetransSegs / OutSegs from /proc/net/snmp, delta over the row",
        jain: "Jain index (sum x)^2 / (n sum x^2) over the flows goodputs, iperf3 end.streams[].receiver.bits_per_second (the whole test); null for one flow",
        ping: "iputils ping -i 0.05 from fa to fb, from 2 s after the flows start to 1 s before they end (at least 20); p50/p99 nearest rank over the replies; the requests cross the shaped egress",
        drops: "shaperctl: the class drops by cause (horizon, aqm, fair) + sch_fq drops on vb; htb-fqcodel: fq_codel drops (drop_overlimit of them: its packet limit; the rest CoDel)",
        marks: "shaperctl: CE marks by CoDel (ecn_marks) + by fair shares (fair_marks); htb-fqcodel: fq_codel ecn_mark",
        stream_mbps: "per-flow 0.1 s samples kept for rows of at most 8 flows; flow_mbps (end.streams) for every row"
      },
      rows: map(select(.peer)), cleanup: (map(select(.cleanup)) | last) }' "$tmp/rows.ok" >"$out/forwarded.json"

  # --- Markdown table ---
  jq -r '
    def fix(d): (. * pow(10; d) | round + 0) as $n | (if $n < 0 then -$n else $n end | tostring) as $s
      | (if ($s | length) <= d then ("0" * (d + 1 - ($s | length))) + $s else $s end) as $p
      | (if $n < 0 then "-" else "" end) + (if d > 0 then $p[:-d] + "." + $p[-d:] else $p end);
    def f(d): if . == null then "–" else fix(d) end;
    def sgn: if . == null then "–" elif . >= 0.05 then "+\(f(1))" else f(1) end;
    def ms: if . == null then "–" elif . < 10 then f(2) else f(1) end;
    def causes(l): [l[] | select(.[1] != null and .[1] > 0) | "\(.[0]) \(.[1])"] | if length == 0 then "" else " (\(join(", ")))" end;
    def drops_marks: .shaper as $s | if $s == null or $s.drops == null then "–" else
      "\($s.drops)\(causes($s.drop_causes | to_entries | map([.key, .value]))) / \($s.marks // "–")\(causes($s.mark_causes | to_entries | map([.key, .value])))" +
      (if ($s.holds // 0) > 0 then ", \($s.holds) held" else "" end) end;
    "| peer | flows × rate | ECN | goodput (error) | retransmits | Jain | ping p50/p99 | drops (by cause) / marks |",
    "|---|---|---|---|---|---|---|---|",
    (.rows[] |
      "| \(.peer_label) | \(.flows) × \(.rate_mbit) Mbit | \(.ecn)" +
      " | \(if .goodput_bps == null then "no result" else "\(.goodput_bps / 1e6 | f(2)) Mbit/s (\(.error_pct | sgn) %)" end)" +
      " | \(.retransmits // "–") of \(.segments_out // "–") (\(.retrans_pct | f(2)) %)" +
      " | \(.jain | f(3))" +
      " | \(.ping.p50_ms | ms) / \(.ping.p99_ms | ms) ms\(if (.ping.lost // 0) > 0 then " (\(.ping.lost) of \(.ping.n + .ping.lost) lost)" else "" end)" +
      " | \(drops_marks)\(if .failed then " **\(.failed | rtrimstr("; "))**" else "" end) |")
  ' "$out/forwarded.json" >"$tmp/table.md"
  {
    echo "# Forwarded TCP through a shaping router: shaperctl and HTB + fq_codel on the router's egress"
    echo
    jq -r '"Run \(.date), commit \(.commit)\(if .uncommitted_files_in_bpf_loader_cli > 0 then " (+\(.uncommitted_files_in_bpf_loader_cli) uncommitted files in bpf/ loader/ cli/)" else "" end), guest kernel \(.vm.kernel // "?") under qemu TCG (\(.vm.cpus // "?") vCPUs), host load \(.host_load_before) → \(.host_load_after) (\(if ((.host_load_before | split(" ")[0] | tonumber) > 2) then "taken under load: the 2-core host is shared" else "a quiet host" end)), \(.wall_seconds) s wall, every row run once. Command: `\(.command)`. ECN: debian = tcp_ecn=2 in fa and fb (Debian'"'"'s default: no ECN asked for); on = tcp_ecn=1 in both (ECN asked for: a bench condition)."' "$out/forwarded.json"
    echo
    cat "$tmp/table.md"
    echo
    jq -r '(.cleanup // {left: "no report from the VM"}) | "After the last row: \(.left)."' "$out/forwarded.json"
    echo
    echo "Topology: fa (sender) → r (router, the limit on its vb egress: forwarded packets, no local socket) → fb"
    echo "(receiver); iperf3 -s in fa, iperf3 -c -R -P FLOWS in fb. Goodput: the receiver's bytes from 1 s to the"
    echo "last full 0.1 s interval, mean, against rate × 1448/1514; both peers charge 24 bytes of L1 overhead per"
    echo "frame, so a wire-exact shaper reads −1.6 %. Retransmits: the sender's RetransSegs of its OutSegs (fa)."
    echo "Jain: over the flows' goodputs (iperf3 end.streams, receiver side; – for one flow). Ping: fa → fb every"
    echo "50 ms from 2 s after the flows start, nearest-rank p50/p99 of the replies. Drops: shaperctl's class by"
    echo "cause (horizon, aqm = CoDel, fair = a flow above its fair share or, forwarded, past 100 ms of backlog:"
    echo "bpf/fair.h) and sch_fq's (fq); fq_codel's, of which"
    echo "overlimit = its packet limit, the rest CoDel. Marks: CE marks (shaperctl: CoDel + fair shares; fq_codel:"
    echo "ecn_mark). Exact commands per row: forwarded.json (.rows[].commands, .rows[].traffic)."
  } >"$out/forwarded.md"
  echo
  cat "$out/forwarded.md"
  echo "json: $out/forwarded.json   table: $out/forwarded.md   wall time ${secs} s (VM status ${rc:-none})"
  [ "${rc:-1}" = 0 ]
  exit $?
fi

# ================================= in the VM =============================================
# busybox sh. Topology: fa: a0 10.31.1.2 <-> r: va 10.31.1.1, vb 10.31.2.1 <-> fb: b0 10.31.2.2;
# the limit on r's vb egress.

. /usr/local/share/shaperctl-vm/lib.sh
. /usr/local/share/shaperctl-bench/tcp-rows.sh
PEERS=$1 FLOWS_LIST=$2 RATES=$3 ECNS=$4 SECS=$5 SKIP=1
PORT=5700
SRC_IP=10.31.1.2 DST_IP=10.31.2.2
T_ALL=$(uptime_s)
SRV="" CLI=""

# Whatever ends the scenario: no iperf3 left, vb detached, the namespaces deleted, and a line
# saying what is left (pins, namespaces).
CLEANED=0
# shellcheck disable=SC2317  # only reached through the trap
cleanup() {
  local _left
  [ "$CLEANED" = 0 ] || return 0
  CLEANED=1
  for _p in $CLI $SRV; do kill "$_p" 2>/dev/null; done
  for _p in $CLI $SRV; do wait "$_p" 2>/dev/null; done
  if [ -e /run/netns/r ]; then
    shaperctl -n r detach --dev vb >/dev/null 2>&1
    tc -n r qdisc del dev vb root >/dev/null 2>&1
  fi
  for _n in fa r fb; do ip netns del "$_n" 2>/dev/null; done
  _left="$(ip netns list 2>/dev/null | tr '\n' ' ')"
  _left="${_left:+netns left: $_left}"
  [ -z "$(ls -A /sys/fs/bpf/shaperctl 2>/dev/null)" ] ||
    _left="${_left:+$_left; }pins left: $(ls /sys/fs/bpf/shaperctl | tr '\n' ' ')"
  [ -n "$_left" ] || _left="netns fa, r, fb deleted, no shaperctl pin"
  jq -n -c --arg l "$_left" '{cleanup: true, left: $l}' | sed 's/^/@@FWD /'
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

TOPO="ip netns add fa; ip netns add r; ip netns add fb   (lo up, IPv6 off)
ip link add a0 netns fa type veth peer name va netns r; ip -n fa addr add $SRC_IP/24 dev a0; ip -n r addr add 10.31.1.1/24 dev va
ip link add vb netns r type veth peer name b0 netns fb; ip -n r addr add 10.31.2.1/24 dev vb; ip -n fb addr add $DST_IP/24 dev b0
ip -n fa route add default via 10.31.1.1; ip -n fb route add default via 10.31.2.1
ip netns exec r sysctl -w net.ipv4.ip_forward=1
ip netns exec fa sysctl -w net.ipv4.tcp_no_metrics_save=1; ip netns exec fb sysctl -w net.ipv4.tcp_no_metrics_save=1"
{ new_ns fa && new_ns r && new_ns fb &&
  veth_pair fa a0 $SRC_IP/24 r va 10.31.1.1/24 &&
  veth_pair r vb 10.31.2.1/24 fb b0 $DST_IP/24 &&
  ip -n fa route add default via 10.31.1.1 &&
  ip -n fb route add default via 10.31.2.1 &&
  nsx r sysctl -qw net.ipv4.ip_forward=1 &&
  nsx fa sysctl -qw net.ipv4.tcp_no_metrics_save=1 &&
  nsx fb sysctl -qw net.ipv4.tcp_no_metrics_save=1; } ||
  { echo "forwarded: could not build the namespaces" >&2; exit 1; }
nsx fa "$PING" -n -c 1 -W 5 $DST_IP >/dev/null 2>&1 ||
  { echo "forwarded: fa cannot reach fb through r" >&2; exit 1; }
echo "@@FWD $(jq -n -c --arg k "$(uname -r)" --arg cpus "$(nproc)" \
  --arg sys "$(nsx fa sysctl -n net.ipv4.tcp_tso_rtt_log net.ipv4.tcp_congestion_control | tr '\n' ' ')" \
  --arg off "$(nsx r "$ETHTOOL" -k vb | grep -E '^(tcp-segmentation-offload|generic-segmentation-offload|generic-receive-offload):' | tr '\n' ' ')" \
  --arg iperf "$("$IPERF3" --version | head -n1)" --arg tcv "$(tc -V)" --arg topo "$TOPO" \
  '{meta: {kernel: $k, cpus: $cpus, "sender tso_rtt_log cc": $sys, "router vb offloads": $off, iperf3: $iperf, tc: $tcv,
           topology_commands: ($topo | split("\n"))}}')"

# setup PEER MBIT: the limit on r's vb egress (CMDS: the commands, FAILED: what failed).
setup() {
  CMDS="" FAILED=""
  case "$1" in
    shaperctl|shaperctl-codel)
      cmd shaperctl -n r attach --dev vb &&
        cmd shaperctl -n r add-class --dev vb --id 1 --rate "${2}mbit" --overhead 24 \
          $([ "$1" = shaperctl-codel ] && echo --aqm codel) &&
        cmd shaperctl -n r set-default --dev vb --class 1 ;;
    htb-fqcodel)
      cmd tc -n r qdisc add dev vb root handle 1: htb default 10 &&
        cmd tc -n r class add dev vb parent 1: classid 1:10 htb rate "${2}mbit" overhead 24 &&
        cmd tc -n r qdisc add dev vb parent 1:10 fq_codel ;;
    none) ;;
  esac
}
# teardown PEER: the peer's own way back; vb must be back to veth's noqueue, else (noted in the
# row) it is forced there so that the next row is not measured through a leftover.
teardown() {
  case "$1" in
    shaperctl*) CMDS="${CMDS}shaperctl -n r detach --dev vb
"
      shaperctl -n r detach --dev vb >/tmp/detach.out 2>&1 ||
        echo "  ! shaperctl detach failed: $(head -c 200 /tmp/detach.out)" >&2 ;;
    htb-fqcodel) CMDS="${CMDS}tc -n r qdisc del dev vb root
"
      tc -n r qdisc del dev vb root 2>/dev/null ;;
    none) ;;
  esac
  tc -n r qdisc show dev vb | grep -q 'qdisc noqueue 0: root' && ! tc -n r qdisc show dev vb | grep -q clsact &&
    return 0
  echo "  ! vb not back to noqueue after $1: $(tc -n r qdisc show dev vb | head -n3 | tr '\n' ' ')" >&2
  shaperctl -n r detach --dev vb >/dev/null 2>&1
  tc -n r qdisc del dev vb root >/dev/null 2>&1
  tc -n r qdisc del dev vb clsact >/dev/null 2>&1
  return 1
}
# counters PEER: {"drops", "drop_causes", "marks", "mark_causes", "holds", "detail"}, read before
# the teardown.
counters() {
  case "$1" in
    shaperctl*)
      shaperctl -n r status --dev vb --json --sample 0 | jq -c --argjson fq "$(fq_drops r vb)" '.classes[0] as $c
        | if $c == null then null else
          { drops: ($c.drops + $fq),
            drop_causes: {horizon: $c.drops_horizon, aqm: $c.drops_aqm, fair: $c.drops_fair, fq: $fq},
            marks: (($c.ecn_marks // 0) + ($c.fair_marks // 0)),
            mark_causes: {CoDel: $c.ecn_marks, fair: $c.fair_marks},
            holds: ($c.fair_holds // null),
            detail: ($c | {drops, drops_horizon, drops_aqm, drops_fair, ecn_marks, fair_marks}
                     + (if has("fair_holds") then {fair_holds} else {} end)
                     + {fq_drops: $fq, sparse, packets, segments, bytes, delay_p50_ns, delay_p99_ns}) } end' ;;
    htb-fqcodel)
      tc -n r -s -j qdisc show dev vb | jq -c '(map(select(.kind == "fq_codel"))[0]) as $q
        | (map(select(.kind == "htb"))[0]) as $h
        | if $q == null then null else
          { drops: $q.drops,
            drop_causes: {CoDel: ($q.drops - ($q.drop_overlimit // 0) - ($q.drop_overmemory // 0)),
                          overlimit: $q.drop_overlimit, overmemory: $q.drop_overmemory},
            marks: ($q.ecn_mark // 0), mark_causes: {},
            holds: null,
            detail: {fq_codel: ($q | del(.options)), htb: ($h | del(.options))} } end' ;;
    none) echo null ;;
  esac
}
# row PEER FLOWS MBIT ECN: one measurement, printed as an "@@FWD {json}" line.
row() {
  local _peer="$1" _n="$2" _mbit="$3" _ecn="$4" _on=2 _label _t0 _s0 _r0 _s1 _r1 _c=null _m _out _ping _pings _err
  PORT=$((PORT + 1))
  [ "$_ecn" = on ] && _on=1
  case "$_peer" in
    shaperctl) _label="shaperctl" ;;
    shaperctl-codel) _label="shaperctl --aqm codel" ;;
    htb-fqcodel) _label="HTB + fq_codel" ;;
    none) _label="unshaped (the VM's ceiling)" ;;
  esac
  _t0=$(uptime_s)
  # The receiver (fb) opens the connections, the sender (fa) accepts them.
  nsx fa sysctl -qw net.ipv4.tcp_ecn=$_on
  nsx fb sysctl -qw net.ipv4.tcp_ecn=$_on
  _out="/tmp/fwd-$_peer-$_n-$_mbit-$_ecn.json"
  _ping="/tmp/fwd-$_peer-$_n-$_mbit-$_ecn.ping"
  echo '{}' >"$_out"
  : >"$_ping"
  # From 2 s after the flows start to 1 s before they end, at least 20.
  _pings=$((SECS * 20 - 60))
  [ "$_pings" -ge 20 ] || _pings=20
  TRAFFIC="ip netns exec fa sysctl -w net.ipv4.tcp_ecn=$_on; ip netns exec fb sysctl -w net.ipv4.tcp_ecn=$_on
ip netns exec fa iperf3 -s -1 -p $PORT
ip netns exec fb iperf3 -c $SRC_IP -p $PORT -R -J -P $_n -t $SECS -i 0.1
ip netns exec fa ping -n -i 0.05 -c $_pings -W 2 $DST_IP   (2 s after the flows start)
"
  _s0="{}" _r0="{}" _s1="{}" _r1="{}"
  if setup "$_peer" "$_mbit"; then
    "$IP" netns exec fa "$IPERF3" -s -1 -p $PORT >"/tmp/srv-$PORT.log" 2>&1 &
    SRV=$!
    wait_listen fa $PORT || echo "  ! iperf3 server on port $PORT did not listen" >&2
    _s0=$(mibs fa) _r0=$(mibs fb)
    # A hard deadline: at 2 Mbit iperf3's control messages queue behind the data.
    timeout $((SECS + 90)) "$IP" netns exec fb "$IPERF3" -c $SRC_IP -p $PORT -R -J -P "$_n" -t "$SECS" -i 0.1 \
      >"$_out" 2>"$_out.err" &
    CLI=$!
    sleep 2
    "$IP" netns exec fa "$PING" -n -i 0.05 -c $_pings -W 2 $DST_IP >"$_ping" 2>&1
    wait $CLI
    CLI=""
    _s1=$(mibs fa) _r1=$(mibs fb)
    kill $SRV 2>/dev/null
    wait $SRV 2>/dev/null
    SRV=""
    _c=$(counters "$_peer" 2>/dev/null)
    [ -n "$_c" ] || _c=null
    _err=$(iperf_error "$_out")
    [ -z "$_err" ] || FAILED="${FAILED}iperf3: $_err (server: $(tail -n 2 "/tmp/srv-$PORT.log" 2>/dev/null | tr '\n' ' ' | tail -c 160)); "
    jq -e .start "$_out" >/dev/null 2>&1 || echo '{}' >"$_out"
  fi
  teardown "$_peer" || FAILED="${FAILED}teardown incomplete (vb forced back to noqueue); "
  _m=$(tcp_row "$_out" "$_mbit" $SKIP "$_s0" "$_s1" "$_r0" "$_r1")
  jq -n -c --arg peer "$_peer" --arg plabel "$_label" --argjson flows "$_n" --argjson mbit "$_mbit" \
    --arg ecn "$_ecn" --argjson on "$_on" --argjson secs "$SECS" --argjson c "$_c" --argjson m "${_m:-null}" \
    --argjson ping "$(ping_summary "$_ping" $_pings)" \
    --arg cmds "$CMDS" --arg traffic "$TRAFFIC" --arg failed "$FAILED" \
    --argjson wall "$(elapsed_since "$_t0")" --slurpfile ip "$_out" '
    ($ip[0] // {}) as $j | [$j.end.streams[]?.receiver.bits_per_second] as $fl
    | { peer: $peer, peer_label: $plabel, flows: $flows, rate_mbit: $mbit, ecn: $ecn, tcp_ecn: $on, seconds: $secs }
    + ($m // {}) + (if $flows > 8 then {stream_mbps: null} else {} end)
    + { flow_mbps: ($fl | map(. / 1e4 | round / 100)),
        jain: (if ($fl | length) < 2 or ($fl | map(. * .) | add) == 0 then null
               else ($fl | add) as $s | $s * $s / (($fl | length) * ($fl | map(. * .) | add)) end),
        ping: $ping, shaper: $c,
        wall_seconds: $wall,
        commands: ($cmds | split("\n") | map(select(length > 0))),
        traffic: ($traffic | split("\n") | map(select(length > 0))),
        failed: (if $failed == "" then null else $failed end) }' >/tmp/row.json 2>/tmp/jq.err ||
    { echo "  ! could not build the row: $(head -c 300 /tmp/jq.err)" >&2; return; }
  echo "@@FWD $(cat /tmp/row.json)"
  jq -r '"  \(.peer_label), \(.flows) x \(.rate_mbit) Mbit, ECN \(.ecn): " + if .goodput_bps == null then "no result \(.failed // "")" else
    "\(.goodput_bps / 1e4 | round / 100) Mbit/s (\(.error_pct * 10 | round / 10) %), retrans \(.retransmits) (\((.retrans_pct // 0) * 100 | round / 100) %), Jain \(.jain // "-"), ping p50 \(.ping.p50_ms) p99 \(.ping.p99_ms) ms, drops \(.shaper.drops // "-"), marks \(.shaper.marks // "-"), \(.wall_seconds | round) s\(if .failed then "  [\(.failed)]" else "" end)" end' /tmp/row.json
}

for ecn in $ECNS; do
  for n in $FLOWS_LIST; do
    for mbit in $RATES; do
      echo "== ECN $ecn, $n TCP flow(s) fa -> r -> fb, $mbit Mbit on r's vb egress, $SECS s"
      for peer in $PEERS; do row "$peer" "$n" "$mbit" "$ecn"; done
    done
  done
done
echo "== done in $(elapsed_since "$T_ALL" | cut -d. -f1) s (in the VM)"
exit 0
