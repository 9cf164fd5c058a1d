#!/bin/sh
# Shaping accuracy and latency: shaperctl against HTB, TBF and FQ maxrate. The same
# traffic, in one VM run, through each shaper on the sender's veth egress:
#   1. one TCP flow (GSO/TSO on) at 100 kbit (15 s; again, 12 s, with tcp_tso_rtt_log=0),
#      2 Mbit (10 s), 20 and 200 Mbit (5 s);
#   2. 8 bulk TCP flows in 20 Mbit + a ping every 50 ms (RTT p50/p99, Jain's index);
#   3. the same with 64 bulk TCP flows; both also at 2 and 200 Mbit (flows8-2m, flows64-200m, ...);
#   4. 8 bulk TCP flows + a UDP flood at 100 Mbit (5x the rate, 1400-byte datagrams) in 20 Mbit
#      + the ping: TCP and UDP goodput, their total against the expected;
#   5. 100-byte UDP datagrams offered at 8 Mbit/s of payload into a 4 Mbit class.
# Per row: configured rate, expected and measured goodput, error %, drops (and ECN marks),
# TCP retransmissions (the sender's RetransSegs of its OutSegs), the exact commands. No assertions: some shapers fail some scenarios.
#
#   sudo bench/accuracy.sh [--bin build/cli/shaperctl] [--out DIR] [--only "tcp20m flows8 ..."]
#                          [--ecn debian|on] [--shapers "shaperctl htb ..."]
#
# --ecn: the TCP ends' net.ipv4.tcp_ecn: debian (the default: 2, ECN answered, never asked for,
# as Debian and most Internet clients leave it) or on (1 at both ends: CoDel and fair shares
# mark instead of dropping; a bench condition, named in the results). --shapers: only these of
# shaperctl shaperctl-codel htb htb-fqcodel tbf fq.
#
# Writes DIR/accuracy.json, DIR/accuracy.md (also printed) and DIR/accuracy.png (gnuplot on the
# host); DIR defaults to bench/results. Scenario names for --only: tcp100k tcp100k0 tcp2m
# tcp20m tcp200m flows8 flows64 udpflood udp (a partial run rewrites DIR's files with its rows
# alone: give it another --out). About 11 minutes on the 2-core dev box. Pacing needs sch_fq, so the
# measurement runs in the stock-kernel VM (vm/run.sh: Debian 12's cloud kernel 6.1, qemu
# TCG); everything it creates lives and dies in the VM.
set -u

ALL_SCENARIOS="tcp100k tcp100k0 tcp2m tcp20m tcp200m flows8 flows64 udpflood udp flows8-2m flows8-200m flows64-2m flows64-200m"
ALL_SHAPERS="shaperctl shaperctl-codel htb htb-fqcodel tbf fq"

# ================================= on the host ==========================================

