#!/usr/bin/env bash
# bench/run.sh — datapath cost per packet, HTB comparison, control-plane scale, in one
# run. Prints a table; writes bench/results/latest.json (and latest.png with gnuplot).
# Needs root. Method and numbers: bench/README.md.
#
#   bench/run.sh [--quick] [--no-build] [--packets N] [--rounds R] [--classes N] [--cpu C]
#   bench/run.sh --report bench/results/latest.json     # prints the table of a saved run
#
# Environment: BUILD_DIR (default build/), RESULTS_DIR (default bench/results/), BENCH_COMMIT
# (the label of the code measured; default: git HEAD).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build}
RESULTS=${RESULTS_DIR:-$ROOT/bench/results}
PACKETS=1000000   # UDP packets per blast
ROUNDS=3          # blasts per scenario, interleaved; median
CLASSES=100000    # control plane and datapath (d)
MAX_CLASSES=131072
REPEAT=1000000    # BPF_PROG_TEST_RUN repeat
RUNS=7            # test_run calls per datapath row; median
STATUS_RUNS=5     # timed `shaperctl status` runs; median
CPU=$(($(nproc) - 1))
BUILD_FIRST=1
REPORT=""

while [ $# -gt 0 ]; do
  case "$1" in
    --quick) PACKETS=200000; ROUNDS=1; RUNS=3; STATUS_RUNS=2 ;;
    --no-build) BUILD_FIRST=0 ;;
    --packets) PACKETS=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --classes) CLASSES=$2; shift ;;
    --cpu) CPU=$2; shift ;;
    --report) REPORT=$2; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | grep '^#' | cut -c3-; exit 0 ;;
    *) echo "bench/run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

