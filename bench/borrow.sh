#!/bin/sh
# Borrowing against HTB: the same tree and the same TCP traffic through shaperctl (--ceil,
# --prio; alone, and with CoDel on the two children) and through HTB with fq_codel leaves
# (htb rate/ceil/prio), in one run of the stock-kernel VM, on the egress of a veth:
#   parent 20 Mbit; A 5 Mbit ceil 20 Mbit (8 TCP flows), B 15 Mbit ceil 20 Mbit (1 TCP flow),
#   the flows steered by their sending port (shaperctl rules, u32 filters); tcp_ecn=2 (Debian's).
# Cases: (a) both busy; (b) B stops: the time A takes to borrow its sibling's spare, A's rate
# once it has, and the time to give it back when B returns; (c) A's ceil 10 Mbit, alone;
# (d) equal guarantees 5/5, 8 flows against 1; (e) prio: B 0, A 1 (5/5); and a ping in B's
# class every 50 ms while A borrows, twice: B's flow sending 5 of its 15 Mbit, and (d)'s 5/5
# with both busy. Shares come from each class's byte counters sampled every 10 ms: shaperctl's
# through the pins (class_clock, counted as its packets' departures come), HTB's by rtnetlink
# (tc_class_clock, counted as it dequeues), with the sender's TCP retransmits over all cases.
# No assertions: the table states the goals.
#
#   sudo bench/borrow.sh [--bin build/cli/shaperctl] [--out DIR] [--shapers "shaperctl ..."]
#   bench/borrow.sh --report            # the table again from DIR/borrow.json
#
# --shapers: only these of shaperctl shaperctl-codel htb-fqcodel. Writes DIR/borrow.json and
# DIR/borrow.md (also printed); DIR defaults to bench/results. Builds class_clock and
# tc_class_clock if they are missing. About 6 minutes on the 2-core dev box.
set -u

ALL_SHAPERS="shaperctl shaperctl-codel htb-fqcodel"

# ================================= on the host ==========================================

