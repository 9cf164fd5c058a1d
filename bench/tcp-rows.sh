# Helpers for the benches that judge a limit by what TCP flows get through it (accuracy.sh:
# cmd; ingress.sh, cni.sh, forwarded.sh; borrow.sh: cmd, mibs). Sourced in the stock-kernel VM
# after vm/lib.sh; busybox sh.

CMDS="" FAILED=""
# cmd ARGS...: runs one configuration command and keeps its text for the JSON (CMDS); a failure
# is noted in FAILED with the start of its output.
cmd() {
  CMDS="$CMDS$*
"
  if ! "$@" >/tmp/cmd.out 2>&1; then
    FAILED="${FAILED}command failed: $* ($(head -c 200 /tmp/cmd.out | tr '\n' ' ')); "
    echo "  ! $* failed: $(head -c 200 /tmp/cmd.out)" >&2
    return 1
  fi
}

# mibs NS: the TCP and IP counters these benches read in namespace NS ("" for the current one),
# as a JSON object named as by nstat (TcpRetransSegs, TcpExtTCPDeliveredCE, IpExtInCEPkts, ...):
# those the rows report, and what tells a retransmission's cause (timeouts, probes, undos).
mibs() {
  if [ -n "$1" ]; then nsx "$1" cat /proc/net/snmp /proc/net/netstat; else cat /proc/net/snmp /proc/net/netstat; fi |
    awk '
    { p = substr($1, 1, length($1) - 1)
      if (!(p in seen)) { seen[p] = 1; for (i = 2; i <= NF; i++) name[p, i] = $i; next }
      for (i = 2; i <= NF; i++) {
        k = p name[p, i]
        if (k ~ /^(TcpRetransSegs|TcpOutSegs|TcpExtTCPDeliveredCE|IpExtInCEPkts|IpExtInECT0Pkts|IpExtInNoECTPkts|TcpExtTCPTimeouts|TcpExtTCPLossProbes)$/ ||
            k ~ /^TcpExtTCP(SpuriousRtxHostQueues|SpuriousRTOs|LossProbeRecovery|LostRetransmit|RetransFail|SlowStartRetrans|FastRetrans|LossUndo|FullUndo|PartialUndo|DSACKRecv|DSACKUndo|LossFailures)$/)
          out = out sprintf("%s\"%s\": %s", (out == "" ? "" : ", "), k, $i)
      } }
    END { print "{" out "}" }'
}

# tcp_row IPERF_JSON MBIT SKIP SENDER_BEFORE SENDER_AFTER RECEIVER_BEFORE RECEIVER_AFTER: the
# measured half of a row as JSON. IPERF_JSON is the receiver's iperf3 -J -i 0.1 output (client
# with -R on the receiver), the four others are mibs objects. Goodput: the receiver's bytes from
# SKIP s to the last full interval, mean, against MBIT x 1448/1514; retransmits: the sender's
# RetransSegs of its OutSegs; largest 1 s: 1 s windows of 0.1 s samples starting at SKIP or later;
# the samples themselves, the sum's (interval_mbps) and each flow's (stream_mbps, one array per
# sample), to see which flow stalled or burst.
tcp_row() {
  jq -c -n --argjson mbit "$2" --argjson skip "$3" --argjson s0 "$4" --argjson s1 "$5" \
    --argjson r0 "$6" --argjson r1 "$7" --slurpfile ip "$1" '
    ($ip[0] // {}) as $j | ($mbit * 1e6) as $rate | ($rate * 1448 / 1514) as $exp
    | ($s1 | with_entries(.value -= ($s0[.key] // 0))) as $sd
    | ($r1 | with_entries(.value -= ($r0[.key] // 0))) as $rd
    | [$j.intervals[:-1][]?.sum] as $iv
    | [$iv[] | select(.start >= $skip - 0.001)] as $w
    | (if ($w | length) == 0 then null else ($w | map(.bytes) | add) * 8 / ($w | map(.seconds) | add) end) as $good
    | ([range(0; ($iv | length) - 9) | select($iv[.].start >= $skip - 0.001) | $iv[. : . + 10]
        | (map(.bytes) | add) * 8 / (.[-1].end - .[0].start)] | max) as $max1
    | { expected_bps: $exp, goodput_bps: $good,
        error_pct: (if $good == null then null else ($good / $exp - 1) * 100 end),
        retransmits: $sd.TcpRetransSegs, segments_out: $sd.TcpOutSegs,
        retrans_pct: (if ($sd.TcpOutSegs // 0) > 0 then $sd.TcpRetransSegs * 100 / $sd.TcpOutSegs else null end),
        iperf3_retransmits: ($j.end.sum_sent.retransmits // null),
        max_1s_bps: $max1, max_1s_ratio: (if $max1 == null then null else $max1 / $rate end),
        ce_receiver: $rd.IpExtInCEPkts, delivered_ce_sender: $sd.TcpExtTCPDeliveredCE,
        ect0_receiver: $rd.IpExtInECT0Pkts, not_ect_receiver: $rd.IpExtInNoECTPkts,
        rto_sender: $sd.TcpExtTCPTimeouts, tlp_sender: $sd.TcpExtTCPLossProbes,
        interval_mbps: [$iv[] | .bits_per_second / 1e4 | round / 100],
        stream_mbps: [$j.intervals[:-1][]?.streams | map(.bits_per_second / 1e4 | round / 100)] }'
}

# ping_summary FILE SENT: {"p50_ms", "p99_ms", "max_ms", "n", "lost"}, nearest rank.
ping_summary() {
  grep -o 'time=[0-9.]*' "$1" | cut -d= -f2 | jq -s -c --argjson sent "$2" 'sort as $v | length as $n
    | def rank(p): if $n == 0 then null else $v[([((p * $n) | ceil), 1] | max) - 1] end;
    {p50_ms: rank(0.5), p99_ms: rank(0.99), max_ms: $v[-1], n: $n, lost: ($sent - $n)}'
}