# The table, from a results JSON (also: bench/run.sh --report FILE).
print_table() {
  jq -r '
  def fixed($n): if . == null then "n/a" else
    (pow(10; $n)) as $m | (. * $m | round) as $x | ($x | fabs) as $a |
    (if $x < 0 then "-" else "" end) + (($a / $m | floor) | tostring) +
    (if $n > 0 then "." + (($a % $m) | tostring | (("0" * ($n - length)) + .)) else "" end) end;
  def f3: fixed(3);
  def f1: fixed(1);
  def pad($n): tostring | if length < $n then . + (" " * ($n - length)) else . end;
  def lpad($n): tostring | if length < $n then (" " * ($n - length)) + . else . end;
  . as $r | $r.datapath as $d |
  "shaperctl bench — \($r.date), commit \($r.commit)\(if $r.uncommitted_product_files > 0 then " + \($r.uncommitted_product_files) uncommitted product files" else "" end)",
  "host: \($r.host.cpu), \($r.host.cpus) CPUs, kernel \($r.host.kernel), load \($r.host.loadavg_before) -> \($r.host.loadavg_after)",
  "",
  "1. Datapath, BPF_PROG_TEST_RUN (repeat \($d.env.repeat), median of \($d.env.runs) runs), \($d.env.frame_bytes)-byte UDP frame",
  "   \("row" | pad(58)) \("ns/pkt" | lpad(8))  \("x floor" | lpad(7))",
  ($d.rows[] | "   \(.label | pad(58)) \(.ns_per_packet | f1 | lpad(8))  \(if .ns_per_packet then (.ns_per_packet / $d.goal.floor_ns | fixed(2)) else "" end | lpad(7))\(if .ns_per_packet == null then "  " + .note elif .key == "many_classes_cold" then "  (est.; cold penalty \($d.cold.penalty_ns | f1) ns)" else "" end)"),
  "",
  "2. veth UDP blast, \($r.veth.packets_per_blast) x 64-byte payload to 1000 destinations, \($r.veth.rounds) round(s), median",
  "   \("scenario" | pad(58)) \("CPU s/Mpkt" | lpad(10)) \("+ vs none" | lpad(10)) \("Mpps" | lpad(6))  delivered/sent, shaper drops",
  ([["none", "no shaping (noqueue)"], ["htb1", "HTB, 1 class, no filter"], ["htb1000", "HTB, 1000 classes, u32 hashing filters (by dst IP)"],
    ["tc_empty", "tc clsact egress + empty BPF program (the hook alone)"],
    ["shaperctl", "shaperctl police, 1 default class, no rule"],
    ["shaperctl_rules", "shaperctl police, 1000 classes + 1000 dst /32 rules"]][] as [$k, $name] |
    $r.veth.scenarios[$k] as $s |
    "   \($name | pad(58)) \($s.cpu_s_per_mpkt | f3 | lpad(10)) \($r.veth.added_over_no_shaping_s_per_mpkt[$k] | f3 | lpad(10)) \($s.mpps | f3 | lpad(6))  \($s.delivered_min)/\($s.sent + $s.warmup), \([$s.counted[].drops // "-"] | map(tostring) | unique | join("/"))"),
  "   cross-check, CPU busy ticks of the sender CPU (includes other processes): " +
    ([["none", "htb1", "htb1000", "tc_empty", "shaperctl", "shaperctl_rules"][] as $k | "\($k) \($r.veth.scenarios[$k].cpu_busy_s_per_mpkt | f3)"] | join(", ")),
  "",
  "3. Control plane, \($r.control.add_classes.classes) classes (max_classes \($r.control.memory.max_classes)); wall s, and CPU s of the thread where measured",
  ($r.control.add_classes) as $a | ($r.control.status_breakdown) as $sb | ($r.control.cpu_s) as $cpu |
  def line($what; $wall; $c): "   \($what | pad(58)) \($wall | f3 | lpad(8)) s\(if $c == null then "" else "  (CPU \($c | f3))" end)";
  line("write_class_config loop (1 syscall/class)"; $a.write_class_config_loop_s; $cpu.write_class_config_loop_s),
  line("BPF_MAP_UPDATE_BATCH, clocks + configs"; $a.update_batch_clock_and_config_s; $cpu.update_batch_clock_and_config_s),
  line("Shaper::add_class (what add-class does), first \($a.shaper_add_class_first), each"; $a.shaper_add_class_first_s_each; null),
  line("  the other \($a.classes - $a.shaper_add_class_first) in one change (what apply -f does)"; $a.shaper_bulk_add_s; $cpu.shaper_bulk_add_s),
  line("Shaper::add_class at \($a.classes) classes, each"; $a.shaper_add_class_s_each_at_n; null),
  line("Shaper::add_class with a parent, at \($a.classes) classes, each"; $a.add_class_with_parent_s_each_at_n; null) +
    "  (100k classes with parents: ~\($a.add_n_with_parents_estimate_s / 3600 | f1) h)",
  line("Shaper::del_class at \($a.classes) classes, each"; $a.del_class_s_each_at_n; null),
  (if $r.control.rules.rules then
    line("\($r.control.rules.rules) rules: write_rule x N + publish_rules once"; $r.control.rules.publish_s; $cpu.publish_rules_s),
    (line("add_rule (what add-rule does) with \($r.control.rules.rules) rules present"; $r.control.rules.add_rule_at_n_s; $cpu.add_rule_at_n_s) +
      "  (\($r.control.rules.rules) one by one: ~\($r.control.rules.add_n_rules_one_by_one_estimate_s | f1) s)")
   else empty end),
  "   \("shaperctl add-class at \($r.control.add_classes.classes) classes, one process, each" | pad(58)) \($r.control.cli.add_class_process_ms | f1 | lpad(8)) ms",
  line("shaperctl apply -f, \($r.control.cli.apply.rules) rules too, from scratch (median)"; $r.control.cli.apply.from_scratch_s; null),
  line("shaperctl apply -f, the same file again (median)"; $r.control.cli.apply.again_s; null),
  line("shaperctl status --json --sample 0 (the CLI, median)"; $r.control.cli.status_json_sample0_s; $r.control.cli.status_cpu_s) +
    "  \($r.control.cli.status_classes) classes, \($r.control.cli.status_json_bytes / 1e6 | f1) MB, max RSS \($r.control.cli.status_max_rss_kb / 1024 | round) MiB",
  "   in-process, the same work phase by phase:",
  line("  Shaper::status"; $sb.library_status_s; $cpu.library_status_s),
  line("    class_ids(): batch read of the config array"; $sb.class_ids_s; $cpu.class_ids_s),
  line("    counters(id) x N (status does this twice)"; $sb.counters_loop_s; $cpu.counters_loop_s),
  line("    class_config(id) x N"; $sb.class_config_loop_s; $cpu.class_config_loop_s),
  line("    clock(id) x N"; $sb.clock_loop_s; $cpu.clock_loop_s),
  line("  status_json() (builds the JSON DOM)"; $sb.status_json_s; $cpu.status_json_s),
  line("  dump(2)"; $sb.dump_s; $cpu.dump_s),
  line("  freeing the DOM"; $sb.json_free_s; $cpu.json_free_s),
  "   alternatives:",
  line("  3 arrays by BPF_MAP_LOOKUP_BATCH (replaces 4 x N lookups)"; $sb.batch_read_total_s; $cpu.batch_read_total_s),
  line("  status_json_text(), what the CLI prints (\(if $sb.status_json_text_identical then "same bytes" else "DIFFERENT bytes" end))"; $sb.status_json_text_s; $cpu.status_json_text_s),
  "   \("map memory per class slot (\($r.control.memory.possible_cpus) possible CPUs)" | pad(58)) \($r.control.memory.bytes_per_class_slot | f1 | lpad(8)) B   (\($r.control.memory.bytes_per_class_formula))",
  "   \("  the same on a 64-CPU host (per-CPU stats grow)" | pad(58)) \($r.control.memory.bytes_per_class_slot_at_64_cpus | f1 | lpad(8)) B   (100k classes: \($r.control.memory.bytes_per_class_slot_at_64_cpus * 100000 / 1048576 | f1) MiB)",
  "   \("total at max_classes \($r.control.memory.max_classes): per-class maps + fixed" | pad(58)) \($r.control.memory.total_bytes / 1048576 | f1 | lpad(8)) MiB (\($r.control.memory.per_class_maps_bytes / 1048576 | f1) + \($r.control.memory.fixed_bytes / 1048576 | f1))",
  "",
  "Goals",
  ($r.goals[] | "   \(.name | pad(58)) \(.measured | tostring | lpad(8)) \(.unit | pad(3)) goal \(.goal | f1 | lpad(5)) \(.unit | pad(3)) ratio \(.ratio | tostring | lpad(6))  \(if .met then "MET" else "NOT MET" end)   \(.detail)"),
  "",
  "cleanup: pins \($r.cleanup.pins); namespaces left: \($r.cleanup.namespaces_left); bench took \($r.bench_seconds) s"
' "$1"
}