if [ -z "${SHAPERCTL_VM:-}" ]; then
  here="$(cd "$(dirname "$0")" && pwd)"
  repo="$(cd "$here/.." && pwd)"
  bin="$repo/build/cli/shaperctl" out="$here/results" report=0 shapers=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --bin) bin="$2"; shift 2 ;;
      --out) out="$2"; shift 2 ;;
      --shapers) shapers="$2"; shift 2 ;;
      --report) report=1; shift ;;
      -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
      *) echo "usage: $0 [--bin PATH] [--out DIR] [--shapers \"SHAPER...\"] [--report]" >&2; exit 2 ;;
    esac
  done
  for s in $shapers; do
    case " $ALL_SHAPERS " in *" $s "*) ;; *) echo "borrow: unknown shaper $s ($ALL_SHAPERS)" >&2; exit 2 ;; esac
  done
  for t in jq awk; do command -v $t >/dev/null || { echo "borrow: $t missing (scripts/install-deps.sh)" >&2; exit 2; }; done
  mkdir -p "$out"
  tmp="$(mktemp -d "${TMPDIR:-/tmp}/shaperctl-borrow.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  trap 'exit 130' INT TERM HUP PIPE
  rc=0
  if [ "$report" = 0 ]; then
    [ -x "$bin" ] || { echo "borrow: no shaperctl at $bin (make -C build -j2 shaperctl)" >&2; exit 2; }
    build="$(dirname "$(dirname "$(readlink -f "$bin")")")"
    clock="$(dirname "$(readlink -f "$bin")")/class_clock" tcclock="$build/bench/tc_class_clock"
    if [ ! -x "$clock" ] || [ ! -x "$tcclock" ]; then
      echo "borrow: building class_clock and tc_class_clock in $build"
      cmake --build "$build" -j2 --target class_clock tc_class_clock >/dev/null ||
        { echo "borrow: could not build them (cmake --build $build --target class_clock tc_class_clock)" >&2; exit 2; }
    fi
    # The guest finds the binaries by their names in /usr/local/bin (run.sh keeps the basename).
    mkdir "$tmp/bin" && ln -s "$(readlink -f "$bin")" "$tmp/bin/shaperctl"
    t0=$(date +%s)
    load0=$(cut -d' ' -f1-3 /proc/loadavg)
    echo "borrow: booting the stock-kernel VM (host load $load0)"
    # Rows come back as "@@BRW {json}" lines; everything else is progress, shown as it comes.
    "$repo/vm/run.sh" --timeout 1500 --module sch_htb \
      --bin "$tmp/bin/shaperctl" --bin "$clock" --bin "$tcclock" \
      --file "$repo/tests/e2e/judge.sh:/usr/local/share/shaperctl-vm/judge.sh" \
      --file "$repo/tests/e2e/borrow.sh:/usr/local/share/shaperctl-vm/borrow.sh" \
      --file "$here/tcp-rows.sh:/usr/local/share/shaperctl-bench/tcp-rows.sh" \
      "$0" ${shapers:+"$shapers"} \
      2>&1 | tee "$tmp/console.txt" | grep --line-buffered -v '^@@BRW '
    rc=$(sed -n 's/^run.sh: scenario .* exited \([0-9]*\).*/\1/p' "$tmp/console.txt")
    grep '^@@BRW ' "$tmp/console.txt" | sed 's/^@@BRW //' >"$tmp/rows.jsonl"
    secs=$(($(date +%s) - t0))
    load1=$(cut -d' ' -f1-3 /proc/loadavg)
    [ -s "$tmp/rows.jsonl" ] || { echo "borrow: the VM returned no rows (status ${rc:-none})" >&2; exit 1; }
    jq -s --argjson secs "$secs" --arg load0 "$load0" --arg load1 "$load1" \
       --arg commit "$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
       --argjson dirty "$(git -C "$repo" status --porcelain -- bpf loader cli core 2>/dev/null | wc -l)" \
       --arg host "$(uname -r)" --arg date "$(date -u +%FT%TZ)" --arg status "${rc:-none}" \
       --arg cmd "sudo bench/borrow.sh${shapers:+ --shapers \"$shapers\"}" '
      { bench: "borrow", date: $date, commit: $commit, uncommitted_files_in_bpf_loader_cli_core: $dirty,
        command: $cmd, host_kernel: $host, host_load_before: $load0, host_load_after: $load1,
        vm: (map(select(.meta)) | last | .meta), vm_status: $status, wall_seconds: $secs,
        method: {
          topology: "netns s: va 10.9.0.1 <-veth-> netns r: vb 10.9.0.2; the shaper on va egress; MTU 1500, GSO/TSO on; one-off iperf3 servers in s send, clients in r receive with -R; tcp_ecn=2 at both ends (no ECN asked for)",
          tree: "parent 20 Mbit; A rate 5 Mbit ceil 20 Mbit (8 TCP flows, one iperf3 -P 8), B rate 15 Mbit ceil 20 Mbit (1 TCP flow); overhead 24 everywhere; A by sending ports 5200-5215, B by 5216-5231 and ICMP",
          counts: "each class, every 10 ms: shaperctl through the pinned maps (class_clock: the bytes it charged and its clock; a packet counted once its departure, the class clock when it was charged, has come), HTB by rtnetlink (tc_class_clock: bytes + 24 x packets as the class dequeues them, GSO packets counted as segments); both are wire bytes + 24 per segment, what the rates are set in",
          shares: "each class over the window: counted bytes per second; error_pct = (measured / due - 1) x 100; the parent is A + B",
          borrow_ms: "from the last counted packet of B to the end of the first 50 ms window (reaching back before it if need be) in which A counted >= 18.5 Mbit/s (90 % of the way from its 5 to its 20)",
          give_back_ms: "from the first counted packet of B when it returns to the end of the first 50 ms window in which A counted <= 6.5 Mbit/s (10 % of the way)",
          stamped_ms: "shaperctl only: from the same instants, the first 10 ms step in which A, its clock ahead of now, was charged at that rate (the decision of the datapath, before the packets of A already stamped at the old rate have left)",
          leads: "shaperctl only: each class clock lead over now (ms; its queue, or for the parent what its children booked on it), and the bytes it was charged since the sample before, at each of its 10 ms samples from 50 ms before the same instants to 250 ms after: per class, [ms from the instant, lead, bytes]",
          tcp: "TCP counters of the sender (netns s) over all cases (mibs in tcp-rows.sh, from /proc/net/snmp and netstat): RetransSegs of OutSegs, and in counters those that tell what caused a retransmission (timeouts, probes, undos)",
          ping: "iputils ping -i 0.05 -c 100 from s to r, classified into B, while A borrows: with the flow of B at 5 of its 15 Mbit (iperf3 -b 5M), and in (d) with both busy; p50/p99 nearest rank",
          goals: "shares within 3 % where HTB is within its own error (else within of HTB); borrow and give back <= 100 ms; the ping in B p99 <= 5 ms"
        },
        rows: map(select(.meta | not)) }' "$tmp/rows.jsonl" >"$out/borrow.json"
  else
    [ -s "$out/borrow.json" ] || { echo "borrow: no $out/borrow.json to report" >&2; exit 2; }
  fi

  # --- the table: a column per shaper, HTB last ---
  jq -r '
    def fix(d): (. * pow(10; d) | round) as $n | ($n / pow(10; d)) as $v
      | ($v | tostring) as $s | if d == 0 then ($n | tostring) elif ($s | test("\\.")) then
        ($s | split(".")) as $p | $p[0] + "." + ($p[1] + "000")[:d] else $s + "." + ("000"[:d]) end;
    def mbit: if . == null then "–" else (. / 1e6 | fix(2)) end;
    def pct: if . == null then "–" else ((if . >= 0 then "+" else "" end) + (. | fix(1)) + " %") end;
    def ms: if . == null then "–" elif . < 0 then "not in 2 s" else "\(. | round) ms" end;
    .rows as $r | ($r | map(select(.shaper_key | test("htb"))) | first) as $h
    | def cell($row; c; k): $row.cases[c][k] as $x
        | if $x == null then "–" else "\($x.bps | mbit) (\($x.error_pct | pct))" end;
      def meets($row; c; k): ($row.cases[c][k].error_pct // null) as $e | ($h.cases[c][k].error_pct // null) as $he
        | if $e == null or ($row.shaper_key | test("htb")) then "" elif ($e | fabs) <= 3 or ($he != null and ($e | fabs) <= ($he | fabs)) then " ✓" else " ✗" end;
      def share(c; k; name; due):
        "| \(name) | \(due) | " + ([$r[] as $row | cell($row; c; k) + meets($row; c; k)] | join(" | ")) + " | within 3 % or HTB'"'"'s error |";
    "| case | due, Mbit/s | " + ([$r[].shaper] | join(" | ")) + " | goal |",
    "|---|---|" + ([$r[] | "---|"] | join("")) + "---|",
    share("a"; "A"; "(a) both busy: A"; "5"),
    share("a"; "B"; "(a) both busy: B"; "15"),
    share("b"; "A"; "(b) B idle: A up to its ceil"; "20"),
    share("c"; "A"; "(c) A alone, ceil 10 Mbit"; "10"),
    share("d"; "A"; "(d) 5/5, A (8 flows)"; "10"),
    share("d"; "B"; "(d) 5/5, B (1 flow)"; "10"),
    share("e"; "A"; "(e) prio: A (prio 1, 8 flows)"; "5"),
    share("e"; "B"; "(e) prio: B (prio 0, 1 flow)"; "15"),
    "| (b) time to borrow: B'"'"'s last packet → A at 18.5 | | " + ([$r[] | (.borrow.ms | ms) + (if .borrow.stamped_ms != null then " (stamped \(.borrow.stamped_ms | ms))" else "" end)] | join(" | ")) + " | ≤ 100 ms |",
    "| (b) time to give back: B'"'"'s first packet → A at 6.5 | | " + ([$r[] | (.give_back.ms | ms) + (if .give_back.stamped_ms != null then " (stamped \(.give_back.stamped_ms | ms))" else "" end)] | join(" | ")) + " | ≤ 100 ms |",
    def ping: if . == null or .p99_ms == null then "–" else "\(.p50_ms) / \(.p99_ms) ms, \(.over_5ms // "?") of \(.n) over 5\(if .lost > 0 then ", \(.lost) lost" else "" end)" end;
    "| ping in B, p50 / p99: B sending 5 of its 15, A borrowing the rest (A due 15) | | " + ([$r[] | .ping_b_within as $p | ($p | ping) + (if $p.a_bps != null then "; A \($p.a_bps | mbit), B \($p.b_bps | mbit)" else "" end)] | join(" | ")) + " | p99 ≤ 5 ms |",
    "| ping in B, p50 / p99: (d), both borrowing | | " + ([$r[] | .ping_b_busy | ping] | join(" | ")) + " | p99 ≤ 5 ms |",
    "| parent (A + B), largest window | 20 | " + ([$r[] | [.cases[] | .parent_bps // empty] | max | mbit] | join(" | ")) + " | ≤ 21 |",
    "| sender'"'"'s TCP retransmits, all cases | | " + ([$r[] | .tcp as $t | if $t == null then "–" else "\($t.retransmits) of \($t.segments_out) (\(($t.retrans_pct // 0) | fix(2)) %)" end] | join(" | ")) + " | |"
  ' "$out/borrow.json" >"$tmp/table.md"
  {
    echo "# Borrowing: shaperctl (--ceil, --prio) against HTB + fq_codel"
    echo
    jq -r '"Run \(.date), commit \(.commit) (+\(.uncommitted_files_in_bpf_loader_cli_core) uncommitted files in bpf/ loader/ cli/ core/), guest kernel \(.vm.kernel // "?") under qemu TCG (2 vCPUs), host load \(.host_load_before) → \(.host_load_after), \(.wall_seconds) s wall. Command: `\(.command)`. TCP ends: \(.vm.ecn // "?") (Debian'"'"'s default: no ECN asked for)."' "$out/borrow.json"
    echo
    cat "$tmp/table.md"
    echo
    echo "Tree: parent 20 Mbit; A rate 5 ceil 20 (8 TCP flows), B rate 15 ceil 20 (1 flow), overhead 24."
    echo "Counts: per class every 10 ms, in wire bytes + 24 per segment; shaperctl's as its packets' departures"
    echo "come (class_clock), HTB's as it dequeues (tc_class_clock). ✓/✗: within 3 %, or within HTB's own error."
    echo "Borrow/give back: to the end of the first 50 ms window past 90 % of the way (the window included);"
    echo "\"stamped\": when shaperctl first charged A at that rate (its decision; packets stamped before still leave"
    echo "at the old one). Per-class rates over each window, per-50 ms series and counters: borrow.json."
  } >"$out/borrow.md"
  echo
  cat "$out/borrow.md"
  echo "json: $out/borrow.json   table: $out/borrow.md (VM status ${rc:-none})"
  [ "${rc:-1}" = 0 ]
  exit $?
fi

# ================================= in the VM =============================================
# busybox sh. s: va 10.9.0.1 <-veth-> r: vb 10.9.0.2, the shaper on va's egress.

. /usr/local/share/shaperctl-vm/lib.sh
. /usr/local/share/shaperctl-vm/judge.sh
. /usr/local/share/shaperctl-vm/borrow.sh   # bw_departed, bw_rate, bw_cross, ...
. /usr/local/share/shaperctl-bench/tcp-rows.sh   # cmd, mibs
SHAPERS=""
for _s in ${1:-$ALL_SHAPERS}; do SHAPERS="$SHAPERS $_s"; done
T_ALL=$(uptime_s)

new_ns s && new_ns r && veth_pair s va 10.9.0.1/24 r vb 10.9.0.2/24 ||
  { echo "borrow: could not build the namespaces" >&2; exit 1; }
# No cached ssthresh or cwnd from one shaper's flows to the next's; ECN left at the default.
nsx s sysctl -qw net.ipv4.tcp_no_metrics_save=1
nsx r sysctl -qw net.ipv4.tcp_no_metrics_save=1
echo "@@BRW $(jq -n -c --arg k "$(uname -r)" --arg cpus "$(nproc)" \
  --arg e "$(nsx s sysctl -n net.ipv4.tcp_ecn) $(nsx r sysctl -n net.ipv4.tcp_ecn)" \
  --arg iperf "$("$IPERF3" --version | head -n1)" --arg tcv "$(tc -V)" \
  '{meta: {kernel: $k, cpus: $cpus, ecn: "tcp_ecn=\($e) in s and r", iperf3: $iperf, tc: $tcv}}')"

A_PORT=5200 B_PORT=5216

# setup SHAPER: the tree on va.
setup() {
  local _aqm=""
  CMDS=""
  case "$1" in
    shaperctl*)
      [ "$1" = shaperctl-codel ] && _aqm="--aqm codel"
      cmd shaperctl -n s attach --dev va &&
        cmd shaperctl -n s add-class --dev va --id 20 --rate 20mbit --overhead 24 &&
        cmd shaperctl -n s add-class --dev va --id 21 --parent 20 --rate 5mbit --ceil 20mbit --overhead 24 $_aqm &&
        cmd shaperctl -n s add-class --dev va --id 22 --parent 20 --rate 15mbit --ceil 20mbit --overhead 24 $_aqm &&
        cmd shaperctl -n s add-rule --dev va --class 21 --pref 21 --proto tcp --sport 5200-5215 &&
        cmd shaperctl -n s add-rule --dev va --class 22 --pref 22 --proto tcp --sport 5216-5231 &&
        cmd shaperctl -n s add-rule --dev va --class 22 --pref 23 --proto icmp ;;
    htb-fqcodel)
      cmd tc -n s qdisc add dev va root handle 1: htb &&
        cmd tc -n s class add dev va parent 1: classid 1:20 htb rate 20mbit ceil 20mbit overhead 24 &&
        cmd tc -n s class add dev va parent 1:20 classid 1:21 htb rate 5mbit ceil 20mbit prio 0 overhead 24 &&
        cmd tc -n s class add dev va parent 1:20 classid 1:22 htb rate 15mbit ceil 20mbit prio 0 overhead 24 &&
        cmd tc -n s qdisc add dev va parent 1:21 fq_codel &&
        cmd tc -n s qdisc add dev va parent 1:22 fq_codel &&
        cmd tc -n s filter add dev va parent 1: protocol ip prio 1 u32 match ip protocol 6 0xff match ip sport 5200 0xfff0 flowid 1:21 &&
        cmd tc -n s filter add dev va parent 1: protocol ip prio 2 u32 match ip protocol 6 0xff match ip sport 5216 0xfff0 flowid 1:22 &&
        cmd tc -n s filter add dev va parent 1: protocol ip prio 3 u32 match ip protocol 1 0xff flowid 1:22 ;;
  esac
}
# conf SHAPER ID RATE CEIL PRIO: one child's rate, ceil and prio (21 is A, 22 is B).
conf() {
  case "$1" in
    shaperctl*) cmd shaperctl -n s change-class --dev va --id "$2" --rate "$3" --ceil "$4" --prio "$5" ;;
    *) cmd tc -n s class change dev va parent 1:20 classid "1:$2" htb rate "$3" ceil "$4" prio "$5" overhead 24 ;;
  esac
}
teardown() {
  case "$1" in
    shaperctl*) shaperctl -n s detach --dev va >/dev/null 2>&1 ;;
    *) tc -n s qdisc del dev va root 2>/dev/null ;;
  esac
  tc -n s qdisc show dev va | grep -q 'qdisc noqueue 0: root' ||
    echo "  ! va not back to noqueue: $(tc -n s qdisc show dev va | head -n2 | tr '\n' ' ')" >&2
}

# samplers SHAPER: each class's samples, live, in /tmp/c-a, /tmp/c-b, /tmp/c-p (class_clock's
# format); SAMPLERS their pids.
samplers() {
  SAMPLERS=""
  case "$1" in
    shaperctl*)
      for _c in "21 a" "22 b" "20 p"; do
        set -- $_c
        class_clock --netns s --dev va --class "$1" --period-ms 10 --seconds 900 >"/tmp/c-$2" 2>"/tmp/c-$2.err" &
        SAMPLERS="$SAMPLERS $!"
      done ;;
    *)
      # HTB's counts in the same form: wire bytes + 24 per segment (its packets count segments).
      tc_class_clock --netns s --dev va --period-ms 10 --seconds 900 1:21 1:22 1:20 2>/tmp/c-tc.err |
        awk '{ print $1, 0, $2 + 24 * $3 >"/tmp/c-a"; print $1, 0, $4 + 24 * $5 >"/tmp/c-b"
               print $1, 0, $6 + 24 * $7 >"/tmp/c-p"; fflush("") }' &
      SAMPLERS="$!" ;;
  esac
  sleep 0.3
}