if [ -z "${SHAPERCTL_VM:-}" ]; then
  here="$(cd "$(dirname "$0")" && pwd)"
  repo="$(cd "$here/.." && pwd)"
  bin="$repo/build/cli/shaperctl" out="$here/results" only="" report=0 ecn=debian shapers=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --bin) bin="$2"; shift 2 ;;
      --out) out="$2"; shift 2 ;;
      --only) only="$2"; shift 2 ;;
      --report) report=1; shift ;;
      --ecn) ecn="$2"; shift 2 ;;
      --shapers) shapers="$2"; shift 2 ;;
      -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
      *) echo "usage: $0 [--bin PATH] [--out DIR] [--only \"SCENARIO...\"] [--ecn debian|on] [--shapers \"SHAPER...\"]" >&2; exit 2 ;;
    esac
  done
  case "$ecn" in debian|on) ;; *) echo "accuracy: --ecn takes debian or on, not $ecn" >&2; exit 2 ;; esac
  for s in $shapers; do
    case " $ALL_SHAPERS " in
      *" $s "*) ;; *) echo "accuracy: unknown shaper $s" >&2; exit 2 ;;
    esac
  done
  for s in $only; do
    case " $ALL_SCENARIOS " in *" $s "*) ;; *) echo "accuracy: unknown scenario $s ($ALL_SCENARIOS)" >&2; exit 2 ;; esac
  done
  [ "$report" = 1 ] || [ -x "$bin" ] || { echo "accuracy: no shaperctl at $bin (make -C build -j2 shaperctl)" >&2; exit 2; }
  for t in jq awk; do command -v $t >/dev/null || { echo "accuracy: $t missing" >&2; exit 2; }; done
  mkdir -p "$out"
  tmp="$(mktemp -d "${TMPDIR:-/tmp}/shaperctl-accuracy.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  trap 'exit 130' INT TERM HUP PIPE
  rc=0 secs=0
  if [ "$report" = 0 ]; then
    # The guest finds the binary as /usr/local/bin/shaperctl (run.sh keeps the basename).
    mkdir "$tmp/bin" && ln -s "$(readlink -f "$bin")" "$tmp/bin/shaperctl"
    t0=$(date +%s)
    load0=$(cut -d' ' -f1-3 /proc/loadavg)
    echo "accuracy: booting the stock-kernel VM (host load $load0)"
    # Rows come back as "@@ACC {json}" lines; everything else is progress, shown as it comes.
    # shellcheck disable=SC2086
    "$repo/vm/run.sh" --timeout 1200 --bin "$tmp/bin/shaperctl" \
      --file "$here/tcp-rows.sh:/usr/local/share/shaperctl-bench/tcp-rows.sh" "$0" \
      "ecn:$ecn" ${shapers:+"shapers:$shapers"} $only \
      2>&1 | tee "$tmp/console.txt" | grep --line-buffered -v '^@@ACC '
    rc=$(sed -n 's/^run.sh: scenario .* exited \([0-9]*\).*/\1/p' "$tmp/console.txt")
    grep '^@@ACC ' "$tmp/console.txt" | sed 's/^@@ACC //' >"$tmp/rows.jsonl"
    secs=$(($(date +%s) - t0))
    load1=$(cut -d' ' -f1-3 /proc/loadavg)
    if [ ! -s "$tmp/rows.jsonl" ]; then
      echo "accuracy: the VM returned no rows (status ${rc:-none})" >&2; exit 1
    fi
    meta=$(grep '^@@ACC ' "$tmp/console.txt" | sed 's/^@@ACC //' | jq -c 'select(.meta)' | tail -n1)
    commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
    dirty=$(git -C "$repo" status --porcelain -- bpf loader cli 2>/dev/null | wc -l)
    jq -s --argjson secs "$secs" --arg load0 "$load0" --arg load1 "$load1" --arg commit "$commit" \
       --argjson dirty "$dirty" --arg host "$(uname -r)" --arg date "$(date -u +%FT%TZ)" \
       --argjson meta "${meta:-null}" --arg status "${rc:-none}" --arg only "$only" \
       --arg ecn "$ecn" --arg shapers "$shapers" '
      { bench: "accuracy", date: $date, commit: $commit, only: (if $only == "" then null else $only end),
        ecn: $ecn, shapers: (if $shapers == "" then null else $shapers end), uncommitted_files_in_bpf_loader_cli: $dirty,
        host_kernel: $host, host_load_before: $load0, host_load_after: $load1,
        vm: ($meta.meta // null), vm_status: $status, wall_seconds: $secs,
        method: {
          topology: "netns s: va 10.9.0.1 <-veth-> netns r: vb 10.9.0.2; shaper on va egress; MTU 1500, GSO/TSO on; iperf3 server (one-off, -1) in s, client in r with -R: goodput is what the receiver got",
          goodput: "measured_bps: least-squares slope of the receiver cumulative bytes, iperf3 intervals of 0.1 s, the first skip_seconds and the last interval left out (robust to where the window cuts the 64 KB steps of GSO bursts at low rates); window_mean_bps: the plain mean over the same window",
          tcp_expected: "rate x 1448/1538: 1448 payload bytes per 1514-byte frame (20 IP + 20 TCP + 12 timestamps + 14 Ethernet) + 24 bytes of L1 overhead",
          udp_expected: "rate x 100/166: 100 payload bytes per 142-byte frame (8 UDP + 20 IP + 14 Ethernet) + 24 bytes of L1 overhead; frames at rate x 142/166",
          flood_expected: "udpflood: the TCP and UDP goodputs are measured apart (each a slope as above) and added; expected is what a wire-exact shaper delivers for the measured mix: rate x (tcp + udp) / (tcp x 1538/1448 + udp x 1466/1400), 1400 payload bytes per 1442-byte UDP frame + 24",
          expected_own: "what the shaper would deliver by its own accounting: FQ counts frames without overhead (x1538/1514 for TCP, x166/142 for UDP), and maxrate is per flow (x8 with 8 flows, x64 with 64, 8 TCP + 1 UDP with the flood; capped by the VM ceiling)",
          error_pct: "(measured / expected - 1) x 100, against the wire-accurate expectation",
          ping: "iputils ping -i 0.05 -c 120 from s while the bulk flows run, from skip_seconds + 1 s after they start; p50/p99 nearest rank over the replies",
          jain: "Jain index (sum x)^2 / (n sum x^2) over the TCP flows bytes in the measured intervals (the UDP flood left out)",
          flow_bytes: "the bytes of each TCP flow in the measured intervals, what jain is computed from: which flows lagged",
          tcp_counters: "the TCP counters of the sender over the row (tcp_counters_first: over its first skip_seconds + 1 s): timeouts, spurious ones, retransmissions deferred while the original was still queued in the host, undos, loss probes",
          drops: "shaperctl: class drops (horizon + AQM + fair share) + sch_fq drops; tc shapers: the largest drop count of any qdisc in the tree (the root counts its children enqueue drops, fq_codel counts its own)",
          marks: "shaperctl: CE marks by CoDel + by fair shares; tc shapers: fq_codel CE marks"
        },
        rows: map(select(.meta | not)) }' "$tmp/rows.jsonl" >"$out/accuracy.json"

  else
    [ -s "$out/accuracy.json" ] || { echo "accuracy: no $out/accuracy.json to report" >&2; exit 2; }
    secs=$(jq .wall_seconds "$out/accuracy.json") rc=$(jq -r .vm_status "$out/accuracy.json")
  fi

  # --- Markdown table ---
  jq -r '
    def fix(d): (. * pow(10; d) | round + 0) as $n | (if $n < 0 then -$n else $n end | tostring) as $s
      | (if ($s | length) <= d then ("0" * (d + 1 - ($s | length))) + $s else $s end) as $p
      | (if $n < 0 then "-" else "" end) + (if d > 0 then $p[:-d] + "." + $p[-d:] else $p end);
    def rate: if . == null then "–" elif . >= 1e6 then "\(. / 1e6 | fix(2)) Mbit/s" else "\(. / 1e3 | fix(1)) kbit/s" end;
    def pct: if . == null then "–" else ((if . >= 0.05 then "+" else "" end) + fix(1)) end;
    def ms: if . == null then "–" elif . < 10 then fix(3) else fix(1) end;
    "| scenario | shaper | rate | expected | measured | error % | ping p50 / p99 ms | Jain | drops | marks | retrans | notes |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|",
    (.rows[] | "| \(.scenario) | \(.shaper) | \(.rate) | \(.expected_bps | rate) | \(.measured_bps | rate)" +
      " | \(.error_pct | pct)\(if .expected_own_bps != null and .expected_own_bps != .expected_bps then " (own \(.error_own_pct | pct))" else "" end)" +
      " | \(if .ping == null then "–" else "\(.ping.p50_ms | ms) / \(.ping.p99_ms | ms)\(if .ping.lost > 0 then " (\(.ping.lost) of 120 lost)" else "" end)" end)" +
      " | \(if .jain == null then "–" else (.jain | fix(4)) end) | \(.drops // "–") | \(.marks // "–") | \(if .segments_out == null then "–" else "\(.retransmits) of \(.segments_out) (\(.retrans_pct | fix(2)) %)" end)" +
      " | \([(.note // empty),
             (if .split != null then "TCP \(.split.tcp_bps | rate) + UDP \(.split.udp_bps | rate)" else empty end),
             (if .udp != null then "\(if .split != null then "UDP " else "" end)sent \(.udp.packets), lost \(.udp.lost)" else empty end),
             (if .window_mean_bps != null and .expected_bps != null and ((.window_mean_bps - .measured_bps) / .expected_bps | fabs) > 0.01
              then "window mean \(.window_mean_bps | rate)" else empty end),
             (if .rate_bps != null and .rate_bps <= 2e6 and .largest_interval_bytes != null
              then "largest 0.1 s: \(.largest_interval_bytes / 1024 | fix(1)) KiB (\(.largest_interval_bytes * 8 / .rate_bps | fix(2)) s of the rate)" else empty end),
             (if .wall_seconds > .seconds + 15 then "row took \(.wall_seconds | round) s: iperf3 end-of-test queued behind the backlog" else empty end),
             (if .failed then "**\(.failed)**" else empty end)] | join("; ")) |")
