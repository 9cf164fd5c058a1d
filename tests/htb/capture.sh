#!/bin/sh
# Records tc's JSON of a three-level HTB tree: the fixtures of tests/test_htb_import.cpp
# (tests/htb/README.md shows the tree and the versions). The tree is built on a veth in a
# throw-away network namespace, deleted however the script ends.
#
# usage: tests/htb/capture.sh [--tc PATH] OUTDIR       on this machine's kernel, which needs
#                       sch_htb, sch_fq_codel, sch_sfq, sch_netem, cls_fw, cls_flower, cls_u32
#        tests/htb/capture.sh [--tc PATH] --vm OUTDIR  in the stock-kernel VM (vm/run.sh), which
#                       has them
#        tests/htb/capture.sh --print [PATH]           (the VM's part) the files on stdout, each
#                       after a line "=== NAME"
# --tc: the tc binary to record (default: iproute2's on PATH). tc writes HTB classes as JSON
# from iproute2 6.2 on, fw filters from 6.8 on.
# POSIX sh: the VM runs it under busybox ash, with $IP and $TC naming iproute2's tools.
set -eu

: "${IP:=$(command -v ip)}" "${TC:=$(command -v tc)}"
here=$(cd "$(dirname "$0")" && pwd)

usage() { sed -n '6,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

# The tree, then each file on stdout after its "=== NAME" line.
print_fixtures() {
  ns="shaperctl-htb-capture-$$"
  trap '"$IP" netns del "$ns" 2>/dev/null || true' EXIT
  trap 'exit 130' INT TERM
  "$IP" netns add "$ns"
  "$IP" -n "$ns" link add h0 type veth peer name h1
  "$IP" -n "$ns" link set h0 up
  "$IP" -n "$ns" link set h1 up
  # Through ip netns exec: a tc built elsewhere may look for namespaces in another directory.
  t() { "$IP" netns exec "$ns" "$TC" "$@"; }
  t qdisc add dev h0 root handle 1: htb default 30
  t class add dev h0 parent 1: classid 1:1 htb rate 100mbit
  t class add dev h0 parent 1:1 classid 1:10 htb rate 30mbit ceil 100mbit prio 0 quantum 3000
  t class add dev h0 parent 1:1 classid 1:20 htb rate 50mbit ceil 80mbit prio 1 burst 32k
  t class add dev h0 parent 1:20 classid 1:21 htb rate 30mbit ceil 80mbit prio 1
  t class add dev h0 parent 1:20 classid 1:22 htb rate 20mbit prio 2
  t class add dev h0 parent 1:1 classid 1:30 htb rate 15mbit ceil 100mbit prio 3
  t class add dev h0 parent 1:1 classid 1:40 htb rate 5mbit ceil 10mbit prio 7
  t qdisc add dev h0 parent 1:10 handle 10: fq_codel target 2ms interval 50ms noecn
  t qdisc add dev h0 parent 1:21 handle 21: sfq perturb 10
  t qdisc add dev h0 parent 1:22 handle 22: fq_codel
  t qdisc add dev h0 parent 1:30 handle 30: pfifo limit 100
  t qdisc add dev h0 parent 1:40 handle 40: netem delay 10ms
  t filter add dev h0 parent 1: protocol all prio 1 handle 0x10/0xff fw classid 1:21
  t filter add dev h0 parent 1: protocol all prio 2 handle 7 fw classid 1:22
  t filter add dev h0 parent 1: protocol ip prio 10 flower ip_proto tcp dst_ip 10.1.0.0/16 \
    dst_port 80 classid 1:10
  t filter add dev h0 parent 1: protocol ip prio 10 flower ip_proto udp src_ip 192.168.1.5 \
    src_port 1000-2000 classid 1:22
  t filter add dev h0 parent 1: protocol ipv6 prio 11 flower dst_ip 2001:db8::/32 classid 1:21
  t filter add dev h0 parent 1: protocol ip prio 12 flower ip_proto tcp ip_ttl 1 classid 1:30
  t filter add dev h0 parent 1: protocol ip prio 13 flower ip_proto icmp classid 1:20
  t filter add dev h0 parent 1: protocol ip prio 20 u32 match ip dst 192.168.0.0/24 flowid 1:30
  for what in class:classes qdisc:qdiscs filter:filters; do
    echo "=== ${what#*:}.json"
    t -j "${what%%:*}" show dev h0
    echo
    echo "=== ${what#*:}-details.json"
    t -s -d -j "${what%%:*}" show dev h0
    echo
  done
  echo "=== versions.txt"
  "$TC" -V
  echo "kernel $(uname -r)"
}

# Splits print_fixtures' output into OUTDIR's files.
split_into() {
  awk -v dir="$1" '/^=== / { file = dir "/" $2; printf "" > file; next }
                   file != "" && NF { print >> file }'
}

tc_bin="" vm=0
while [ $# -gt 0 ]; do
  case "$1" in
  --print) [ $# -le 2 ] || usage; [ $# -eq 1 ] || TC=$2; print_fixtures; exit 0 ;;
  --tc) [ $# -ge 2 ] || usage; tc_bin=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2 ;;
  --vm) vm=1; shift ;;
  -*) usage ;;
  *) break ;;
  esac
done
[ $# -eq 1 ] || usage
mkdir -p "$1"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if [ "$vm" = 1 ]; then
  # A --bin lands in the guest's /usr/local/bin.
  if [ -n "$tc_bin" ]; then
    "$here/../../vm/run.sh" --timeout 300 --bin "$tc_bin" "$0" --print /usr/local/bin/tc > "$out"
  else
    "$here/../../vm/run.sh" --timeout 300 "$0" --print > "$out"
  fi
else
  "$0" --print ${tc_bin:+"$tc_bin"} > "$out"
fi
split_into "$1" < "$out"
