#!/bin/sh
# Ingress shaping: what a host lets in when the limit sits on the RECEIVER's device. 4 TCP flows
# (12 s) from netns s into netns r, limited on r's veth vb at 2, 20 and 200 Mbit, ECN on and off
# (net.ipv4.tcp_ecn 1 or 0 in both namespaces). Peers:
#   none       unshaped, once, at the highest rate with ECN on: the VM's ceiling (is 200 Mbit
#              within its reach right now?)
#   police64k  tc police at clsact ingress, burst 64 KB
#   police1s   tc police, burst 1 s of the rate (Cilium's ingress bucket)
#   ifb-htb    ingress redirected to an ifb, HTB on the ifb (fq_codel under it where the guest
#              kernel has it, else HTB's default pfifo)
#   shaperctl  shaperctl attach --ingress --no-ack-pacing + add-class --ingress: the policer
#              alone; tried on every row; a CLI without it makes the row "not available" (its
#              one-line error kept)
#   shaperctl-ack  the same, and vb's send side attached in edt mode (sch_fq, no class): the
#              receiver's ACKs paced by the ingress class's clock (bpf/ack_pace.h); the class
#              with CoDel's paced target and interval (--target 5ms --interval 50ms, what
#              shaperctl-cni gives it) unless --class-options says otherwise
#   shaperctl-default  what README's commands give: attach --ingress (which attaches the send
#              side for ACK pacing itself) + add-class --ingress with the defaults, nothing else
# Per row: goodput error vs rate x 1448/1514, retransmits (count and % of the sender's segments),
# the largest 1 s window after the first second, CE marks seen by the receiver (with ECN), the
# shaper's drops, and whether the row meets the ingress goal (goodput within 3 % at 20 Mbit and
# 5 % at 2 and 200, retransmits <= 1 % with ECN and <= 5 % without, no 1 s window above 1.1 x
# the rate). A benchmark, not a test: no assertion on the numbers.
#
#   sudo bench/ingress.sh [--bin build/cli/shaperctl] [--out DIR] [--peers "..."] [--rates "2 20 200"]
#                         [--ecn "on off"] [--seconds 12] [--class-options "--target 5ms ..."]
#   bench/ingress.sh --report [--out DIR]      # table and plot again from DIR/ingress.json
#
# Rates in Mbit. Writes DIR/ingress.json (every row with its exact commands), DIR/ingress.md
# (printed too) and DIR/ingress.png (gnuplot on the host); DIR defaults to bench/results. Runs in
# the stock-kernel VM (vm/run.sh: Debian 12's cloud kernel 6.1 under qemu TCG, act_police
# loaded on top of the harness's modules); everything it creates lives and dies in the VM.
set -u

ALL_PEERS="none police64k police1s ifb-htb shaperctl shaperctl-ack shaperctl-default"

# ================================= on the host ==========================================

