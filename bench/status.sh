#!/usr/bin/env bash
# bench/status.sh — what reading a big shaper costs: `shaperctl status` (JSON and table, without
# and with the rate sample) and one exporter scrape, on a veth in police mode configured by
# `apply -f` with 100,000 classes and 10,000 rules. Wall time, CPU and max resident memory of the
# CLI as a user runs it (/usr/bin/time), the scrape's time as curl sees it and the exporter's
# peak resident memory. Needs root; makes no timing assertions.
#
#   bench/status.sh [--classes N] [--rules R] [--runs K] [--json FILE]
#
# Environment: BUILD_DIR (default build/). Method and numbers: bench/README.md, section 3.
set -euo pipefail

FLEET_NAME=status RUNS=5 FLEET_TOOLS="curl /usr/bin/time" FLEET_CLEANUP=stop_exporter
EXPORTER_PID=""
stop_exporter() { [ -z "$EXPORTER_PID" ] || { kill "$EXPORTER_PID" 2>/dev/null && wait "$EXPORTER_PID" 2>/dev/null; }; }
source "$(dirname "$0")/fleet-lib.sh"
log() { printf '[status-bench] %s\n' "$*" >&2; }

fleet_config "$CLASSES" "$RULES"
log "apply -f: $CLASSES classes + $RULES rules on a veth (police, --max-classes $MAX_CLASSES)"
"$SHAPERCTL" -n "$NS" apply -f "$TMP/fleet.json" >/dev/null

# One row: RUNS timed runs of `shaperctl status ARGS` after one warm-up; the median wall and CPU
# seconds, the largest max RSS, the bytes printed.
: >"$TMP/rows.jsonl"
time_status() {
  local name=$1; shift
  "$SHAPERCTL" -n "$NS" status --dev vA "$@" >/dev/null
  : >"$TMP/times"
  for ((i = 0; i < RUNS; i++)); do
    /usr/bin/time -f '%e %U %S %M' -o "$TMP/time" "$SHAPERCTL" -n "$NS" status --dev vA "$@" >"$TMP/out"
    tail -1 "$TMP/time" >>"$TMP/times"
  done
  jq -R -s -c --arg name "$name" --arg args "status --dev vA $*" --argjson bytes "$(stat -c %s "$TMP/out")" '
    def median: sort | .[length / 2 | floor];
    split("\n") | map(select(length > 0) | split(" ") | map(tonumber)) |
    {name: $name, command: $args, wall_s: (map(.[0]) | median), wall_min_s: (map(.[0]) | min),
     wall_max_s: (map(.[0]) | max), cpu_s: (map(.[1] + .[2]) | median | . * 1000 | round / 1000),
     max_rss_mib: (map(.[3]) | max / 1024 | . * 10 | round / 10), bytes: $bytes, runs: length}' \
    "$TMP/times" >>"$TMP/rows.jsonl"
  log "  $(tail -1 "$TMP/rows.jsonl")"
}
log "timing status ($RUNS runs each)"
time_status json_sample0 --json --sample 0
time_status table_sample0 --sample 0
time_status json_default_sample --json
time_status table_default_sample

# The exporter: RUNS scrapes of /metrics after one, each timed by curl (connection to last byte);
# its peak resident memory.
PORT=$((20000 + $$ % 20000))
# It binds where it starts (the host's loopback), then enters the namespace.
"$SHAPERCTL" -n "$NS" exporter --listen "127.0.0.1:$PORT" 2>"$TMP/exporter.log" &
EXPORTER_PID=$!
for ((i = 0; i < 100; i++)); do
  curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break
  kill -0 "$EXPORTER_PID" 2>/dev/null || { cat "$TMP/exporter.log" >&2; exit 1; }
  sleep 0.1
done
log "timing exporter scrapes ($RUNS runs)"
curl -sf -o /dev/null "http://127.0.0.1:$PORT/metrics"
: >"$TMP/scrapes"
# The exporter's CPU seconds during each scrape: utime + stime from /proc/PID/stat, in ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$EXPORTER_PID/stat"; }
TICK=$(getconf CLK_TCK)
for ((i = 0; i < RUNS; i++)); do
  before=$(cpu_ticks)
  wall=$(curl -sf -o "$TMP/metrics" -w '%{time_total}' "http://127.0.0.1:$PORT/metrics")
  echo "$wall $(( $(cpu_ticks) - before ))" >>"$TMP/scrapes"
done
HWM_KB=$(awk '/VmHWM/ {print $2}' "/proc/$EXPORTER_PID/status")
jq -R -s -c --argjson bytes "$(stat -c %s "$TMP/metrics")" --argjson hwm "$HWM_KB" --argjson tick "$TICK" '
  def median: sort | .[length / 2 | floor];
  split("\n") | map(select(length > 0) | split(" ") | map(tonumber)) |
  {name: "exporter_scrape", command: "GET /metrics", wall_s: (map(.[0]) | median), wall_min_s: (map(.[0]) | min),
   wall_max_s: (map(.[0]) | max), cpu_s: (map(.[1] / $tick) | median),
   max_rss_mib: ($hwm / 1024 | . * 10 | round / 10), bytes: $bytes, runs: length}' \
  "$TMP/scrapes" >>"$TMP/rows.jsonl"

jq -s --argjson classes "$CLASSES" --argjson rules "$RULES" \
  --arg commit "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  --arg kernel "$(uname -r)" --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" \
  '{commit: $commit, kernel: $kernel, cpus: '"$(nproc)"', loadavg_after: $load, classes: $classes,
    rules: $rules, rows: .}' "$TMP/rows.jsonl" >"$TMP/result.json"
[ -n "$JSON_OUT" ] && cp "$TMP/result.json" "$JSON_OUT"
jq -r '"status and exporter, \(.classes) classes + \(.rules) rules, commit \(.commit), kernel \(.kernel), load \(.loadavg_after)",
  (.rows[] | "  \(.command | . + " " * (40 - length))  wall \(.wall_s * 1000 | round / 1000) s (\(.wall_min_s)-\(.wall_max_s))  cpu \(.cpu_s // "-") s  max RSS \(.max_rss_mib) MiB  \(.bytes / 1e6 | . * 10 | round / 10) MB")' \
  "$TMP/result.json"