if [ -n "$REPORT" ]; then
  print_table "$REPORT"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "bench/run.sh: run as root (BPF programs, network namespaces, qdiscs)" >&2
  exit 1
fi
for tool in ip tc jq cmake make clang; do
  command -v "$tool" >/dev/null || { echo "bench/run.sh: $tool is missing (scripts/install-deps.sh)" >&2; exit 1; }
done

log() { printf '[bench] %s\n' "$*" >&2; }
START=$(date +%s)
TMP=$(mktemp -d /tmp/shaperctl-bench.XXXXXX)
SRC_NS=shbench-$$-src
DST_NS=shbench-$$-dst
SHAPERCTL=$BUILD/cli/shaperctl
INODES=()

# --- cleanup: our pins and records, then our namespaces (their veths and qdiscs go with them).
# Pins are removed while our namespaces still exist: a namespace inode is reused once freed, and
# the directory of a new namespace with our old inode would not be ours.
PINS_STATE="not checked"
cleanup() {
  set +e
  if [ -e "/run/netns/$SRC_NS" ] && [ -x "$SHAPERCTL" ]; then
    "$SHAPERCTL" -n "$SRC_NS" detach --dev vA >/dev/null 2>&1
  fi
  local left=""
  for inode in "${INODES[@]}"; do
    for dir in "/sys/fs/bpf/shaperctl/ns$inode" "/run/shaperctl/ns$inode"; do
      [ -e "$dir" ] && left+="$dir " && rm -rf "$dir"
    done
  done
  PINS_STATE=${left:+"removed by the bench after detach: $left"}
  PINS_STATE=${PINS_STATE:-"none left by detach"}
  for ns in "$SRC_NS" "$DST_NS"; do
    [ -e "/run/netns/$ns" ] && ip netns del "$ns"
  done
  rmdir /sys/fs/bpf/shaperctl /run/shaperctl 2>/dev/null
  set -e
}
trap 'cleanup; rm -rf "$TMP"' EXIT
trap 'exit 130' INT TERM

