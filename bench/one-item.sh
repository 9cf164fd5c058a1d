#!/usr/bin/env bash
# bench/one-item.sh — what one change costs an operator as the configuration grows: each
# one-item verb (add-class, change-class, change-class of its parent, del-class, set-default,
# add-rule, del-rule) timed through the CLI, one process per change, on a veth in police mode
# configured by `apply -f` with CLASSES classes and RULES rules (bench/fleet-config.sh), beside
# the same verbs at 100 classes and 10 rules. Prints the median and the largest of RUNS runs per
# verb, in ms of wall time; makes no timing assertions. Needs root.
#
#   bench/one-item.sh [--classes N] [--rules R] [--runs K] [--json FILE]
#
# Environment: BUILD_DIR (default build/).
set -euo pipefail

FLEET_NAME=one-item RUNS=20
source "$(dirname "$0")/fleet-lib.sh"
log() { printf '[one-item] %s\n' "$*" >&2; }

cli() { "$SHAPERCTL" -n "$NS" "$@" --dev vA; }

# ms VERB ARGS...: one run's wall time in ms (the command must succeed).
ms() {
  local t0 t1
  t0=$(date +%s%N)
  cli "$@" >/dev/null
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000))
}

# size CLASSES RULES: every verb RUNS times on that configuration; one line per verb,
# "size verb median_ms max_ms". Ids and prefs beyond the fleet's are the bench's own.
size() {
  local classes=$1 rules=$2 i verb
  fleet_config "$classes" "$rules"
  log "apply -f: $classes classes + $rules rules"
  "$SHAPERCTL" -n "$NS" apply -f "$TMP/fleet.json" >/dev/null
  local id=$((classes + 100)) pref=$((rules + 100)) leaf=$classes
  : >"$TMP/times"
  for ((i = 0; i < RUNS; i++)); do
    {
      echo "add-class $(ms add-class --id $id --rate 10mbit --parent 1)"
      echo "change-class $(ms change-class --id $id --rate $((11 + i % 5))mbit)"
      echo "change-class-parent $(ms change-class --id $id --parent $((2 + i % 2)))"
      echo "add-rule $(ms add-rule --pref $pref --class $id --dst 192.0.2.$((i % 250 + 1))/32)"
      echo "del-rule $(ms del-rule --pref $pref)"
      echo "set-default $(ms set-default --class $id)"
      cli set-default --class $leaf >/dev/null
      echo "del-class $(ms del-class --id $id)"
      echo "change-class-leaf $(ms change-class --id $leaf --rate $((20 + i % 5))mbit)"
    } >>"$TMP/times"
  done
  "$SHAPERCTL" -n "$NS" detach --dev vA >/dev/null
  for verb in add-class change-class change-class-parent change-class-leaf set-default add-rule del-rule del-class; do
    awk -v v="$verb" -v size="$classes/$rules" '$1 == v { print $2 }' "$TMP/times" | sort -n |
      awk -v v="$verb" -v size="$classes/$rules" '{ a[NR] = $1 } END {
        printf "%s %s %.1f %.1f\n", size, v, a[int((NR + 1) / 2)] / 1000, a[NR] / 1000 }'
  done
}

{
  size 1100 10
  size "$CLASSES" "$RULES"
} >"$TMP/rows"

printf '%-14s %-20s %10s %10s\n' "classes/rules" verb "median ms" "max ms"
awk '{ printf "%-14s %-20s %10s %10s\n", $1, $2, $3, $4 }' "$TMP/rows"
if [ -n "$JSON_OUT" ]; then
  jq -R -s --argjson runs "$RUNS" --arg kernel "$(uname -r)" --arg cpu "$(lscpu | sed -n 's/^Model name: *//p')" '
    {runs: $runs, kernel: $kernel, cpu: $cpu,
     rows: [split("\n")[] | select(length > 0) | split(" ") |
            {size: .[0], verb: .[1], median_ms: (.[2] | tonumber), max_ms: (.[3] | tonumber)}]}' \
    "$TMP/rows" >"$JSON_OUT"
fi