# leads_json SHAPER AT_NS: shaperctl's clock leads and charges around AT_NS (method.leads), as
# {"a": [[ms, lead ms, bytes], ...], "b": ..., "parent": ...}; null for HTB.
leads_json() {
  case "$1" in shaperctl*) ;; *) echo null; return ;; esac
  for _c in a:a b:b p:parent; do
    awk -v a="$2" -v k="${_c#*:}" '
      $1 >= a - 50e6 && $1 <= a + 250e6 {
        printf "%s[%.1f,%.1f,%d]", (n++ ? "," : "\"" k "\": ["), ($1 - a) / 1e6, ($2 - $1) / 1e6, $3 - c }
      { c = $3 }
      END { print (n ? "]" : "\"" k "\": null") }' "/tmp/c-${_c%%:*}"
  done | paste -sd, | sed 's/^/{/; s/$/}/'
}

CLIENTS=""
# flow NAME PORT ARGS...: a one-off server on PORT in s and its client in r (-R), in the
# background; FLOW_PID the client's.
flow() {
  local _n=$1 _p=$2
  shift 2
  nsx s "$IPERF3" -s -1 -p "$_p" >"/tmp/srv-$_p.log" 2>&1 &
  wait_listen s "$_p" || echo "  ! iperf3 server on $_p did not listen" >&2
  nsx r "$IPERF3" -c 10.9.0.1 -p "$_p" -R -J -t 900 "$@" >"/tmp/$_n.json" 2>"/tmp/$_n.err" &
  FLOW_PID=$! CLIENTS="$CLIENTS $!"
}
stop_flow() {  # PORT PID
  kill -INT $(ps -o pid,args | awk -v p="iperf3 -c 10.9.0.1 -p $1 " 'index($0, p) && $2 !~ /awk/ { print $1 }') 2>/dev/null
  wait "$2" 2>/dev/null
}
# window SECONDS: WF and WT, the latest sample's time before and after.
window() { WF=$(bw_last /tmp/c-a); sleep "$1"; WT=$(bw_last /tmp/c-a); }
# ping_start NAME: a ping into B every 50 ms, 5 s, in the background (PING_PID).
ping_start() { nsx s "$PING" -n -i 0.05 -c 100 -W 2 10.9.0.2 >"/tmp/$1.ping" 2>&1 & PING_PID=$!; }
ping_json() {
  grep -o 'time=[0-9.]*' "$1" | cut -d= -f2 | sort -n | awk -v sent=100 '
    { v[NR] = $1 }
    function q(p,  i) { i = int(p * NR); if (i < p * NR) i++; if (i < 1) i = 1; return v[i] }
    END { if (NR == 0) { printf "{\"p50_ms\": null, \"p99_ms\": null, \"n\": 0, \"lost\": %d}", sent; exit }
          for (i = 1; i <= NR; i++) { over += v[i] > 5; all = all (i > 1 ? "," : "") v[i] }
          printf "{\"p50_ms\": %s, \"p99_ms\": %s, \"max_ms\": %s, \"n\": %d, \"lost\": %d, \"over_5ms\": %d, \"rtts_ms\": [%s]}", q(0.5), q(0.99), v[NR], NR, sent - NR, over, all }'
}