# --- build ---
if [ "$BUILD_FIRST" = 1 ]; then
  log "building (cmake + make bench) in $BUILD"
  [ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$ROOT" -B "$BUILD" >/dev/null
  cmake "$BUILD" >/dev/null  # picks up bench/ if the cache predates it
  make -C "$BUILD" -j"$(nproc)" --no-print-directory bench 2>&1 | grep -E 'error|warning:' >&2 || true
fi
for bin in "$SHAPERCTL" "$BUILD/bench/datapath_bench" "$BUILD/bench/control_bench" "$BUILD/bench/udp_blast"; do
  [ -x "$bin" ] || { echo "bench/run.sh: $bin not built (make -C $BUILD bench)" >&2; exit 1; }
done

LOAD_BEFORE=$(cut -d' ' -f1 /proc/loadavg)
if awk -v l="$LOAD_BEFORE" 'BEGIN { exit !(l > 1.0) }'; then
  log "warning: load average $LOAD_BEFORE: other work on this host will disturb the numbers"
fi

# --- 1. datapath ---
log "1/3 datapath: BPF_PROG_TEST_RUN, repeat $REPEAT x $RUNS runs per row (pinned to CPU $CPU)"
"$BUILD/bench/datapath_bench" --repeat "$REPEAT" --runs "$RUNS" --classes "$CLASSES" \
  --max-classes "$MAX_CLASSES" --cpu "$CPU" --json "$TMP/datapath.json"

# --- 2. HTB vs shaperctl on a veth ---
log "2/3 veth: $PACKETS UDP packets per blast to 1000 destinations, $ROUNDS round(s) per scenario"
ip netns add "$SRC_NS"
ip netns add "$DST_NS"
for ns in "$SRC_NS" "$DST_NS"; do
  INODES+=("$(stat -L -c %i "/run/netns/$ns")")
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
  ip -n "$ns" link set lo up
done
ip link add vA netns "$SRC_NS" type veth peer name vB netns "$DST_NS"
ip -n "$SRC_NS" addr add 10.200.0.1/24 dev vA
ip -n "$DST_NS" addr add 10.200.0.2/24 dev vB
ip -n "$SRC_NS" link set vA up
ip -n "$DST_NS" link set vB up
# No ARP during the blast; 10.201.0.0/16 (the 1000 destinations) via the peer, which has no
# route for it and forwarding off: it drops them quietly (no ICMP), the same in every scenario.
ip -n "$SRC_NS" neigh replace 10.200.0.2 lladdr "$(ip -n "$DST_NS" -j link show vB | jq -r '.[0].address')" \
  dev vA nud permanent
ip -n "$SRC_NS" route add 10.201.0.0/16 via 10.200.0.2 dev vA

# HTB: 1000 leaf classes under one parent, u32 hashing filters on the destination's last byte
# (256 buckets, 4 addresses each), one /32 match per destination. Rates far above the blast's
# (nothing is throttled or dropped: the cost measured is classification and accounting).
htb_batch() {
  local classes=$1
  echo "qdisc add dev vA root handle 1: htb default $([ "$classes" = 1 ] && echo 10 || echo fffe)"
  echo "class add dev vA parent 1: classid 1:1 htb rate 10gbit ceil 10gbit burst 200k cburst 200k quantum 60000"
  for ((i = 0; i < classes; i++)); do
    printf 'class add dev vA parent 1:1 classid 1:%x htb rate 10mbit ceil 10gbit burst 15k cburst 15k quantum 1514\n' $((i + 16))
  done
  [ "$classes" = 1 ] && return
  echo "filter add dev vA parent 1: prio 1 handle 2: protocol ip u32 divisor 256"
  echo "filter add dev vA parent 1: prio 1 protocol ip u32 ht 800:: match ip dst 10.201.0.0/16 hashkey mask 0x000000ff at 16 link 2:"
  for ((i = 0; i < classes; i++)); do
    printf 'filter add dev vA parent 1: prio 1 protocol ip u32 ht 2:%x: match ip dst 10.201.%d.%d/32 flowid 1:%x\n' \
      $((i % 250 + 1)) $((i / 250)) $((i % 250 + 1)) $((i + 16))
  done
}
htb_batch 1 >"$TMP/htb1.batch"
htb_batch 1000 >"$TMP/htb1000.batch"

SCENARIOS=(none htb1 htb1000 tc_empty shaperctl shaperctl_rules)
setup() {
  case "$1" in
    none) ;;
    htb1) tc -n "$SRC_NS" -batch "$TMP/htb1.batch" ;;
    htb1000) tc -n "$SRC_NS" -batch "$TMP/htb1000.batch" ;;
    tc_empty)
      # the tc egress hook with bench/bpf/empty.bpf.o: the floor of any clsact program
      tc -n "$SRC_NS" qdisc add dev vA clsact
      tc -n "$SRC_NS" filter add dev vA egress bpf direct-action obj "$BUILD/bench/bpf/empty.bpf.o" sec tc ;;
    shaperctl)
      "$SHAPERCTL" -n "$SRC_NS" attach --dev vA --mode police >/dev/null
      "$SHAPERCTL" -n "$SRC_NS" add-class --dev vA --id 1 --rate 100gbit --burst 1mb
      "$SHAPERCTL" -n "$SRC_NS" set-default --dev vA --class 1 ;;
    shaperctl_rules)
      # 1000 classes and 1000 rules (destination /32 -> class), the HTB u32 setup's twin,
      # configured through the library in one go (control_bench --populate)
      "$SHAPERCTL" -n "$SRC_NS" attach --dev vA --mode police >/dev/null
      "$BUILD/bench/control_bench" --netns "$SRC_NS" --dev vA --populate --classes 1000 --rules 1000 ;;
  esac
}
# Prints what the shaping layer counted: packets passed and dropped.
counted() {
  case "$1" in
    none|tc_empty) echo '{"packets": null, "drops": null}' ;;
    htb*) tc -n "$SRC_NS" -s -j qdisc show dev vA | jq -c '.[] | select(.kind == "htb") |
            {packets, drops, overlimits}' ;;
    shaperctl*) "$SHAPERCTL" -n "$SRC_NS" status --dev vA --json --sample 0 |
            jq -c '{packets: ([.classes[].packets] | add), drops: ([.classes[].drops] | add),
                    unclassified: .unclassified.packets, classes_hit: ([.classes[] | select(.packets > 0)] | length)}' ;;
  esac
}
teardown() {
  case "$1" in
    none) ;;
    htb*) tc -n "$SRC_NS" qdisc del dev vA root ;;
    tc_empty) tc -n "$SRC_NS" qdisc del dev vA clsact ;;
    shaperctl*) "$SHAPERCTL" -n "$SRC_NS" detach --dev vA >/dev/null ;;
  esac
}
rx_packets() { ip -n "$DST_NS" -s -j link show vB | jq '.[0].stats64.rx.packets'; }