' "$out/accuracy.json" >"$tmp/table.md"
  {
    echo "# shaperctl vs HTB, TBF, FQ maxrate: accuracy and latency"
    echo
    jq -r '"Run \(.date), commit \(.commit) (+\(.uncommitted_files_in_bpf_loader_cli) uncommitted files in bpf/ loader/ cli/), guest kernel \(.vm.kernel // "?") under qemu TCG (2 vCPUs), host load \(.host_load_before) → \(.host_load_after), \(.wall_seconds) s wall. Command: `sudo bench/accuracy.sh\(if .only then " --only \"\(.only)\"" else "" end)\(if (.ecn // "on") != "debian" then " --ecn \(.ecn // "on")" else "" end)\(if .shapers then " --shapers \"\(.shapers)\"" else "" end)`. TCP ends: \(.vm.ecn // "?")\(if (.ecn // "on") == "on" then " (ECN asked for: a bench condition, not Debian'"'"'s default)" else " (Debian'"'"'s default: no ECN asked for)" end)."' "$out/accuracy.json"
    echo
    cat "$tmp/table.md"
    echo
    echo "Measured: receiver goodput, least-squares slope of the cumulative bytes (0.1 s samples, start-up"
    echo "and last interval left out); \"window mean\" is noted where the plain mean differs by over 1 point."
    echo "Expected: TCP rate × 1448/1538, UDP (100-byte datagrams) rate × 100/166 — what a shaper that"
    echo "charges every frame plus 24 bytes of L1 overhead delivers. \"own\": the error against the shaper's"
    echo "own accounting (FQ maxrate: frames without overhead, per flow). udpflood: measured is TCP + UDP,"
    echo "expected is for the measured mix (the 1400-byte datagrams: × 1400/1466); Jain is over the TCP"
    echo "flows. Marks: CE marks (shaperctl: CoDel + fair shares). Rates in bit/s (k = 10³, M = 10⁶)."
    echo "Exact commands per row: accuracy.json (.rows[].commands, .rows[].traffic)."
  } >"$out/accuracy.md"
  echo
  cat "$out/accuracy.md"

  # --- plot (on the host) ---
  if command -v gnuplot >/dev/null; then
    # error % per scenario (rows) and shaper (columns); "?" where a shaper did not run.
    jq -r '
      ["shaperctl", "shaperctl + codel", "HTB", "HTB + fq_codel", "TBF", "FQ maxrate"] as $sh
      | .rows as $r | ($r | map(.scenario)) as $have
      | (["scenario"] + $sh | @tsv),
        (["tcp-100kbit", "tcp-100kbit-rttlog0", "tcp-2mbit", "tcp-20mbit", "tcp-200mbit", "8flows-20mbit",
          "64flows-20mbit", "udpflood-20mbit", "udp100B-4mbit"][]
         | select(. as $s | $have | index($s)) as $s
         | [$s] + [$sh[] as $x | ([$r[] | select(.scenario == $s and .shaper == $x) | .error_pct][0] // "?")] | @tsv)
    ' "$out/accuracy.json" >"$tmp/err.dat"
    # bars beyond the axis: their values, written on the plot.
    clipped=$(jq -r '[.rows[] | select(.error_pct != null and (.error_pct > 10 or .error_pct < -10))
      | "\(.shaper), \(.scenario): \(if .error_pct > 0 then "+" else "" end)\(.error_pct * 10 | round / 10) %"] | join("\\n")' \
      "$out/accuracy.json")
    # ping p50 and p99 per shaper (rows) in each scenario with a ping (column pairs), "?" if none.
    ping_sc="8flows-20mbit 64flows-20mbit udpflood-20mbit"
    jq -r --arg sc "$ping_sc" '($sc | split(" ")) as $sc | [.rows[] | select(.ping.p50_ms != null)] as $r
      | ($r | map(.shaper) | unique) as $have
      | ["shaperctl", "shaperctl + codel", "HTB", "HTB + fq_codel", "TBF", "FQ maxrate"][]
      | select(. as $x | $have | index($x)) as $x
      | [$x] + [$sc[] as $s | ([$r[] | select(.scenario == $s and .shaper == $x) | .ping][0] // {})
                | (.p50_ms // "?"), (.p99_ms // "?")] | @tsv' "$out/accuracy.json" >"$tmp/ping.dat"
    ping_tics=$(awk -F '\t' '{ printf "%s\"%s\" %d", (NR > 1 ? ", " : ""), $1, NR - 1 }' "$tmp/ping.dat")
    layout="1,1" size="900,560"
    [ -s "$tmp/ping.dat" ] && layout="1,2" size="1500,600"
    {
      cat <<GP
set terminal pngcairo size $size font "sans,10" noenhanced
set output "$out/accuracy.png"
set datafile separator "\t"
set datafile missing "?"
set multiplot layout $layout title "shaperctl vs HTB / TBF / FQ maxrate — same traffic, one VM run (Debian 12 kernel 6.1, qemu TCG)"
set title "goodput error vs rate × 1448/1538 (TCP), × 100/166 (UDP 100 B), for the mix (TCP + flood); axis clipped at ±10 %"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set ylabel "error %"
set yrange [-10:10]
set grid ytics
set key below horizontal font ",9" autotitle columnheader
set style textbox opaque noborder
set xtics rotate by -20 font ",9" nomirror
set label 1 "off the axis:\\n$clipped" at graph 0.99, graph 0.97 right font ",8" front boxed
clip(x) = x > 10 ? 10 : (x < -10 ? -10 : x)
set xzeroaxis lt -1
plot for [i=2:7] "$tmp/err.dat" using (clip(column(i))):xtic(1) title columnheader(i)
unset label 1
GP
      if [ -s "$tmp/ping.dat" ]; then
        cat <<GP
set title "ping RTT in a 20 Mbit class under bulk TCP flows (log scale; open: p50, filled: p99)"
set logscale y
set yrange [*:*]
set xrange [-0.5:$(wc -l <"$tmp/ping.dat") - 0.5]
set ylabel "ms"
set key inside top left vertical noautotitle
set xtics ($ping_tics)
plot for [i=0:2] "$tmp/ping.dat" using (\$0 + (i - 1) * 0.22):(column(3 + 2 * i)) \\
       with points pt 7 ps 1.3 lc i + 1 title word("$ping_sc", i + 1), \\
     for [i=0:2] "" using (\$0 + (i - 1) * 0.22):(column(2 + 2 * i)) with points pt 6 ps 1.3 lc i + 1 notitle
GP
      fi
      echo "unset multiplot"
    } >"$tmp/plot.gp"
    if gnuplot "$tmp/plot.gp" 2>"$tmp/gnuplot.err"; then
      echo "plot: $out/accuracy.png"
    else
      echo "plot: gnuplot failed: $(head -c 400 "$tmp/gnuplot.err")"
    fi
  fi
  echo "json: $out/accuracy.json   table: $out/accuracy.md   wall time ${secs} s (VM status ${rc:-none})"
  [ "${rc:-1}" = 0 ]
  exit $?
fi

# ================================= in the VM =============================================
# busybox sh. Topology: s: va 10.9.0.1 <-veth-> r: vb 10.9.0.2, the shaper on va's egress.

. /usr/local/share/shaperctl-vm/lib.sh
. /usr/local/share/shaperctl-bench/tcp-rows.sh   # cmd
# Arguments: ecn:debian|on, shapers:"LIST" (the host's --ecn, --shapers), then scenarios.
ECN=debian SHAPERS_WANTED=""
case "${1:-}" in ecn:*) ECN=${1#ecn:}; shift ;; esac
case "${1:-}" in shapers:*) SHAPERS_WANTED=${1#shapers:}; shift ;; esac
SCENARIOS="${*:-$ALL_SCENARIOS}"
want() { case " $SCENARIOS " in *" $1 "*) return 0 ;; esac; return 1; }
# only SHAPER...: those of them --shapers asked for (all without it).
only() {
  local _s
  for _s in "$@"; do
    [ -z "$SHAPERS_WANTED" ] || case " $SHAPERS_WANTED " in *" $_s "*) ;; *) continue ;; esac
    echo "$_s"
  done
}
PORT=5300
T_ALL=$(uptime_s)

new_ns s && new_ns r && veth_pair s va 10.9.0.1/24 r vb 10.9.0.2/24 ||
  { echo "accuracy: could not build the namespaces" >&2; exit 1; }
# --ecn debian: tcp_ecn=2 at both ends (ECN answered, never asked for: no packet is
# ECN-capable). --ecn on: both ends ask (the receiver's client opens the connections), so
# fq_codel and CoDel mark instead of dropping. No cached ssthresh/cwnd from one run to the next.
# Everything else is the stock kernel's default (tcp_tso_rtt_log 9, cubic, TSQ).
ecn_sysctl=2
[ "$ECN" = on ] && ecn_sysctl=1
nsx s sysctl -qw net.ipv4.tcp_ecn=$ecn_sysctl net.ipv4.tcp_no_metrics_save=1
nsx r sysctl -qw net.ipv4.tcp_ecn=$ecn_sysctl net.ipv4.tcp_no_metrics_save=1
echo "@@ACC $(jq -n -c --arg k "$(uname -r)" --arg cpus "$(nproc)" --arg e "$ecn_sysctl" \
  --arg sys "$(nsx s sysctl -n net.ipv4.tcp_tso_rtt_log net.ipv4.tcp_congestion_control net.ipv4.tcp_limit_output_bytes | tr '\n' ' ')" \
  --arg gso "$(nsx s "$ETHTOOL" -k va | grep -E '^(tcp-segmentation-offload|generic-segmentation-offload):' | tr '\n' ' ')" \
  --arg iperf "$("$IPERF3" --version | head -n1)" --arg tcv "$(tc -V)" \
  '{meta: {kernel: $k, cpus: $cpus, "sender_sysctl tso_rtt_log cc limit_output_bytes": $sys, offloads: $gso, iperf3: $iperf, tc: $tcv, ecn: "tcp_ecn=\($e) in s and r"}}')"

TRAFFIC_PRE=""

# rate_bps RATE: bits/s of "100kbit", "20mbit".
rate_bps() {
  case "$1" in
    *kbit) echo $((${1%kbit} * 1000)) ;;
    *mbit) echo $((${1%mbit} * 1000000)) ;;
    *gbit) echo $((${1%gbit} * 1000000000)) ;;
    *) echo null ;;
  esac
}