# share FILE FROM TO DUE: {"bps", "due_bps", "error_pct", "per_half_s_mbps"} of one class.
share() {
  local _r
  _r=$(bw_rate "$1" "$2" "$3")
  echo "{\"bps\": $_r, \"due_bps\": $4, \"error_pct\": $(calc "($_r / $4 - 1) * 100"), \"per_half_s_mbps\": [$(bw_series "$1" "$2" 500 8 | tr ' ' ',' | sed 's/-/null/g')]}"
}
# case_json FROM TO DUE_A [DUE_B]: the window's shares, and the parent as A + B.
case_json() {
  local _b=null _p
  _p=$(calc "$(bw_rate /tmp/d-a "$1" "$2") + $(bw_rate /tmp/d-b "$1" "$2")")
  [ -z "${4:-}" ] || _b=$(share /tmp/d-b "$1" "$2" "$4")
  echo "{\"A\": $(share /tmp/d-a "$1" "$2" "$3"), \"B\": $_b, \"parent_bps\": $_p, \"seconds\": $(calc "($2 - $1) / 1e9")}"
}

# measure SHAPER: one shaper through every case; prints its row.
measure() {
  local _sh=$1 _label _pa _pb _k _r _tb _tr _x _y _ok=1 _w
  case "$_sh" in
    shaperctl) _label="shaperctl" ;; shaperctl-codel) _label="shaperctl + CoDel leaves" ;;
    htb-fqcodel) _label="HTB + fq_codel" ;;
  esac
  echo "== $_label"
  setup "$_sh" || { echo "@@BRW {\"shaper\": \"$_label\", \"shaper_key\": \"$_sh\", \"failed\": \"setup\"}"; teardown "$_sh"; return; }
  samplers "$_sh"
  local _m0 _m1
  _m0=$(mibs s)
  CLIENTS=""
  A_PORT=$((A_PORT + 1))
  flow a "$A_PORT" -P 8
  _pa=$FLOW_PID
  bw_wait_counting /tmp/c-a || echo "  ! A never counted: $(head -c 300 /tmp/a.err)" >&2
  B_PORT=$((B_PORT + 1))
  flow b1 "$B_PORT"
  _pb=$FLOW_PID
  bw_wait_counting /tmp/c-b || echo "  ! B never counted: $(head -c 300 /tmp/b1.err)" >&2
  sleep 2
  window 4; W_A="$WF $WT"
  # (b)
  _k=$(bw_last /tmp/c-b)
  stop_flow "$B_PORT" "$_pb"
  bw_wait_quiet /tmp/c-b || echo "  ! B still counting 5 s after its receiver stopped" >&2
  sleep 0.5
  window 3; W_B="$WF $WT"
  _r=$(bw_last /tmp/c-b)
  B_PORT=$((B_PORT + 1))
  flow b2 "$B_PORT"
  _pb=$FLOW_PID
  bw_wait_counting /tmp/c-b || echo "  ! B never counted again" >&2
  sleep 1
  # (c)
  stop_flow "$B_PORT" "$_pb"
  bw_wait_quiet /tmp/c-b || echo "  ! B still counting 5 s after its receiver stopped" >&2
  conf "$_sh" 21 5mbit 10mbit 0
  sleep 1
  window 3; W_C="$WF $WT"
  # (d), with the ping in B
  conf "$_sh" 21 5mbit 20mbit 0 && conf "$_sh" 22 5mbit 20mbit 0
  B_PORT=$((B_PORT + 1))
  flow b3 "$B_PORT"
  _pb=$FLOW_PID
  bw_wait_counting /tmp/c-b || echo "  ! B never counted again" >&2
  sleep 1.5
  ping_start d-ping
  window 5; W_D="$WF $WT"
  wait "$PING_PID" 2>/dev/null
  # (e) The flows start again after the prio changes: HTB keeps a class that stays backlogged
  # in the feed of the prio it had (a change takes effect once it has gone idle).
  stop_flow "$B_PORT" "$_pb"
  stop_flow "$A_PORT" "$_pa"
  bw_wait_quiet /tmp/c-a
  conf "$_sh" 21 5mbit 20mbit 1
  A_PORT=$((A_PORT + 1))
  flow a2 "$A_PORT" -P 8
  _pa=$FLOW_PID
  B_PORT=$((B_PORT + 1))
  flow b4 "$B_PORT"
  _pb=$FLOW_PID
  bw_wait_counting /tmp/c-a && bw_wait_counting /tmp/c-b || echo "  ! A or B never counted again" >&2
  sleep 2
  window 4; W_E="$WF $WT"
  # B's flow within its guarantee, A borrowing the rest, the ping in B
  stop_flow "$B_PORT" "$_pb"
  conf "$_sh" 21 5mbit 20mbit 0 && conf "$_sh" 22 15mbit 20mbit 0
  B_PORT=$((B_PORT + 1))
  flow b5 "$B_PORT" -b 5M
  _pb=$FLOW_PID
  bw_wait_counting /tmp/c-b || echo "  ! B never counted again" >&2
  sleep 1.5
  ping_start f-ping
  window 5; W_F="$WF $WT"
  wait "$PING_PID" 2>/dev/null
  local _counters=null
  case "$_sh" in
    shaperctl*) _counters=$(status_json s va | jq -c '[.classes[] | {id, packets, bytes, drops_fair, drops_aqm, drops_horizon, ecn_marks, sparse, borrowed_bytes, ceil_held}]') ;;
    *) _counters=$(tc -n s -s -j qdisc show dev va | jq -c 'map(del(.options, .refcnt))') ;;
  esac
  stop_flow "$B_PORT" "$_pb"
  stop_flow "$A_PORT" "$_pa"
  _m1=$(mibs s)
  # shellcheck disable=SC2086
  kill $SAMPLERS 2>/dev/null
  wait $SAMPLERS 2>/dev/null
  teardown "$_sh"

  # The counts as departures: shaperctl's from its clocks, HTB's are already.
  for _c in a b; do
    case "$_sh" in shaperctl*) bw_departed "/tmp/c-$_c" >"/tmp/d-$_c" ;; *) cp "/tmp/c-$_c" "/tmp/d-$_c" ;; esac
  done
  # shellcheck disable=SC2086
  set -- $W_B
  _tb=$(bw_stop /tmp/d-b "$_k" "$2")
  _tr=$(bw_start /tmp/d-b "$_r")
  local _borrow=null _back=null _st
  if [ -n "$_tb" ]; then
    _x=$(bw_cross /tmp/d-a "$_tb" "$((_tb + 2000000000))" 18.5e6 up 50)
    _st=null
    case "$_sh" in shaperctl*) _st=$(bw_stamped /tmp/c-a "$_tb" "$((_tb + 2000000000))" 18.5e6 up) ;; esac
    _borrow="{\"ms\": ${_x% *}, \"longest_sample_gap_ms\": ${_x#* }, \"stamped_ms\": $_st, \"a_per_50ms_mbps\": [$(bw_series /tmp/d-a "$_tb" 50 12 | tr ' ' ',' | sed 's/-/null/g')], \"leads\": $(leads_json "$_sh" "$_tb")}"
  fi
  if [ -n "$_tr" ]; then
    _x=$(bw_cross /tmp/d-a "$_tr" "$((_tr + 2000000000))" 6.5e6 down 50)
    _st=null
    case "$_sh" in shaperctl*) _st=$(bw_stamped /tmp/c-a "$_tr" "$((_tr + 2000000000))" 6.5e6 down) ;; esac
    _back="{\"ms\": ${_x% *}, \"longest_sample_gap_ms\": ${_x#* }, \"stamped_ms\": $_st, \"a_per_50ms_mbps\": [$(bw_series /tmp/d-a "$_tr" 50 12 | tr ' ' ',' | sed 's/-/null/g')], \"b_per_50ms_mbps\": [$(bw_series /tmp/d-b "$_tr" 50 12 | tr ' ' ',' | sed 's/-/null/g')], \"leads\": $(leads_json "$_sh" "$_tr")}"
  fi
  # shellcheck disable=SC2086
  set -- $W_F
  _w=$(case_json "$1" "$2" 20e6 5e6)
  jq -n -c --arg sh "$_label" --arg key "$_sh" --arg cmds "$CMDS" \
    --argjson a "$(case_json $W_A 5e6 15e6)" --argjson b "$(case_json $W_B 20e6)" \
    --argjson c "$(case_json $W_C 10e6)" --argjson d "$(case_json $W_D 10e6 10e6)" \
    --argjson e "$(case_json $W_E 5e6 15e6)" --argjson f "$_w" \
    --argjson borrow "$_borrow" --argjson back "$_back" \
    --argjson pd "$(ping_json /tmp/d-ping.ping)" --argjson pf "$(ping_json /tmp/f-ping.ping)" \
    --argjson counters "$_counters" --argjson m0 "$_m0" --argjson m1 "$_m1" '
    { shaper: $sh, shaper_key: $key, cases: {a: $a, b: $b, c: $c, d: $d, e: $e},
      borrow: $borrow, give_back: $back,
      ping_b_within: ($pf + {a_bps: $f.A.bps, b_bps: $f.B.bps}), ping_b_busy: $pd,
      counters: $counters,
      tcp: ($m1 | with_entries(.value -= ($m0[.key] // 0))
            | {segments_out: .TcpOutSegs, retransmits: .TcpRetransSegs,
               retrans_pct: (if .TcpOutSegs > 0 then .TcpRetransSegs * 100 / .TcpOutSegs else null end),
               counters: .}),
      commands: ($cmds | split("\n") | map(select(length > 0))) }' >/tmp/row.json ||
    echo "  ! could not build the row" >&2
  echo "@@BRW $(cat /tmp/row.json)"
  jq -r '"  \(.shaper): (a) A \(.cases.a.A.bps / 1e4 | round / 100) B \(.cases.a.B.bps / 1e4 | round / 100); (b) A \(.cases.b.A.bps / 1e4 | round / 100), borrow \(.borrow.ms) ms, back \(.give_back.ms) ms; (c) A \(.cases.c.A.bps / 1e4 | round / 100); (d) A \(.cases.d.A.bps / 1e4 | round / 100) B \(.cases.d.B.bps / 1e4 | round / 100); (e) A \(.cases.e.A.bps / 1e4 | round / 100) B \(.cases.e.B.bps / 1e4 | round / 100); ping p99 \(.ping_b_within.p99_ms) / \(.ping_b_busy.p99_ms) ms"' /tmp/row.json 2>/dev/null
}

for _s in $SHAPERS; do measure "$_s"; done
echo "== done in $(elapsed_since "$T_ALL" | cut -d. -f1) s (in the VM)"
exit 0