if [ -z "${SHAPERCTL_VM:-}" ]; then
  here="$(cd "$(dirname "$0")" && pwd)"
  repo="$(cd "$here/.." && pwd)"
  bin="$repo/build/cli/shaperctl" out="$here/results" report=0
  peers="$ALL_PEERS" rates="2 20 200" ecn="on off" seconds=12 class_options=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --bin) bin="$2"; shift 2 ;;
      --out) out="$2"; shift 2 ;;
      --peers) peers="$2"; shift 2 ;;
      --rates) rates="$2"; shift 2 ;;
      --ecn) ecn="$2"; shift 2 ;;
      --seconds) seconds="$2"; shift 2 ;;
      --class-options) class_options="$2"; shift 2 ;;
      --report) report=1; shift ;;
      -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
      *) echo "usage: $0 [--bin PATH] [--out DIR] [--peers \"...\"] [--rates \"MBIT...\"] [--ecn \"on off\"] [--seconds S] [--class-options \"...\"] | --report" >&2; exit 2 ;;
    esac
  done
  for p in $peers; do
    case " $ALL_PEERS " in *" $p "*) ;; *) echo "ingress: unknown peer $p ($ALL_PEERS)" >&2; exit 2 ;; esac
  done
  for r in $rates; do
    case "$r" in ''|*[!0-9]*) echo "ingress: --rates wants whole Mbit, got $r" >&2; exit 2 ;; esac
  done
  for e in $ecn; do
    case "$e" in on|off) ;; *) echo "ingress: --ecn wants on and/or off, got $e" >&2; exit 2 ;; esac
  done
  case "$seconds" in ''|*[!0-9]*) echo "ingress: --seconds wants whole seconds, got $seconds" >&2; exit 2 ;; esac
  for t in jq awk; do command -v $t >/dev/null || { echo "ingress: $t missing (scripts/install-deps.sh)" >&2; exit 2; }; done
  mkdir -p "$out"
  tmp="$(mktemp -d "${TMPDIR:-/tmp}/shaperctl-ingress.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  trap 'exit 130' INT TERM HUP PIPE
  rc=0
  if [ "$report" = 0 ]; then
    [ -x "$bin" ] || { echo "ingress: no shaperctl at $bin (make -C build -j2 shaperctl)" >&2; exit 2; }
    binopt=""
    [ "$(readlink -f "$bin")" = "$(readlink -f "$repo/build/cli/shaperctl")" ] || binopt=" --bin $bin"
    # The guest finds the binary as /usr/local/bin/shaperctl (run.sh keeps the basename).
    mkdir "$tmp/bin" && ln -s "$(readlink -f "$bin")" "$tmp/bin/shaperctl"
    t0=$(date +%s)
    load0=$(cut -d' ' -f1-3 /proc/loadavg)
    echo "ingress: booting the stock-kernel VM (host load $load0)"
    # Rows come back as "@@ING {json}" lines; everything else is progress, shown as it comes.
    "$repo/vm/run.sh" --timeout 2400 --module act_police --bin "$tmp/bin/shaperctl" \
      --file "$here/tcp-rows.sh:/usr/local/share/shaperctl-bench/tcp-rows.sh" \
      "$0" "$peers" "$rates" "$ecn" "$seconds" "$class_options" \
      2>&1 | tee "$tmp/console.txt" | grep --line-buffered -v '^@@ING '
    rc=$(sed -n 's/^run.sh: scenario .* exited \([0-9]*\).*/\1/p' "$tmp/console.txt")
    grep '^@@ING ' "$tmp/console.txt" | sed 's/^@@ING //' >"$tmp/rows.jsonl"
    secs=$(($(date +%s) - t0))
    load1=$(cut -d' ' -f1-3 /proc/loadavg)
    [ -s "$tmp/rows.jsonl" ] || { echo "ingress: the VM returned no rows (status ${rc:-none})" >&2; exit 1; }
    jq -s --argjson secs "$secs" --arg load0 "$load0" --arg load1 "$load1" \
       --arg commit "$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
       --arg host "$(uname -r)" --arg date "$(date -u +%FT%TZ)" --arg status "${rc:-none}" \
       --arg cmd "sudo bench/ingress.sh${binopt} --peers \"$peers\" --rates \"$rates\" --ecn \"$ecn\" --seconds $seconds${class_options:+ --class-options \"$class_options\"}" '
      { bench: "ingress", date: $date, commit: $commit, command: $cmd, host_kernel: $host,
        host_load_before: $load0, host_load_after: $load1,
        vm: (map(select(.meta)) | last | .meta), vm_status: $status, wall_seconds: $secs,
        method: {
          topology: "netns s: va 10.9.0.1 <-veth-> netns r: vb 10.9.0.2; the limit on vb ingress (the receiver); MTU 1500, GSO/TSO on; iperf3 server (-1) in s sends, client in r with -R -P 4 receives",
          expected: "rate x 1448/1514: 1448 payload bytes per 1514-byte frame, no L1 overhead (what tc police and HTB count at ingress)",
          goodput: "the receiver application bytes (iperf3 -i 0.1 in r) from 1 s to the last full interval, mean",
          retransmits: "the sender namespace s: Tcp RetransSegs / OutSegs from /proc/net/snmp, delta over the row",
          max_1s: "the receiver bytes sampled every 0.1 s (iperf3 intervals), a 1 s window slid by 0.1 s over the windows starting at 1 s or later, the largest, in bit/s",
          ce: "receiver: IpExt InCEPkts (segments that reached IP with CE, after tc ingress); sender: TcpExt TCPDeliveredCE",
          goal: "goodput within 3 % at 20 Mbit, 5 % at 2 and 200 Mbit; retransmits <= 1 % of segments with ECN, <= 5 % without; largest 1 s window <= 1.1 x the rate"
        },
        rows: map(select(.meta | not)) }' "$tmp/rows.jsonl" >"$out/ingress.json"
  else
    [ -s "$out/ingress.json" ] || { echo "ingress: no $out/ingress.json to report" >&2; exit 2; }
    secs=$(jq .wall_seconds "$out/ingress.json") rc=$(jq -r .vm_status "$out/ingress.json")
  fi

  # --- Markdown table ---
  jq -r '
    def f(d): if . == null then "–" else (. * pow(10; d) | round / pow(10; d) | tostring) end;
    def sgn: if . == null then "–" elif . > 0 then "+\(f(1))" else f(1) end;
    def yn: if . == null then "–" elif . then "yes" else "**no**" end;
    "| peer | rate | ECN | goodput (error) | retransmits | largest 1 s / rate | CE at receiver | shaper drops | meets goal (goodput, retrans, 1 s) |",
    "|---|---|---|---|---|---|---|---|---|",
    (.rows[] | if .available == false then
        "| \(.peer_label) | \(.rate_mbit) Mbit | \(.ecn) | not available: \(.not_available) | | | | | |"
      else
        "| \(.peer_label) | \(.rate_mbit) Mbit | \(.ecn) | \(.goodput_bps / 1e6 | f(2)) Mbit/s (\(.error_pct | sgn) %)" +
        " | \(.retransmits // "–") of \(.segments_out // "–") (\(.retrans_pct | f(1)) %)" +
        " | \(.max_1s_bps / 1e6 | f(2)) Mbit/s (\(.max_1s_ratio | f(2)))" +
        " | \(if .ecn == "on" then (.ce_receiver // "–" | tostring) else "–" end)" +
        " | \(.shaper_drops // "–")\(if (.shaper_marks // 0) > 0 then ", \(.shaper_marks) marks" else "" end)" +
        " | \(.meets.goodput | yn), \(.meets.retransmits | yn), \(.meets.max_1s | yn)" +
        "\(if .failed then " **\(.failed)**" else "" end) |"
      end)
  ' "$out/ingress.json" >"$tmp/table.md"
  {
    echo "# Ingress shaping on the receiver's device: tc police, ifb + HTB, shaperctl"
    echo
    jq -r '"Run \(.date), commit \(.commit), guest kernel \(.vm.kernel // "?") under qemu TCG (2 vCPUs), host load \(.host_load_before) → \(.host_load_after) (taken under load: the 2-core host is shared), \(.wall_seconds) s wall, every row run once. Command: `\(.command)`."' "$out/ingress.json"
    echo
    cat "$tmp/table.md"
    echo
    jq -r '[.rows[] | select(.peer | startswith("shaperctl"))] as $s
      | if ($s | length) == 0 then "shaperctl: not run."
        elif ($s | all(.available == false)) then "shaperctl: not available (\($s[0].not_available))."
        else "shaperctl meets the ingress goal on \([$s[] | select(.meets.all)] | length) of \($s | length) rows." end' "$out/ingress.json"
    echo
    echo "Expected goodput: rate × 1448/1514. Goodput: the receiver's bytes from 1 s to the end, mean."
    echo "Retransmits: the sender's RetransSegs of its OutSegs. Largest 1 s: the receiver's bytes sampled"
    echo "every 0.1 s, 1 s windows starting at 1 s or later, against the configured rate. CE: IpExt InCEPkts"
    echo "in the receiver. Goal: goodput within 3 % (20 Mbit) or 5 % (2, 200 Mbit), retransmits ≤ 1 % with"
    echo "ECN and ≤ 5 % without, largest 1 s ≤ 1.1 × rate. Exact commands per row: ingress.json (.rows[].commands)."
  } >"$out/ingress.md"
  echo
  cat "$out/ingress.md"

  # --- plot (on the host): goodput error and retransmit % per row, one bar per peer ---
  if command -v gnuplot >/dev/null; then
    jq -r '
      ["police64k", "police1s", "ifb-htb", "shaperctl", "shaperctl-ack", "shaperctl-default"] as $p | .rows as $r
      | (["row"] + ($p | map(. + " error %")) + ($p | map(. + " retrans %")) | @tsv),
        ([$r[] | "\(.rate_mbit) Mbit ECN \(.ecn)"] | unique_by(.) | sort_by(split(" ")[0] | tonumber)[]) as $k
        | [$k] + [$p[] as $x | ([$r[] | select("\(.rate_mbit) Mbit ECN \(.ecn)" == $k and .peer == $x) | .error_pct][0] // "?")]
               + [$p[] as $x | ([$r[] | select("\(.rate_mbit) Mbit ECN \(.ecn)" == $k and .peer == $x) | .retrans_pct][0] // "?")]
        | @tsv' "$out/ingress.json" >"$tmp/plot.dat"
    cat >"$tmp/plot.gp" <<GP
set terminal pngcairo size 1400,560 font "sans,10" noenhanced
set output "$out/ingress.png"
set datafile separator "\t"
set datafile missing "?"
set multiplot layout 1,2 title "Ingress shaping on the receiver (4 TCP flows, Debian 12 kernel 6.1 under qemu TCG, host under load)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics
set key below horizontal font ",9"
set xtics rotate by -20 font ",9" nomirror
set xzeroaxis lt -1
set title "goodput error vs rate × 1448/1514 (%)"
set ylabel "error %"
plot for [i=2:6] "$tmp/plot.dat" using i:xtic(1) title columnheader(i)
set title "retransmits (% of the sender's segments)"
set ylabel "%"
set yrange [0:*]
plot for [i=7:11] "$tmp/plot.dat" using i:xtic(1) title columnheader(i)
unset multiplot
GP
    if gnuplot "$tmp/plot.gp" 2>"$tmp/gnuplot.err"; then echo "plot: $out/ingress.png"
    else echo "plot: gnuplot failed: $(head -c 400 "$tmp/gnuplot.err")"; fi
  fi
  echo "json: $out/ingress.json   table: $out/ingress.md   wall time ${secs} s (VM status ${rc:-none})"
  [ "${rc:-1}" = 0 ]
  exit $?
fi

# ================================= in the VM =============================================
# busybox sh. Topology: s: va 10.9.0.1 <-veth-> r: vb 10.9.0.2, the limit on vb's ingress.

. /usr/local/share/shaperctl-vm/lib.sh
. /usr/local/share/shaperctl-bench/tcp-rows.sh
PEERS=$1 RATES=$2 ECNS=$3 SECS=$4 CLASS_OPTIONS=${5:-} FLOWS=4 SKIP=1
PORT=5400
T_ALL=$(uptime_s)

new_ns s && new_ns r && veth_pair s va 10.9.0.1/24 r vb 10.9.0.2/24 ||
  { echo "ingress: could not build the namespaces" >&2; exit 1; }
nsx s sysctl -qw net.ipv4.tcp_no_metrics_save=1
nsx r sysctl -qw net.ipv4.tcp_no_metrics_save=1
echo "@@ING $(jq -n -c --arg k "$(uname -r)" --arg cpus "$(nproc)" \
  --arg sys "$(nsx s sysctl -n net.ipv4.tcp_tso_rtt_log net.ipv4.tcp_congestion_control | tr '\n' ' ')" \
  --arg gro "$(nsx r "$ETHTOOL" -k vb | grep -E '^(generic-receive-offload|tcp-segmentation-offload):' | tr '\n' ' ')" \
  --arg iperf "$("$IPERF3" --version | head -n1)" --arg tcv "$(tc -V)" \
  '{meta: {kernel: $k, cpus: $cpus, "sender tso_rtt_log cc": $sys, "receiver offloads": $gro, iperf3: $iperf, tc: $tcv}}')"

UNAVAILABLE=""
# setup PEER MBIT: the limit on vb's ingress. The shaperctl hook: the product's ingress classes,
# detected by trying them (a CLI without them refuses --ingress: the row is "not available").
setup() {
  CMDS="" FAILED="" UNAVAILABLE=""
  case "$1" in
    none) ;;
    police64k|police1s)
      if [ "$1" = police64k ]; then _burst=64kb; else _burst=$(($2 * 125000)); fi
      cmd tc -n r qdisc add dev vb clsact &&
        cmd tc -n r filter add dev vb ingress protocol all prio 1 matchall \
          action police rate "${2}mbit" burst "$_burst" conform-exceed drop/ok ;;
    ifb-htb)
      cmd ip -n r link add ifbr type ifb && cmd ip -n r link set ifbr up &&
        cmd tc -n r qdisc add dev vb clsact &&
        cmd tc -n r filter add dev vb ingress protocol all prio 1 matchall \
          action mirred egress redirect dev ifbr &&
        cmd tc -n r qdisc add dev ifbr root handle 1: htb default 10 &&
        cmd tc -n r class add dev ifbr parent 1: classid 1:10 htb rate "${2}mbit" &&
        # fq_codel where the kernel has it (6.1: built in), else HTB's default pfifo leaf.
        if tc -n r qdisc add dev ifbr parent 1:10 fq_codel 2>/dev/null; then
          CMDS="${CMDS}tc -n r qdisc add dev ifbr parent 1:10 fq_codel
"
        else
          CMDS="${CMDS}(no fq_codel in this kernel: HTB's default leaf)
"
        fi ;;
    shaperctl|shaperctl-ack|shaperctl-default)
      local _alone=--no-ack-pacing
      [ "$1" != shaperctl-default ] || _alone=""
      CMDS="shaperctl -n r attach --dev vb --ingress $_alone
"
      if ! shaperctl -n r attach --dev vb --ingress $_alone >/tmp/cmd.out 2>&1; then
        UNAVAILABLE="$(head -n1 /tmp/cmd.out | head -c 200)"
        return 1
      fi
      opts=$CLASS_OPTIONS
      [ "$1" = shaperctl-default ] && opts=""
      [ "$1" = shaperctl-ack ] && [ -z "$opts" ] && opts="--target 5ms --interval 50ms"
      cmd shaperctl -n r add-class --dev vb --ingress --id 1 --rate "${2}mbit" $opts &&
        cmd shaperctl -n r set-default --dev vb --ingress --class 1 &&
        if [ "$1" = shaperctl-ack ]; then cmd shaperctl -n r attach --dev vb; fi ;;
  esac
}
teardown() {
  case "$1" in
    shaperctl|shaperctl-default) shaperctl -n r detach --dev vb --ingress >/dev/null 2>&1 ;;
    shaperctl-ack) shaperctl -n r detach --dev vb --ingress >/dev/null 2>&1
      shaperctl -n r detach --dev vb >/dev/null 2>&1 ;;
    none) ;;
    *) tc -n r qdisc del dev vb clsact 2>/dev/null; ip -n r link del ifbr 2>/dev/null ;;
  esac
  # Nothing left on vb's receive side, or the next row would be measured through a leftover.
  if tc -n r qdisc show dev vb | grep -Eq 'clsact|ingress' || ip -n r link show ifbr >/dev/null 2>&1; then
    echo "  ! vb's ingress not clean after $1" >&2
    return 1
  fi
}
# counters PEER: {"drops", "marks", "detail"} of the shaper as JSON.
counters() {
  case "$1" in
    none) echo '{"drops": null, "marks": null, "detail": null}' ;;
    police*)
      tc -n r -s -j filter show dev vb ingress | jq -c '[.. | objects | select(.kind? == "police")][0] as $p
        | {drops: $p.stats.drops, marks: null, detail: $p.stats}' ;;
    ifb-htb)
      tc -n r -s -j qdisc show dev ifbr | jq -c '{drops: (map(.drops) | max), marks: (map(.ecn_mark // empty) | add),
        detail: map(del(.options, .refcnt, .root) | .parent //= "root")}' ;;
    shaperctl|shaperctl-ack|shaperctl-default)
      shaperctl -n r status --dev vb --ingress --json --sample 0 | jq -c '.classes[0] as $c
        | {drops: $c.drops, marks: (($c.ecn_marks // 0) + ($c.fair_marks // 0)), detail: $c}' ;;
  esac
}
# row PEER MBIT ECN: one measurement, printed as an "@@ING {json}" line.
row() {
  local _peer=$1 _mbit=$2 _ecn=$3 _on=0 _label _t0 _s0 _r0 _s1 _r1 _c _m _srv _out _err="" _avail=true
  PORT=$((PORT + 1))
  [ "$_ecn" = on ] && _on=1
  case "$_peer" in
    none) _label="unshaped (the VM's ceiling)" ;;
    police64k) _label="tc police, burst 64 KB" ;;
    police1s) _label="tc police, burst 1 s" ;;
    ifb-htb) _label="ifb + HTB" ;;
    shaperctl) _label="shaperctl --ingress" ;;
    shaperctl-ack) _label="shaperctl --ingress, ACKs paced" ;;
    shaperctl-default) _label="shaperctl attach --ingress alone (README)" ;;
  esac
  _t0=$(uptime_s)
  # ECN on: both ends ask for it (r opens the connections, s accepts); off: neither does.
  nsx s sysctl -qw net.ipv4.tcp_ecn=$_on
  nsx r sysctl -qw net.ipv4.tcp_ecn=$_on
  _out="/tmp/$_peer-$_mbit-$_ecn.json"
  echo '{}' >"$_out"
  TRAFFIC="ip netns exec s sysctl -w net.ipv4.tcp_ecn=$_on; ip netns exec r sysctl -w net.ipv4.tcp_ecn=$_on
