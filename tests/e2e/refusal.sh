#!/bin/sh
# A kernel the datapath cannot load on (Debian 11's 5.10): attach and doctor refuse in one
# line naming the missing feature and the oldest kernel that has it, and attach changes
# nothing. Runs in the VM (busybox sh), started by run-e2e.sh --refusal; prints result lines
# as e2e.sh does and exits 1 if any FAILed.
set -u

LIB=/usr/local/share/shaperctl-vm/lib.sh
[ -f "$LIB" ] || LIB="$(dirname "$0")/../../vm/lib.sh"
# shellcheck source=../../vm/lib.sh
. "$LIB"

FAILS=0
result() {
  echo "$1 $2: $3"
  [ "$1" != FAIL ] || FAILS=$((FAILS + 1))
}
# refusal_line TEXT: true if TEXT is one line saying the kernel lacks something and the
# version that has it, as "(5.12+)" or "5.12+".
refusal_line() {
  [ "$(printf '%s\n' "$1" | grep -c .)" = 1 ] && printf '%s\n' "$1" | grep -q 'lacks' &&
    printf '%s\n' "$1" | grep -Eq '[0-9]+\.[0-9]+\+'
}

echo "=== refusal: kernel $(uname -r)"
new_ns snd && new_ns rcv && veth_pair snd va0 10.0.0.1/24 rcv vb0 10.0.0.2/24 ||
  { echo "FAIL setup: topology"; exit 1; }
root_before=$(tc -n snd -j qdisc show dev va0 | jq -c .)

shaperctl -n snd attach --dev va0 >/tmp/attach.out 2>/tmp/attach.err
rc=$?
err=$(cat /tmp/attach.err)
echo "  attach exit $rc; stdout: $(head -c 300 /tmp/attach.out); stderr: $err"
if [ "$rc" -ne 0 ] && refusal_line "$err"; then
  result PASS attach-refused "exit $rc: $err"
else
  result FAIL attach-refused "exit $rc, stderr $(printf '%s\n' "$err" | grep -c .) line(s): $(printf '%s' "$err" | head -c 400) (expected non-zero and one line: this kernel lacks FEATURE (N.M+))"
fi

root_after=$(tc -n snd -j qdisc show dev va0 | jq -c .)
pins=$(find /sys/fs/bpf/shaperctl /run/shaperctl 2>/dev/null | head -5 | tr '\n' ' ')
progs=$("$BPFTOOL" -j prog show 2>&1 | jq -c '[.[] | "\(.type) \(.name // "?")"]' 2>&1)
if [ "$root_after" = "$root_before" ] && [ -z "$pins" ] && [ "$progs" = "[]" ]; then
  result PASS attach-refused-changes-nothing "qdiscs on va0 as before ($root_after); no pins, no state, no BPF program"
else
  result FAIL attach-refused-changes-nothing "qdiscs $root_before -> $root_after; left: ${pins:-no pins}; programs $progs"
fi

shaperctl -n snd doctor >/tmp/doctor.out 2>&1
rc=$?
line=$(grep 'lacks' /tmp/doctor.out | head -n1)
sed 's/^/  doctor: /' /tmp/doctor.out
if [ "$rc" -ne 0 ] && [ -n "$line" ] && refusal_line "$line"; then
  result PASS doctor-says-why "exit $rc: $(echo "$line" | tr -s ' ')"
else
  result FAIL doctor-says-why "exit $rc; no line saying what this kernel lacks and which version has it"
fi

for ns in snd rcv; do ip netns del "$ns" 2>/dev/null; done
echo "REFUSAL SUMMARY: $FAILS failed"
[ "$FAILS" -eq 0 ]