: >"$TMP/blasts.jsonl"
for ((round = 1; round <= ROUNDS; round++)); do
  for s in "${SCENARIOS[@]}"; do
    setup "$s"
    rx0=$(rx_packets)
    blast=$(ip netns exec "$SRC_NS" "$BUILD/bench/udp_blast" --count "$PACKETS" --ndst 1000 --size 64 --cpu "$CPU")
    rx1=$(rx_packets)
    jq -c -n --arg s "$s" --argjson r "$round" --argjson b "$blast" --argjson c "$(counted "$s")" \
      --argjson rx $((rx1 - rx0)) '$b + {scenario: $s, round: $r, delivered: $rx, counted: $c}' \
      >>"$TMP/blasts.jsonl"
    teardown "$s"
    log "  round $round $s: $(jq -r --arg s "$s" 'select(.scenario == $s) |
      "\((.rusage_ns + .ksoftirqd_ns) / .sent / 1000 | . * 1000 | round / 1000) s CPU/Mpkt, delivered \(.delivered)"' \
      <(tail -1 "$TMP/blasts.jsonl"))"
  done
done

# --- 3. control plane ---
log "3/3 control plane: $CLASSES classes on an attached veth (police, --max-classes $MAX_CLASSES)"
"$SHAPERCTL" -n "$SRC_NS" attach --dev vA --mode police --max-classes "$MAX_CLASSES" >/dev/null
"$BUILD/bench/control_bench" --netns "$SRC_NS" --dev vA --classes "$CLASSES" --json "$TMP/control.json"
: >"$TMP/status_times"
for ((i = 0; i < STATUS_RUNS; i++)); do
  # wall, user, system seconds and max RSS (KiB) of the real CLI
  /usr/bin/time -f '%e %U %S %M' -o "$TMP/time" \
    "$SHAPERCTL" -n "$SRC_NS" status --dev vA --json --sample 0 >"$TMP/status.json"
  tail -1 "$TMP/time" >>"$TMP/status_times"