ip netns exec s iperf3 -s -1 -p $PORT
ip netns exec r iperf3 -c 10.9.0.1 -p $PORT -R -J -P $FLOWS -t $SECS -i 0.1
"
  _s0="{}" _r0="{}" _s1="{}" _r1="{}" _c=null
  if setup "$_peer" "$_mbit"; then
    nsx s "$IPERF3" -s -1 -p $PORT >"/tmp/srv-$PORT.log" 2>&1 &
    _srv=$!
    wait_listen s $PORT || echo "  ! iperf3 server on port $PORT did not listen" >&2
    _s0=$(mibs s) _r0=$(mibs r)
    # A hard deadline: at 2 Mbit iperf3's control messages queue behind the data.
    timeout $((SECS + 90)) "$IP" netns exec r "$IPERF3" -c 10.9.0.1 -p $PORT -R -J -P $FLOWS -t "$SECS" -i 0.1 \
      >"$_out" 2>"$_out.err"
    _s1=$(mibs s) _r1=$(mibs r)
    kill $_srv 2>/dev/null
    wait $_srv 2>/dev/null
    _c=$(counters "$_peer")
    [ -n "$_c" ] || _c=null
    _err=$(iperf_error "$_out")
    [ -z "$_err" ] || FAILED="${FAILED}iperf3: $_err; "
    jq -e .start "$_out" >/dev/null 2>&1 || echo '{}' >"$_out"
  elif [ -n "$UNAVAILABLE" ]; then
    _avail=false
  fi
  teardown "$_peer" || FAILED="${FAILED}teardown incomplete; "
  _m=$(tcp_row "$_out" "$_mbit" $SKIP "$_s0" "$_s1" "$_r0" "$_r1")
  jq -n -c --arg peer "$_peer" --arg peer_label "$_label" --argjson mbit "$_mbit" --arg ecn "$_ecn" \
    --argjson avail "$_avail" --arg unavail "$UNAVAILABLE" --argjson flows $FLOWS \
    --argjson secs "$SECS" --argjson c "$_c" --argjson m "${_m:-null}" \
    --arg cmds "$CMDS" --arg traffic "$TRAFFIC" --arg failed "$FAILED" \
    --argjson wall "$(elapsed_since "$_t0")" '
    { peer: $peer, peer_label: $peer_label, rate_mbit: $mbit, ecn: $ecn, flows: $flows, seconds: $secs,
      available: $avail, not_available: (if $avail then null else $unavail end) }
    + $m
    + { shaper_drops: $c.drops, shaper_marks: $c.marks, shaper_counters: $c.detail,
        meets: (if $m.goodput_bps == null or $peer == "none" then null else
          { goodput: (($m.error_pct | fabs) <= (if $mbit == 20 then 3 else 5 end)),
            retransmits: ($m.retrans_pct != null and $m.retrans_pct <= (if $ecn == "on" then 1 else 5 end)),
            max_1s: ($m.max_1s_bps != null and $m.max_1s_ratio <= 1.1) } | . + {all: (.goodput and .retransmits and .max_1s)} end),
        wall_seconds: $wall,
        commands: ($cmds | split("\n") | map(select(length > 0))),
        traffic: ($traffic | split("\n") | map(select(length > 0))),
        failed: (if $failed == "" then null else $failed end) }' >/tmp/row.json 2>/tmp/jq.err ||
    { echo "  ! could not build the row: $(head -c 300 /tmp/jq.err)" >&2; return; }
  echo "@@ING $(cat /tmp/row.json)"
  jq -r '"  \(.peer_label), \(.rate_mbit) Mbit, ECN \(.ecn): " + if .available == false then "not available (\(.not_available))"
    elif .goodput_bps == null then "no result \(.failed // "")" else
    "\(.goodput_bps / 1e4 | round / 100) Mbit/s (\(.error_pct * 10 | round / 10) %), retrans \(.retransmits) (\(.retrans_pct * 10 | round / 10) %), max 1 s \(.max_1s_ratio * 100 | round / 100) x, CE \(.ce_receiver), \(.wall_seconds | round) s" end' /tmp/row.json
}

MAX_MBIT=$(echo "$RATES" | tr ' ' '\n' | sort -n | tail -n1)
case " $PEERS " in
  *" none "*) echo "== the VM's ceiling: $FLOWS TCP flows, unshaped, $SECS s (error against $MAX_MBIT Mbit)"
    row none "$MAX_MBIT" on ;;
esac
for mbit in $RATES; do
  for ecn in $ECNS; do
    echo "== $mbit Mbit, ECN $ecn: $FLOWS TCP flows, $SECS s, limit on the receiver's vb ingress"
    for peer in $PEERS; do [ "$peer" = none ] || row "$peer" "$mbit" "$ecn"; done
  done
done
echo "== done in $(elapsed_since "$T_ALL" | cut -d. -f1) s (in the VM)"
exit 0