# setup SHAPER RATE: configures va's egress.
setup() {
  local _b
  CMDS="" FAILED=""
  case "$1" in
    shaperctl|shaperctl-codel|shaperctl-h20)
      cmd shaperctl -n s attach --dev va &&
        case "$1" in
          shaperctl) cmd shaperctl -n s add-class --dev va --id 1 --rate "$2" --overhead 24 ;;
          shaperctl-codel) cmd shaperctl -n s add-class --dev va --id 1 --rate "$2" --overhead 24 --aqm codel ;;
          shaperctl-h20) cmd shaperctl -n s add-class --dev va --id 1 --rate "$2" --overhead 24 --horizon 20ms ;;
        esac &&
        cmd shaperctl -n s set-default --dev va --class 1 ;;
    htb|htb-fqcodel)
      cmd tc -n s qdisc add dev va root handle 1: htb default 10 &&
        cmd tc -n s class add dev va parent 1: classid 1:10 htb rate "$2" overhead 24 &&
        if [ "$1" = htb-fqcodel ]; then cmd tc -n s qdisc add dev va parent 1:10 fq_codel; fi ;;
    tbf)
      # burst: 4 ms at the rate, at least two full frames.
      _b=$(($(rate_bps "$2") / 8 / 250))
      [ "$_b" -ge 3028 ] || _b=3028
      cmd tc -n s qdisc add dev va root tbf rate "$2" burst "$_b" latency 50ms overhead 24 ;;
    fq) cmd tc -n s qdisc add dev va root fq maxrate "$2" ;;
    none) ;;
  esac
}
teardown() {
  case "$1" in
    shaperctl*) shaperctl -n s detach --dev va >/dev/null 2>&1 ;;
    none) ;;
    *) tc -n s qdisc del dev va root 2>/dev/null ;;
  esac
  # Back to veth's noqueue, or the next row would be measured through a leftover.
  tc -n s qdisc show dev va | grep -q 'qdisc noqueue 0: root' ||
    { echo "  ! va not back to noqueue: $(tc -n s qdisc show dev va | head -n2 | tr '\n' ' ')" >&2; return 1; }
}
# counters SHAPER: prints {"drops", "marks", "detail"} as JSON.
counters() {
  case "$1" in
    shaperctl*)
      status_json s va | jq -c --argjson fq "$(fq_drops s va)" '.classes[0] as $c |
        {drops: ($c.drops + $fq), marks: ($c.ecn_marks + ($c.fair_marks // 0)),
         detail: {drops_horizon: $c.drops_horizon, drops_aqm: $c.drops_aqm, drops_fair: $c.drops_fair,
                  fq_drops: $fq, ecn_marks: $c.ecn_marks, fair_marks: $c.fair_marks,
                  sparse: $c.sparse, packets: $c.packets,
                  segments: $c.segments, bytes_charged: $c.bytes}}' ;;
    none) echo '{"drops": null, "marks": null, "detail": null}' ;;
    *)
      tc -n s -s -j qdisc show dev va | jq -c '
        {drops: (map(.drops) | max), marks: (map(.ecn_mark // empty) | add),
         detail: map(del(.options, .refcnt, .root) | .parent //= "root")}' ;;
  esac
}

# server PORT: a one-off iperf3 server in s, in the background ($! is its pid).
server() {
  nsx s "$IPERF3" -s -1 -p "$1" >"/tmp/srv-$1.log" 2>&1 &
  wait_listen s "$1" || echo "  ! iperf3 server on port $1 did not listen" >&2
  TRAFFIC="${TRAFFIC}ip netns exec s iperf3 -s -1 -p $1
"
}
# client OUT PORT SECONDS ARGS...: the iperf3 client in r with -R, in the background ($! is its
# pid), JSON in OUT. A hard deadline: at low rates iperf3's control messages queue behind the data.
client() {
  local _out=$1 _port=$2 _t=$3
  shift 3
  TRAFFIC="${TRAFFIC}ip netns exec r iperf3 -c 10.9.0.1 -p $_port -R -J -t $_t $*
"
  timeout $((_t + 90)) "$IP" netns exec r "$IPERF3" -c 10.9.0.1 -p "$_port" -R -J -t "$_t" "$@" \
    >"$_out" 2>"$_out.err" &
}
# The UDP flood of KIND flood: 5x the 20 Mbit class, 1400-byte datagrams.
FLOOD="-u -b 100M -l 1400 -i 0.1"
# traffic NAME KIND SECONDS SKIP ARGS...: the iperf3 test, output in /tmp/NAME.json, the command
# lines in TRAFFIC. KIND tcp1 or udp: that test alone; bulk: plus a ping from s, SKIP + 1 s after
# the start, into /tmp/NAME.ping; flood: bulk plus FLOOD from a second server, /tmp/NAME.udp.json.
traffic() {
  local _name=$1 _kind=$2 _t=$3 _skip=$4 _bulk _fl="" _srv _srv2=""
  shift 4
  TRAFFIC="$TRAFFIC_PRE"
  server $PORT
  _srv=$!
  if [ "$_kind" = flood ]; then
    server $((PORT + 500))
    _srv2=$!
  fi
  client "/tmp/$_name.json" $PORT "$_t" "$@"
  _bulk=$!
  if [ "$_kind" = flood ]; then
    # shellcheck disable=SC2086
    client "/tmp/$_name.udp.json" $((PORT + 500)) "$_t" $FLOOD
    _fl=$!
  fi
  if [ "$_kind" = bulk ] || [ "$_kind" = flood ]; then
    sleep $((${_skip%.*} + 1))
    MIBS_MID=$(mibs s)
    TRAFFIC="${TRAFFIC}ip netns exec s ping -n -i 0.05 -c 120 10.9.0.2   ($((${_skip%.*} + 1)) s after the bulk flows start)"
    nsx s "$PING" -n -i 0.05 -c 120 -W 2 10.9.0.2 >"/tmp/$_name.ping" 2>&1
  fi
  wait $_bulk
  [ -z "$_fl" ] || wait "$_fl"
  kill $_srv $_srv2 2>/dev/null
  wait $_srv $_srv2 2>/dev/null
}

# ping_json FILE: {"p50_ms", "p99_ms", "max_ms", "n", "lost"} of an iputils ping output.
ping_json() {
  grep -o 'time=[0-9.]*' "$1" | cut -d= -f2 | sort -n | awk -v sent=120 '
    { v[NR] = $1 }
    function q(p,  i) { i = int(p * NR); if (i < p * NR) i++; if (i < 1) i = 1; return v[i] }
    END { if (NR == 0) { printf "{\"p50_ms\": null, \"p99_ms\": null, \"max_ms\": null, \"n\": 0, \"lost\": %d}", sent; exit }
          printf "{\"p50_ms\": %s, \"p99_ms\": %s, \"max_ms\": %s, \"n\": %d, \"lost\": %d}", q(0.5), q(0.99), v[NR], NR, sent - NR }'
}

# goodput JSON SKIP PORT: G_ERR is iperf3's error (added to FAILED with the end of the log of
# the server on PORT), G_SLOPE and G_MEAN the measured and the window-mean goodput (null without
# a result); JSON becomes {} if it is none.
goodput() {
  G_ERR=$(iperf_error "$1")
  [ -z "$G_ERR" ] ||
    FAILED="${FAILED}iperf3: $G_ERR (server: $(tail -n 3 "/tmp/srv-$3.log" 2>/dev/null | tr '\n' ' ' | tail -c 200)); "
  jq -e .start "$1" >/dev/null 2>&1 || echo '{}' >"$1"
  G_SLOPE=$(jq --argjson skip "$2" "$SLOPE" "$1" 2>/dev/null)
  [ -n "$G_SLOPE" ] || G_SLOPE=null
  G_MEAN=$(goodput_bps "$1" "$2" 2>/dev/null)
  [ -n "$G_MEAN" ] || G_MEAN=null
}
# measure SCENARIO SHAPER RATE KIND SECONDS SKIP EXPECTED EXPECTED_OWN [iperf3 args]: one row
# (KIND: see traffic; for flood EXPECTED is computed from the measured mix). NOTE goes along.
measure() {
  local _sc=$1 _sh=$2 _rate=$3 _kind=$4 _t=$5 _skip=$6 _exp=$7 _own=$8 _name _t0 _good _c _err \
    _jain=null _flows=null _ping=null _label _mean _split=null _m0 _m1
  shift 8
  _name="$_sc-$_sh"
  case "$_sh" in
    shaperctl) _label="shaperctl" ;; shaperctl-codel) _label="shaperctl + codel" ;;
    shaperctl-h20) _label="shaperctl --horizon 20ms" ;; htb) _label="HTB" ;;
    htb-fqcodel) _label="HTB + fq_codel" ;; tbf) _label="TBF" ;; fq) _label="FQ maxrate" ;;
    none) _label="unshaped (noqueue)" ;;
  esac
  _t0=$(uptime_s)
  setup "$_sh" "$_rate"
  _m0=$(mibs s)
  MIBS_MID=null
  traffic "$_name" "$_kind" "$_t" "$_skip" "$@"
  _m1=$(mibs s)
  _c=$(counters "$_sh")
  teardown "$_sh" || FAILED="${FAILED}teardown incomplete; "
  goodput "/tmp/$_name.json" "$_skip" $PORT
  _good=$G_SLOPE _mean=$G_MEAN _err=$G_ERR
  if [ "$_kind" = flood ]; then
    # The total of the TCP flows and the flood, against a wire-exact shaper's for that mix.
    goodput "/tmp/$_name.udp.json" "$_skip" $((PORT + 500))
    _split="{\"tcp_bps\": $_good, \"udp_bps\": $G_SLOPE}"
    if [ "$_good" != null ] && [ "$G_SLOPE" != null ]; then
      _exp=$(calc "$(rate_bps "$_rate") * ($_good + $G_SLOPE) / ($_good / ($tcp_frac) + $G_SLOPE / ($flood_frac))")
      _good=$(calc "$_good + $G_SLOPE")
    else
      _good=null
    fi
    if [ "$_mean" != null ] && [ "$G_MEAN" != null ]; then _mean=$(calc "$_mean + $G_MEAN"); else _mean=null; fi
  else
    echo '{}' >"/tmp/$_name.udp.json"
  fi
  if [ "$_kind" = bulk ] || [ "$_kind" = flood ] && [ -z "$_err" ]; then
    _flows=$(jq -c --argjson skip "$_skip" '[.intervals[:-1][] | select(.sum.start >= $skip - 0.001)
      | [.streams[].bytes]] | transpose | map(add)' "/tmp/$_name.json" 2>/dev/null) || _flows=null
    [ -n "$_flows" ] || _flows=null
    _jain=$(echo "$_flows" | jq 'if . == null then null else (add * add) / (length * (map(. * .) | add)) end' \
      2>/dev/null) || _jain=null
    [ -n "$_jain" ] || _jain=null
    _ping=$(ping_json "/tmp/$_name.ping")
  fi
  jq -n -c --arg sc "$_sc" --arg sh "$_label" --arg key "$_sh" --arg rate "$_rate" \
    --argjson rbps "$(rate_bps "$_rate")" \
    --argjson exp "$_exp" --argjson own "$_own" --argjson good "$_good" --argjson mean "$_mean" \
    --argjson jain "$_jain" --argjson flows "$_flows" --argjson ping "$_ping" --argjson c "$_c" \
    --arg cmds "$CMDS" --arg traffic "$TRAFFIC" --arg failed "$FAILED" --arg note "$NOTE" \
    --argjson secs "$(elapsed_since "$_t0")" --argjson skip "$_skip" --argjson t "$_t" \
    --argjson split "$_split" --argjson m0 "$_m0" --argjson m1 "$_m1" --argjson mid "$MIBS_MID" \
    --slurpfile ip "/tmp/$_name.json" --slurpfile fl "/tmp/$_name.udp.json" '
    ($ip[0] // {}) as $j | ($fl[0] // {}) as $u
    | { scenario: $sc, shaper: $sh, shaper_key: $key, rate: $rate, rate_bps: $rbps,
        expected_bps: $exp, expected_own_bps: $own, measured_bps: $good, window_mean_bps: $mean,
        largest_interval_bytes: ([$j.intervals[:-1][]?.sum | select(.start >= $skip - 0.001) | .bytes] | max),
        error_pct: (if $exp == null or $good == null then null else ($good / $exp - 1) * 100 end),
        error_own_pct: (if $own == null or $good == null then null else ($good / $own - 1) * 100 end),
        ping: $ping, jain: $jain, flow_bytes: $flows, drops: $c.drops, marks: $c.marks, counters: $c.detail,
        retransmits: ($m1.TcpRetransSegs - $m0.TcpRetransSegs), segments_out: ($m1.TcpOutSegs - $m0.TcpOutSegs),
        retrans_pct: (($m1.TcpRetransSegs - $m0.TcpRetransSegs) * 100 / ([$m1.TcpOutSegs - $m0.TcpOutSegs, 1] | max)),
        timeouts: (($m1.TcpExtTCPTimeouts // 0) - ($m0.TcpExtTCPTimeouts // 0)),
        loss_probes: (($m1.TcpExtTCPLossProbes // 0) - ($m0.TcpExtTCPLossProbes // 0)),
        tcp_counters: ($m1 | with_entries(.value -= ($m0[.key] // 0))),
        tcp_counters_first: (if $mid == null then null else $mid | with_entries(.value -= ($m0[.key] // 0)) end),
        udp: (first(($j, $u) | select(.end.sum.lost_packets != null)
                    | {packets: .end.sum.packets, lost: .end.sum.lost_packets}) // null),
        split: (if $split == null then null
                else $split + {udp_interval_mbps: [$u.intervals[]?.sum.bits_per_second / 1e4 | round / 100]} end),
        interval_mbps: [$j.intervals[]?.sum.bits_per_second / 1e4 | round / 100],
        note: (if $note == "" then null else $note end),
        seconds: $t, skip_seconds: $skip, wall_seconds: $secs,
        commands: ($cmds | split("\n") | map(select(length > 0))),
        traffic: ($traffic | split("\n") | map(select(length > 0))),
        failed: (if $failed == "" then null else $failed end) }' 2>/tmp/jq.err ||
    echo "  ! could not build the row: $(head -c 300 /tmp/jq.err)" >&2
}
row() {
  local _line _note=$NOTE
  PORT=$((PORT + 1))   # a fresh port per row (measure runs in a subshell)
  _line=$(measure "$@")
  # iperf3 now and then loses its control connection under heavy loss: one more try, noted.
  if echo "$_line" | jq -e '.failed // "" | test("iperf3:")' >/dev/null 2>&1; then
    echo "  ! $1 $2: $(echo "$_line" | jq -r .failed); once more" >&2
    PORT=$((PORT + 1))
    NOTE="${NOTE:+$NOTE; }second try (the first: $(echo "$_line" | jq -r .failed | head -c 160))"
    _line=$(measure "$@")
    NOTE=$_note
  fi
  echo "@@ACC $_line"
  echo "$_line" | jq -r '"  \(.scenario) \(.shaper): \(if .measured_bps == null then "no result" else "\(.measured_bps / 1e6 * 1000 | round / 1000) Mbit/s" end)\(if .error_pct != null then " (\(.error_pct * 10 | round / 10) %)" else "" end)\(if .ping != null then ", ping p50 \(.ping.p50_ms) p99 \(.ping.p99_ms) ms" else "" end), drops \(.drops), \(.wall_seconds * 10 | round / 10) s\(if .failed then "  [\(.failed)]" else "" end)"' 2>/dev/null
}

SHAPERS=$(only shaperctl htb htb-fqcodel tbf fq)
# Measured goodput: the least-squares slope of the receiver's cumulative bytes (iperf3
# intervals of 0.1 s; the first SKIP seconds and the last interval left out). A shaper that
# releases whole GSO packets (64 KB: 5.2 s of a 100 kbit class, 0.26 s at 2 Mbit) delivers in
# steps, and a window's plain mean is off by up to one step (+-6 % over 4 s at 2 Mbit) depending
# on where the window cuts them; the slope uses every sample and is far less sensitive to that.
# For smooth delivery the two agree. The plain mean is kept as window_mean_bps.
# shellcheck disable=SC2016  # jq's $variables
SLOPE='[.intervals[:-1][].sum | select(.start >= $skip - 0.001)] as $iv
  | if ($iv | length) < 3 then null else
      ([$iv[0].start] + [$iv[].end]) as $x | ([0] + [foreach $iv[] as $i (0; . + $i.bytes)]) as $y
      | ($x | length) as $n | ($x | add / $n) as $mx | ($y | add / $n) as $my
      | ([range($n) | ($x[.] - $mx) * ($y[.] - $my)] | add) * 8
        / ([range($n) | ($x[.] - $mx) * ($x[.] - $mx)] | add) end'
# FQ's own accounting: frames without overhead. The flood's 1400-byte datagrams: 1442-byte frames.
tcp_frac="1448 / 1538" tcp_own="1448 / 1514" flood_frac="1400 / 1466" flood_own="1400 / 1442"
NOTE=""

# tcp SCENARIO RATE SECONDS SKIP: one TCP flow through each shaper.
tcp() {
  local _sh _r
  _r=$(rate_bps "$2")
  echo "== $1: one TCP flow, $3 s, GSO/TSO on"
  for _sh in $SHAPERS; do
    if [ "$_sh" = fq ]; then
      row "$1" "$_sh" "$2" tcp1 "$3" "$4" "$(calc "$_r * $tcp_frac")" "$(calc "$_r * $tcp_own")" -i 0.1
    else
      row "$1" "$_sh" "$2" tcp1 "$3" "$4" "$(calc "$_r * $tcp_frac")" null -i 0.1
    fi
  done
}

want tcp100k && tcp tcp-100kbit 100kbit 15 3
if want tcp100k0; then
  # The same with GSO packets kept small: since 5.18 tcp_tso_rtt_log (9) lets TCP build 32-64 KB
  # GSO packets when the minimum RTT is below 0.5 ms, as on this veth: 2.6-5.2 s of a 100 kbit
  # class each, sent as a unit by every shaper that does not segment them. With 0, TCP sizes
  # them from its pacing rate (2 segments at this rate): the class rate itself can be measured.
  rttlog=$(nsx s sysctl -n net.ipv4.tcp_tso_rtt_log)
  nsx s sysctl -qw net.ipv4.tcp_tso_rtt_log=0
  TRAFFIC_PRE="ip netns exec s sysctl -w net.ipv4.tcp_tso_rtt_log=0
"
  tcp tcp-100kbit-rttlog0 100kbit 12 2
  TRAFFIC_PRE=""
  nsx s sysctl -qw net.ipv4.tcp_tso_rtt_log="$rttlog"
fi
want tcp2m && tcp tcp-2mbit 2mbit 10 1
want tcp20m && tcp tcp-20mbit 20mbit 5 0.5
if want tcp200m; then
  # The VM's ceiling first: 200 Mbit means something only if the VM can move more.
  echo "== the VM's ceiling: one TCP flow, unshaped, 4 s"
  row tcp-200mbit none unshaped tcp1 4 0.5 null null -i 0.1
  tcp tcp-200mbit 200mbit 5 0.5
fi

# bulk SCENARIO KIND SECONDS SKIP FLOWS SHAPER...: FLOWS bulk TCP flows (KIND bulk or flood, see
# traffic) in BULK_RATE (20mbit unless set) through each SHAPER. FQ's maxrate is per flow.
BULK_RATE=20mbit
bulk() {
  local _sc=$1 _kind=$2 _t=$3 _skip=$4 _n=$5 _sh _exp _own _fqown _flows=$5 _r
  shift 5
  _r=$(rate_bps "$BULK_RATE")
  _exp=$(calc "$_r * $tcp_frac") _fqown=$(calc "$_r * $_n * $tcp_own")
  if [ "$_kind" = flood ]; then
    _exp=null _fqown=$(calc "$_fqown + $_r * $flood_own") _flows="$_n TCP + 1 UDP"
  fi
  for _sh in "$@"; do
    NOTE="" _own=null
    if [ "$_sh" = fq ]; then NOTE="maxrate is per flow: $_flows flows × $BULK_RATE" _own=$_fqown; fi
    row "$_sc" "$_sh" "$BULK_RATE" "$_kind" "$_t" "$_skip" "$_exp" "$_own" -P "$_n" -i 0.1
  done
  NOTE=""
}
if want flows8; then
  echo "== 8flows-20mbit: 8 bulk TCP flows + ping every 50 ms, 9 s (ping from 2 s to 8 s)"
  bulk 8flows-20mbit bulk 9 1 8 $(only $ALL_SHAPERS)
fi
if want flows64; then
  echo "== 64flows-20mbit: 64 bulk TCP flows + ping every 50 ms, 10 s (ping from 3 s to 9 s)"
  bulk 64flows-20mbit bulk 10 2 64 $SHAPERS
fi
# The same flows at 2 and 200 Mbit: slow classes give each of 64 flows a few packets a second
# (longer runs), fast ones ask what the VM can move (tcp-200mbit's unshaped row says).
BULK_RATE=2mbit
want flows8-2m && echo "== 8flows-2mbit, 15 s" && bulk 8flows-2mbit bulk 15 3 8 $SHAPERS
want flows64-2m && echo "== 64flows-2mbit, 20 s" && bulk 64flows-2mbit bulk 20 5 64 $SHAPERS
BULK_RATE=200mbit
want flows8-200m && echo "== 8flows-200mbit, 9 s" && bulk 8flows-200mbit bulk 9 1 8 $SHAPERS
want flows64-200m && echo "== 64flows-200mbit, 10 s" && bulk 64flows-200mbit bulk 10 2 64 $SHAPERS
BULK_RATE=20mbit
if want udpflood; then
  echo "== udpflood-20mbit: 8 bulk TCP flows + UDP flood at 100 Mbit + ping every 50 ms, 9 s (ping from 2 s to 8 s)"
  bulk udpflood-20mbit flood 9 1 8 $SHAPERS
fi

if want udp; then
  echo "== udp100B-4mbit: 100-byte UDP datagrams offered at 8 Mbit/s of payload into 4 Mbit, 5 s"
  for sh in $SHAPERS $(only shaperctl-h20); do
    own=null
    [ "$sh" = fq ] && own=$(calc "4e6 * 100 / 142")
    row udp100B-4mbit "$sh" 4mbit udp 5 0.5 "$(calc "4e6 * 100 / 166")" "$own" -u -l 100 -b 8M -i 0.1
  done
fi

echo "== done in $(elapsed_since "$T_ALL" | cut -d. -f1) s (in the VM)"
exit 0