done
STATUS_CLASSES=$(jq '.classes | length' "$TMP/status.json")
STATUS_BYTES=$(stat -c %s "$TMP/status.json")
# One add-class process with all the classes present (each is a change of the whole
# configuration: its cost grows with the classes), a few, timed.
t0=$(date +%s%N)
for ((i = 1; i <= 20; i++)); do
  "$SHAPERCTL" -n "$SRC_NS" add-class --dev vA --id $((CLASSES + i)) --rate 10mbit
done
t1=$(date +%s%N)
CLI_ADD_US=$(((t1 - t0) / 20000))
"$SHAPERCTL" -n "$SRC_NS" detach --dev vA >/dev/null

# `apply -f` of a fleet's configuration: $CLASSES classes (1,000 parents, the rest under them)
# and 10,000 rules of four kinds (dst /32, tcp dport, src /24, fwmark). From scratch (attach
# included), then the same file again (nothing to change); STATUS_RUNS of each, median.
APPLY_RULES=10000
"$ROOT/bench/fleet-config.sh" vA "$CLASSES" "$APPLY_RULES" "$MAX_CLASSES" >"$TMP/fleet.json"
: >"$TMP/apply_times"
for ((i = 0; i < STATUS_RUNS; i++)); do
  /usr/bin/time -f '%e' -o "$TMP/time" "$SHAPERCTL" -n "$SRC_NS" apply -f "$TMP/fleet.json" >"$TMP/apply.out"
  scratch=$(tail -1 "$TMP/time")
  /usr/bin/time -f '%e' -o "$TMP/time" "$SHAPERCTL" -n "$SRC_NS" apply -f "$TMP/fleet.json" >"$TMP/apply2.out"
  echo "$scratch $(tail -1 "$TMP/time") $(wc -l <"$TMP/apply.out") $(cat "$TMP/apply2.out" | tr -d '\n')" >>"$TMP/apply_times"
  "$SHAPERCTL" -n "$SRC_NS" detach --dev vA >/dev/null
done
log "  apply -f, $CLASSES classes + $APPLY_RULES rules: $(cut -d' ' -f1-2 "$TMP/apply_times" | tr '\n' ';') (scratch, again)"

# --- cleanup now (the trap would do it on failure), and check that nothing is left ---
cleanup
if [ ! -e /sys/fs/bpf/shaperctl ]; then
  PINS_STATE+="; /sys/fs/bpf/shaperctl absent after"
elif [ -z "$(ls -A /sys/fs/bpf/shaperctl)" ]; then
  PINS_STATE+="; /sys/fs/bpf/shaperctl empty after"
else
  PINS_STATE+="; /sys/fs/bpf/shaperctl holds other users' pins: $(ls /sys/fs/bpf/shaperctl | tr '\n' ' ')"
fi
NS_LEFT=$(ip netns list | grep -c "^shbench-$$-" || true)

# --- results ---
mkdir -p "$RESULTS"
jq -s . "$TMP/blasts.jsonl" >"$TMP/blasts.json"
jq -R -s 'split("\n") | map(select(length > 0) | split(" ") | map(tonumber) |
  {wall_s: .[0], cpu_s: (.[1] + .[2]), max_rss_kb: .[3]})' "$TMP/status_times" >"$TMP/status_times.json"
jq -R -s 'split("\n") | map(select(length > 0) | split(" ") |
  {scratch_s: (.[0] | tonumber), again_s: (.[1] | tonumber), diff_lines: (.[2] | tonumber),
   again_output: (.[3:] | join(" "))})' "$TMP/apply_times" >"$TMP/apply_times.json"
