#!/usr/bin/env bash
# bench/fleet-config.sh — prints the configuration file of a fleet for `shaperctl apply -f`:
# CLASSES classes (1,000 top-level parents at 1 gbit, the rest under them at 1-97 mbit) and RULES
# rules of four kinds (dst /32, tcp dport, src /24, fwmark), on DEV in police mode.
#
#   bench/fleet-config.sh DEV CLASSES RULES MAX_CLASSES > fleet.json
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: bench/fleet-config.sh DEV CLASSES RULES MAX_CLASSES" >&2; exit 2; }
jq -n --arg dev "$1" --argjson n "$2" --argjson r "$3" --argjson max "$4" '
  {version: 1, devices: [{device: $dev, mode: "police", max_classes: $max, default_class: 1001,
    classes: ([range(1; 1001) | {id: ., rate: "1gbit"}] +
              [range(1001; $n + 1) | {id: ., rate: "\(. % 97 + 1)mbit", parent: (. % 1000 + 1)}]),
    rules: [range(0; $r) | {pref: (. + 1), class: (1001 + (. * 7) % ($n - 1000))} +
      (if . % 4 == 0 then {dst: "10.\(. / 65536 | floor % 256).\(. / 256 | floor % 256).\(. % 256)/32"}
       elif . % 4 == 1 then {proto: "tcp", dport: "\(1000 + .)"}
       elif . % 4 == 2 then {src: "11.\(. / 256 | floor % 256).\(. % 256).0/24"}
       else {mark: "\(. + 1)"} end)]}]}'