jq -n \
  --slurpfile dp "$TMP/datapath.json" \
  --slurpfile cp "$TMP/control.json" \
  --slurpfile bl "$TMP/blasts.json" \
  --slurpfile st "$TMP/status_times.json" \
  --slurpfile ap "$TMP/apply_times.json" --argjson apply_rules "$APPLY_RULES" \
  --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  --arg commit "${BENCH_COMMIT:-$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)}" \
  --arg dirty "$(git -C "$ROOT" status --porcelain -- bpf loader cli 2>/dev/null | wc -l)" \
  --arg cpu_model "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')" \
  --argjson ncpu "$(nproc)" --arg load "$LOAD_BEFORE" --arg load_after "$(cut -d' ' -f1 /proc/loadavg)" \
  --argjson packets "$PACKETS" --argjson rounds "$ROUNDS" \
  --argjson status_classes "$STATUS_CLASSES" --argjson status_bytes "$STATUS_BYTES" \
  --argjson cli_add_us "$CLI_ADD_US" \
  --arg pins "$PINS_STATE" --argjson ns_left "$NS_LEFT" --argjson seconds $(($(date +%s) - START)) '
  def median: sort | if length == 0 then null
    elif length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  def r3: . * 1000 | round / 1000;
  ($dp[0]) as $d | ($cp[0]) as $c | ($bl[0]) as $b |
  ($b | group_by(.scenario) | map({key: .[0].scenario, value: {
      rounds: length,
      cpu_s_per_mpkt: (map((.rusage_ns + .ksoftirqd_ns) / .sent / 1000) | median | r3),
      cpu_s_per_mpkt_runs: map((.rusage_ns + .ksoftirqd_ns) / .sent / 1000 | r3),
      cpu_busy_s_per_mpkt: (map(.cpu_busy_ns / .sent / 1000) | median | r3),
      mpps: (map(.sent / .wall_ns * 1000) | median | r3),
      delivered_min: (map(.delivered) | min), sent: .[0].sent, warmup: .[0].warmup,
      counted: map(.counted), send_errors: (map(.send_errors) | add)}}) | from_entries) as $v |
  ($st[0] | map(.wall_s) | median) as $status_s |
  ($st[0] | map(.cpu_s) | median) as $status_cpu_s |
  ($ap[0] | map(.scratch_s) | median) as $apply_s | ($ap[0] | map(.again_s) | median) as $apply_again_s |
  {
    date: $date, commit: $commit, uncommitted_product_files: ($dirty | tonumber),
    host: {cpu: $cpu_model, cpus: $ncpu, kernel: $d.env.kernel, loadavg_before: $load,
           loadavg_after: $load_after},
    datapath: $d,
    veth: {
      packets_per_blast: $packets, rounds: $rounds, payload_bytes: 64, destinations: 1000,
      method: "CPU = sender getrusage (utime+stime) + ksoftirqd/<cpu> runtime, per 1e6 packets; everything (qdisc or tc filter, veth, the peer receive softirq) runs on the sender CPU",
      scenarios: $v,
      added_over_no_shaping_s_per_mpkt: ($v | with_entries(.value = ((.value.cpu_s_per_mpkt - $v.none.cpu_s_per_mpkt) | r3)))
    },
    control: ($c + {cli: {
      status_json_sample0_s: ($status_s | r3), status_cpu_s: ($status_cpu_s | r3), status_runs: $st[0],
      status_classes: $status_classes, status_json_bytes: $status_bytes,
      status_max_rss_kb: ($st[0] | map(.max_rss_kb) | max),
      add_class_process_ms: ($cli_add_us / 1000),
      apply: {classes: $status_classes, rules: $apply_rules, from_scratch_s: $apply_s,
              again_s: $apply_again_s, runs: $ap[0]}}}),
    goals: [
      ($d.goal, $d.goal_one_class | {name: (.name | sub(" <= 1.5x"; " vs")), measured: .measured_ns, unit: "ns",
       goal: (.floor_ns * 1.5), ratio: (.ratio | r3), met: (.ratio <= 1.5),
       detail: "goal 1.5 x floor \(.floor_ns) ns; net of the empty program: \(.ratio_net_of_harness | r3) x"}),
      ($d.cold_class | select(.ratio != null) | {name: "datapath: 100k classes + rules, a cold class vs a warm one",
       measured: (.cold_ns | r3), unit: "ns", goal: (.warm_ns * 2), ratio: (.ratio | r3), met: (.ratio <= 2),
       detail: "goal 2 x warm \(.warm_ns) ns; cold penalty \(.penalty_ns | r3) ns (repeat=1, 64 MiB eviction)"}),
      ($d.contention | select(.ratio_two_flows != null) | {name: "datapath: 1 class charged from 2 CPUs (a flow each) vs 1 CPU",
       measured: (.two_flows_ns | r3), unit: "ns", goal: (.one_cpu_ns * 1.3), ratio: (.ratio_two_flows | r3),
       met: (.ratio_two_flows <= 1.3),
       detail: "goal 1.3 x 1 CPU \(.one_cpu_ns) ns; one flow from 2 CPUs: \(.ratio_same_class | r3) x; 2 leaves of one root on 2 CPUs vs 2 unshared classes: \(.ratio_shared_root | r3) x"}),
      {name: "add \($c.add_classes.classes) classes (library, write_class_config loop)",
       measured: ($c.add_classes.write_class_config_loop_s | r3), unit: "s", goal: 1,
       ratio: ($c.add_classes.write_class_config_loop_s | r3), met: ($c.add_classes.write_class_config_loop_s <= 1),
       detail: "batch: \($c.add_classes.update_batch_clock_and_config_s | r3) s; Shaper::add_class at \($c.add_classes.classes): \($c.add_classes.shaper_add_class_s_each_at_n | r3) s each"},
      {name: "shaperctl apply -f, \($status_classes) classes + \($apply_rules) rules, from scratch",
       measured: $apply_s, unit: "s", goal: 1, ratio: $apply_s, met: ($apply_s <= 1),
       detail: "median of \($ap[0] | length) runs, attach included; the same file again: \($apply_again_s) s (\($ap[0][0].again_output))"},
      {name: "shaperctl status --json --sample 0, \($status_classes) classes", measured: ($status_s | r3),
       unit: "s", goal: 1, ratio: ($status_s | r3), met: ($status_s <= 1),
       detail: "median of \($st[0] | length) runs of the CLI; CPU (user+sys) \($status_cpu_s | r3) s"}
    ],
    cleanup: {pins: $pins, namespaces_left: $ns_left},
    bench_seconds: $seconds
  }' >"$RESULTS/latest.json"

# --- the table ---
print_table "$RESULTS/latest.json" | tee "$RESULTS/latest.txt"

# --- plot ---
if command -v gnuplot >/dev/null; then
  jq -r '.datapath.rows[] | select(.ns_per_packet != null) | "\"\(.short)\" \(.ns_per_packet)"' \
    "$RESULTS/latest.json" >"$TMP/dp.dat"
  jq -r '.veth.scenarios as $v | [["none", "none"], ["htb1", "HTB 1 class"], ["htb1000", "HTB 1000 + u32"],
    ["tc_empty", "tc + empty prog"], ["shaperctl", "shaperctl 1 class"], ["shaperctl_rules", "shaperctl 1000 + rules"]][] |
    "\"\(.[1])\" \($v[.[0]].cpu_s_per_mpkt)"' "$RESULTS/latest.json" >"$TMP/veth.dat"
  FLOOR=$(jq '.datapath.goal.floor_ns' "$RESULTS/latest.json")
  gnuplot <<GP 2>/dev/null && echo "plot: $RESULTS/latest.png" || echo "plot: gnuplot failed (table and JSON are complete)"
set terminal pngcairo size 1200,520 font ",10" noenhanced
set output "$RESULTS/latest.png"
set multiplot layout 1,2
set style fill solid 0.8 border -1
set boxwidth 0.7
set grid ytics
set xtics rotate by -30 left
set title "Datapath ns/packet (BPF_PROG_TEST_RUN); dashed: 1.5 x floor"
set ylabel "ns per packet"
set yrange [0:*]
plot "$TMP/dp.dat" using 0:2:xtic(1) with boxes lc rgb "#4477aa" notitle, \
     "" using 0:(\$2 + 6):(sprintf("%.0f", \$2)) with labels notitle, \
     1.5 * $FLOOR with lines dt 2 lc rgb "#cc3311" notitle
set title "veth UDP blast: CPU seconds per million packets"
set ylabel "CPU s / Mpkt"
plot "$TMP/veth.dat" using 0:2:xtic(1) with boxes lc rgb "#228833" notitle, \
     "" using 0:(\$2 * 1.03):(sprintf("%.2f", \$2)) with labels notitle
unset multiplot
GP
fi
echo "results: $RESULTS/latest.json"
