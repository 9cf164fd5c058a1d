#!/bin/sh
# shaperctl-cni driven exactly as a runtime drives it: Debian's bridge + host-local plugins, then
# shaperctl-cni, each run with CNI_COMMAND/CNI_CONTAINERID/CNI_NETNS/CNI_IFNAME/CNI_PATH and its
# configuration on stdin (prevResult: the previous plugin's stdout; runtimeConfig: the bandwidth
# capability), stdout parsed as the runtime parses it. Cases: ADD (result = prevResult, both
# sides of the host veth shaped with the asked rates), CHECK (clean, then after the shaping was
# changed or removed behind its back), a running container's rates changed in place (shaperctl
# containers, change-container; CHECK then expects them; an older plugin's record read), DEL
# twice, DEL after the namespace is gone, 8 parallel
# ADDs and DELs (3 in the VM), the error objects (invalid JSON, no prevResult, zero and negative
# rate, unsupported cniVersion, no host device, no CNI_COMMAND; on the host only) with nothing
# changed. Where sch_fq
# exists (the VM) the host veth's egress must pace (edt, fq on every queue) and packets must be
# counted by the classes both ways; on a kernel without it, police mode.
#
#   tests/cni/cni-test.sh SHAPERCTL_CNI SHAPERCTL [PLUGIN_DIR]          (CTest: cni_host)
#   vm/run.sh --timeout 600 --module bridge --bin /usr/lib/cni/bridge --bin /usr/lib/cni/host-local \
#     --bin build/cni/shaperctl-cni --bin build/cli/shaperctl --bin build/cli/class_clock \
#     --file tests/e2e/judge.sh:/usr/local/share/shaperctl-vm/judge.sh tests/cni/cni-test.sh \
#     /usr/local/bin/shaperctl-cni /usr/local/bin/shaperctl /usr/local/bin   (CTest: vm_cni; 6.1, sch_fq)
# (class_clock and judge.sh: a changed rate judged from the class clock, as tests/e2e judges.)
#
# PLUGIN_DIR holds bridge and host-local (default /usr/lib/cni). On a host, everything runs in a
# throw-away network namespace standing for the host, so the devices and pins it makes are its own.
# POSIX sh plus `local` (busybox in the VM). Needs ip, jq.
set -u
CNI_BIN=$1 SHAPERCTL=$2 PLUGINS=${3:-/usr/lib/cni}
IP=${IP:-$(command -v ip)} TC=${TC:-$(command -v tc)}
ip() { "$IP" "$@"; }

if [ -z "${CNI_TEST_INNER:-}" ]; then
  for p in "$PLUGINS/bridge" "$PLUGINS/host-local" "$CNI_BIN" "$SHAPERCTL"; do
    [ -x "$p" ] || { echo "cni-test: $p is not an executable (containernetworking-plugins: scripts/install-deps.sh)"; exit 2; }
  done
  command -v jq >/dev/null || { echo "cni-test: jq missing"; exit 2; }
  TAG=cnit$$
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/shaperctl-cni-test.XXXXXX")
  cleanup() {
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$TAG-"); do ip netns del "$ns"; done
    rm -rf "$WORK"
  }
  trap cleanup EXIT
  trap 'exit 130' INT TERM HUP
  # A network namespace of its own (gone when it exits), in the mount namespace of the host as a
  # runtime's (not `ip netns exec`, whose private /sys hides bpffs). The VM is its own host.
  if [ -n "${SHAPERCTL_VM:-}" ]; then
    CNI_TEST_INNER=1 TAG=$TAG WORK=$WORK sh "$0" "$@"
  else
    CNI_TEST_INNER=1 TAG=$TAG WORK=$WORK unshare --net sh "$0" "$@"
  fi
  exit $?
fi

# ---------------------------- inside the "host" namespace ------------------------------------
ip link set lo up
HOSTNS=$(readlink /proc/self/ns/net | tr -dc 0-9)
PINS=/sys/fs/bpf/shaperctl/ns$HOSTNS
mkdir -p "$WORK/bin" "$WORK/ipam"
ln -s "$PLUGINS/bridge" "$PLUGINS/host-local" "$WORK/bin/"
ln -s "$(readlink -f "$CNI_BIN")" "$WORK/bin/shaperctl-cni"
FAILS=0 PASSES=0
pass() { PASSES=$((PASSES + 1)); echo "PASS $*"; }
fail() { FAILS=$((FAILS + 1)); echo "FAIL $*"; }
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }

if "$IP" link add "$TAG-fq" type veth peer name "$TAG-fq1" 2>/dev/null && "$TC" qdisc add dev "$TAG-fq" root fq 2>/dev/null; then
  HAS_FQ=1; else HAS_FQ=0; fi
ip link del "$TAG-fq" 2>/dev/null
echo "sch_fq: $([ $HAS_FQ = 1 ] && echo yes || echo 'no (police mode on the host veth egress)')"

BW='{"ingressRate": 10000000, "ingressBurst": 100000, "egressRate": 20000000, "egressBurst": 200000}'
conf_bridge() {
  jq -n -c --arg t "$TAG" --arg d "$WORK/ipam" '{cniVersion: "1.0.0", name: "cnitest", type: "bridge",
    bridge: ($t + "br"), isGateway: true, ipam: {type: "host-local", ranges: [[{subnet: "10.98.0.0/24"}]], dataDir: $d}}'
}
# conf_shaper PREV [RUNTIME_BW [VERSION]]: shaperctl-cni's entry with what libcni adds, and the
# plugin's own keys in $KEYS (a JSON object).
KEYS='{}'
conf_shaper() {
  jq -n -c --argjson prev "$1" --argjson bw "${2:-$BW}" --arg v "${3:-1.0.0}" --argjson keys "$KEYS" \
    '{cniVersion: $v, name: "cnitest", type: "shaperctl-cni", runtimeConfig: {bandwidth: $bw}} + $keys
     + (if $prev == null then {} else {prevResult: $prev} end)'
}
# plugin NAME COMMAND CONTAINER CONF: runs it as a runtime does; stdout in $WORK/out.CONTAINER.
plugin() {
  echo "$4" | env CNI_COMMAND="$2" CNI_CONTAINERID="$3" CNI_NETNS="/run/netns/$3" CNI_IFNAME=eth0 \
    CNI_PATH="$WORK/bin" "$WORK/bin/$1" >"$WORK/out.$3" 2>"$WORK/err.$3"
}
# add CONTAINER [BANDWIDTH]: a namespace, bridge ADD, shaperctl-cni ADD; prevResult in
# $WORK/prev.CONTAINER.
add() {
  ip netns add "$1" || return 1
  plugin bridge ADD "$1" "$(conf_bridge)" || { echo "  bridge ADD $1: $(cat "$WORK/out.$1")"; return 1; }
  cp "$WORK/out.$1" "$WORK/prev.$1"
  plugin shaperctl-cni ADD "$1" "$(conf_shaper "$(cat "$WORK/prev.$1")" "${2:-$BW}")"
}
del() {
  local prev=null
  [ -s "$WORK/prev.$1" ] && prev=$(cat "$WORK/prev.$1")
  plugin shaperctl-cni DEL "$1" "$(conf_shaper "$prev")" || return 1
  plugin bridge DEL "$1" "$(conf_bridge)"
}
# The host veth of CONTAINER: prevResult's interface without sandbox that is not the bridge.
host_veth() { jq -r --arg b "${TAG}br" '.interfaces[] | select(.sandbox == null and .name != $b) | .name' "$WORK/prev.$1"; }
sides_of() { "$SHAPERCTL" list --json | jq -r --argjson ns "$HOSTNS" --arg d "$1" \
  '[.[] | select(.netns == $ns and .device == $d) | "\(.direction):\(.mode)"] | sort | join(" ")'; }
class_of() { "$SHAPERCTL" status --dev "$1" ${2:-} --json --sample 0 | jq -r \
  '.default_class as $d | .classes[] | select(.id == $d) | "\(.rate_bps) \(.burst_bytes)"'; }
error_code() { jq -r '.code // "none"' "$WORK/out.$1" 2>/dev/null; }
# What shaperctl manages in this namespace and pins for it. Compared with what was there before
# the test: a namespace's inode number may be reused, and another test's leftovers named by it.
managed_here() { "$SHAPERCTL" list --json | jq -c --argjson ns "$HOSTNS" '[.[] | select(.netns == $ns)]'; ls -A "$PINS" 2>/dev/null; }
BASELINE=$(managed_here)
nothing_left() { [ "$(managed_here)" = "$BASELINE" ]; }
# tcp_segs: this namespace's TCP RetransSegs and OutSegs.
tcp_segs() { awk '$1 == "Tcp:" { if (h) print $13, $12; h = 1 }' /proc/net/snmp; }
# expect_error NAME CODE CONTAINER: the plugin failed with that code and a message.
expect_error() {
  local code
  code=$(error_code "$3")
  if [ "$code" = "$2" ] && [ -n "$(jq -r '.msg // empty' "$WORK/out.$3")" ]; then
    pass "$1 (code $code: $(jq -r .msg "$WORK/out.$3"))"
  else fail "$1: expected code $2, got $(cat "$WORK/out.$3")"; fi
}

egress_mode=police
[ $HAS_FQ = 1 ] && egress_mode=edt

# --- ADD, CHECK, DEL ---------------------------------------------------------------------------
C=$TAG-a
if add "$C"; then pass "ADD"; else fail "ADD: $(cat "$WORK/out.$C" "$WORK/err.$C")"; fi
check "ADD prints prevResult unchanged" [ "$(jq -S -c . "$WORK/out.$C")" = "$(jq -S -c . "$WORK/prev.$C")" ]
V=$(host_veth "$C")
check "host veth $V: egress ($egress_mode) and ingress attached" [ "$(sides_of "$V")" = "egress:$egress_mode ingress:police" ]
check "host egress = container ingress: 10 Mbit, burst 100000 bits" [ "$(class_of "$V")" = "10000000 12500" ]
check "host ingress = container egress: 20 Mbit, burst 200000 bits" [ "$(class_of "$V" --ingress)" = "20000000 25000" ]
if [ $HAS_FQ = 1 ]; then
  check "host egress paces: fq on every queue" [ "$("$SHAPERCTL" status --dev "$V" --json --sample 0 | jq -r .qdisc.fq_everywhere)" = true ]
  # Packets through both classes: the ping's requests leave by the host veth's egress, its
  # replies arrive at its ingress.
  ip=$(jq -r '.ips[0].address' "$WORK/prev.$C" | cut -d/ -f1)
  ping -c 3 -i 0.2 -W 2 "$ip" >/dev/null 2>&1
  eg=$("$SHAPERCTL" status --dev "$V" --json --sample 0 | jq '.classes[0].packets')
  in=$("$SHAPERCTL" status --dev "$V" --ingress --json --sample 0 | jq '.classes[0].packets')
  check "ping counted by both classes (egress $eg, ingress $in packets)" eval '[ "${eg:-0}" -ge 3 ] && [ "${in:-0}" -ge 3 ]'
fi
plugin shaperctl-cni CHECK "$C" "$(conf_shaper "$(cat "$WORK/prev.$C")")"
check "CHECK of the shaping ADD made" [ $? = 0 ]
plugin shaperctl-cni CHECK "$C" "$(conf_shaper "$(cat "$WORK/prev.$C")" '{"ingressRate": 10000000, "ingressBurst": 100000}')"
expect_error "CHECK with a direction the device shapes and the configuration does not" 999 "$C"
"$SHAPERCTL" change-class --dev "$V" --id 1 --rate 30mbit
plugin shaperctl-cni CHECK "$C" "$(conf_shaper "$(cat "$WORK/prev.$C")")"
expect_error "CHECK after the rate was changed" 999 "$C"
plugin shaperctl-cni ADD "$C" "$(conf_shaper "$(cat "$WORK/prev.$C")")"
check "ADD again restores the rate" [ "$(class_of "$V")" = "10000000 12500" ]
"$SHAPERCTL" detach --dev "$V" --ingress >/dev/null
plugin shaperctl-cni CHECK "$C" "$(conf_shaper "$(cat "$WORK/prev.$C")")"
expect_error "CHECK after the ingress side was detached" 999 "$C"
plugin shaperctl-cni CHECK "$C" "$(conf_shaper "$(cat "$WORK/prev.$C")" "$BW" 0.3.1)"
expect_error "CHECK under cniVersion 0.3.1" 1 "$C"
del "$C"; check "DEL" [ $? = 0 ]
check "DEL left no device, side or pin" nothing_left
plugin shaperctl-cni DEL "$C" "$(conf_shaper "$(cat "$WORK/prev.$C")")"; check "DEL twice" [ $? = 0 ]
ip netns del "$C"

# --- DEL after the namespace is gone ---------------------------------------------------------
C=$TAG-b
if add "$C"; then pass "ADD (second container)"; else fail "ADD (second container): $(cat "$WORK/out.$C")"; fi
V=$(host_veth "$C")
ip netns del "$C"
# The kernel deletes the namespace's devices, and with them the peer, in its own time.
gone() { local i=0; while ip link show dev "$1" >/dev/null 2>&1 && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
  ! ip link show dev "$1" >/dev/null 2>&1; }
check "the host veth went with the namespace" gone "$V"
plugin shaperctl-cni DEL "$C" "$(conf_shaper "$(cat "$WORK/prev.$C")")"
check "DEL after the namespace is gone" [ $? = 0 ]
check "... left no device, side or pin" nothing_left
plugin bridge DEL "$C" "$(conf_bridge)"

# --- the container's egress alone: the host's ACKs paced where the kernel has sch_fq -------------
C=$TAG-c
EGRESS_ONLY='{"egressRate": 20000000, "egressBurst": 200000}'
pacing_side() { [ $HAS_FQ = 1 ] && echo "egress:edt ingress:police" || echo "ingress:police"; }
no_class() { [ $HAS_FQ = 0 ] || [ "$("$SHAPERCTL" status --dev "$1" --json --sample 0 | jq '.classes | length')" = 0 ]; }
if add "$C" "$EGRESS_ONLY"; then pass "ADD of the container's egress alone"; else fail "ADD egress alone: $(cat "$WORK/out.$C")"; fi
V=$(host_veth "$C")
check "host veth $V: $(pacing_side) (the send side, edt and classless, only where fq paces ACKs)" \
  eval '[ "$(sides_of "$V")" = "$(pacing_side)" ] && no_class "$V"'
plugin shaperctl-cni CHECK "$C" "$(conf_shaper "$(cat "$WORK/prev.$C")" "$EGRESS_ONLY")"
check "CHECK of the container's egress alone" [ $? = 0 ]
plugin shaperctl-cni ADD "$C" "$(conf_shaper "$(cat "$WORK/prev.$C")")"
check "ADD again with both directions shapes both" eval '[ "$(sides_of "$V")" = "egress:$egress_mode ingress:police" ] &&
  [ "$(class_of "$V")" = "10000000 12500" ]'
plugin shaperctl-cni ADD "$C" "$(conf_shaper "$(cat "$WORK/prev.$C")" "$EGRESS_ONLY")"
check "ADD again with the egress alone drops the container's ingress class" eval '[ "$(sides_of "$V")" = "$(pacing_side)" ] && no_class "$V"'
plugin shaperctl-cni CHECK "$C" "$(conf_shaper "$(cat "$WORK/prev.$C")" "$EGRESS_ONLY")"
check "... and CHECK agrees" [ $? = 0 ]
del "$C"; check "DEL" [ $? = 0 ]
check "DEL left no device, side or pin" nothing_left
ip netns del "$C"

# --- a running container's rates changed in place: containers, change-container, list -----------
C=$TAG-d C2=$TAG-dx
KEYS='{"overhead": 24}'  # Ethernet's preamble, FCS and gap: what judge.sh's device arithmetic assumes
add "$C" || fail "ADD $C: $(cat "$WORK/out.$C")"
KEYS='{}'
add "$C2" "$EGRESS_ONLY" || fail "ADD $C2: $(cat "$WORK/out.$C2")"
V=$(host_veth "$C") V2=$(host_veth "$C2")
listed() { "$SHAPERCTL" containers --json | jq -r --arg c "$1" \
  '.[] | select(.container == $c) | "\(.device) \(.ingress_rate_bps) \(.egress_rate_bps) \(.ingress_changed) \(.egress_changed)"'; }
check "containers: $C on $V, ingress 10 Mbit, egress 20 Mbit" [ "$(listed "$C")" = "$V 10000000 20000000 false false" ]
check "containers: $C2 on $V2, egress alone" [ "$(listed "$C2")" = "$V2 null 20000000 false false" ]
check "list names the container of each side" \
  [ "$("$SHAPERCTL" list --json | jq -r --arg d "$V" '[.[] | select(.device == $d) | .container] | unique | join(" ")')" = "$C" ]
# cc ARGS...: change-container, its output in $WORK/cc, its status in $rc.
cc() { "$SHAPERCTL" change-container "$@" >"$WORK/cc" 2>&1; rc=$?; }
cc --id "$C" --ingress 5mbit --egress 3mbit
check "change-container --id $C (also a prefix of $C2) --ingress 5mbit --egress 3mbit: $(tr '\n' ' ' < "$WORK/cc")" [ $rc = 0 ]
check "... host egress class at 5 Mbit, burst kept" [ "$(class_of "$V")" = "5000000 12500" ]
check "... host ingress class at 3 Mbit, burst kept" [ "$(class_of "$V" --ingress)" = "3000000 25000" ]
check "... containers marks both changed" [ "$(listed "$C")" = "$V 5000000 3000000 true true" ]
KEYS='{"overhead": 24}'
plugin shaperctl-cni CHECK "$C" "$(conf_shaper "$(cat "$WORK/prev.$C")")"
check "CHECK expects the changed rates" [ $? = 0 ]
KEYS='{}'
# The changed rate holds, where the host veth paces (the VM): TCP from the host into the
# container for 4 s, judged as the end-to-end tests judge a rate (tests/e2e/judge.sh, from the
# class clock's samples): never faster than 5 Mbit, and stamped at 5 Mbit ±3 % while backlogged.
# These flows are held to their shares (the bridge's transmit has succeeded: a drop would be a
# loss), and a held packet leaves up to 250 ms after its slot: the bound on what the device
# sends gains 250 ms of the rate (bpf/fair.h), besides a 64 KB GSO packet (once 26 KB past
# 5 Mbit x T in a guest that stalled four times).
JUDGE=/usr/local/share/shaperctl-vm/judge.sh
if [ $HAS_FQ = 1 ] && command -v class_clock >/dev/null && [ -f "$JUDGE" ]; then
  # shellcheck source=../e2e/judge.sh
  . "$JUDGE"
  ip netns attach "$TAG-host" $$  # class_clock names a namespace: this one, the host's
  cip=$(jq -r '.ips[0].address' "$WORK/prev.$C" | cut -d/ -f1)
  ip netns exec "$C" "${IPERF3:-iperf3}" -s -1 -p 5399 >/dev/null 2>&1 &
  srv=$!
  sleep 0.5
  clock_start "$TAG-host" "$V" 1 5.5 "$WORK/live.clock"
  tcp0=$(tcp_segs)
  "${IPERF3:-iperf3}" -c "$cip" -p 5399 -t 4 -P 4 >/dev/null 2>&1
  tcp1=$(tcp_segs)
  wait "$CLOCK_PID"
  wait "$srv"
  v=$(clock_judge "$WORK/live.clock" 5e6 0.6 4 3 0 70000 $((5000000 / 8 / 4)))
  case ${v%%|*} in
    PASS) pass "... 5 Mbit holds after the change: ${v#*|}" ;;
    FAIL) fail "... 5 Mbit after the change: ${v#*|}" ;;
    *) echo "SKIP ... 5 Mbit after the change, the guest could not keep the class backlogged: ${v#*|}" ;;
  esac
  # The host's sockets send into the bridge, whose transmit has succeeded before the veth's
  # hook sees the packet: a drop there is a loss (28 % of the segments here before fair shares
  # held such flows; 0 since, on an idle host, and 2.2 % once on a busy one, where a stalled
  # guest takes holds past their cap). Debian's tcp_ecn=2: nothing is ECN-capable.
  set -- $tcp0 $tcp1
  retrans=$(($3 - $1)) out=$(($4 - $2))
  check "... 4 flows from the host through the bridge: $retrans of $out segments retransmitted (bound 5 %)" \
    [ $((retrans * 20)) -le "$out" ]
  ip netns delete "$TAG-host"
fi
cc --id "$C2" --ingress 7mbit
check "change-container --id $C2 --ingress 7mbit shapes the direction ADD left alone" \
  eval '[ $rc = 0 ] && [ "$(sides_of "$V2")" = "egress:$egress_mode ingress:police" ] && [ "$(class_of "$V2")" = "7000000 0" ]'
plugin shaperctl-cni CHECK "$C2" "$(conf_shaper "$(cat "$WORK/prev.$C2")" "$EGRESS_ONLY")"
check "... and CHECK expects it" [ $? = 0 ]
BEFORE=$(class_of "$V")/$(class_of "$V" --ingress)/$(listed "$C")
for bad in "--id $TAG- --ingress 1mbit" "--id nosuchcontainer --ingress 1mbit" "--id $C" "--id $C --ingress 5mbt" \
           "--id $C --ingress 1mbit --egress 0" "--id $C --ifname eth9 --ingress 1mbit" "--id abc --ingress 1mbit"; do
  # shellcheck disable=SC2086
  cc $bad
  check "change-container $bad refused in one line: $(cat "$WORK/cc")" eval '[ $rc != 0 ] && [ "$(wc -l < "$WORK/cc")" = 1 ]'
done
check "... and changed nothing" [ "$(class_of "$V")/$(class_of "$V" --ingress)/$(listed "$C")" = "$BEFORE" ]
# A record as the first plugins wrote it ("DEVICE IFINDEX"): read after an upgrade, DEL finishes.
old=$(jq -r '"\(.device) \(.ifindex)"' "/run/shaperctl-cni/$C2-eth0") && echo "$old" > "/run/shaperctl-cni/$C2-eth0"
check "an older plugin's record is listed" [ "$(listed "$C2")" = "$V2 7000000 20000000 false false" ]
KEYS='{"overhead": 24}'; del "$C"; KEYS='{}'; del "$C2"
check "DEL of both removed their records" eval '[ -z "$(listed "$C")$(listed "$C2")" ] && [ ! -e "/run/shaperctl-cni/$C2-eth0" ]'
check "... and left no device, side or pin" nothing_left
ip netns del "$C"; ip netns del "$C2"

# --- parallel ADDs, then parallel DELs: 8 on the host, 3 in the VM (each ADD there loads the
# datapath, seconds of TCG; three already race on the lock, the pins and fq on every queue) ------
N="1 2 3 4 5 6 7 8"
[ -n "${SHAPERCTL_VM:-}" ] && N="1 2 3"
NP=$(echo $N | wc -w)
for i in $N; do
  ip netns add "$TAG-p$i" && plugin bridge ADD "$TAG-p$i" "$(conf_bridge)" && cp "$WORK/out.$TAG-p$i" "$WORK/prev.$TAG-p$i" ||
    fail "bridge ADD p$i"
done
pids=""
for i in $N; do
  plugin shaperctl-cni ADD "$TAG-p$i" "$(conf_shaper "$(cat "$WORK/prev.$TAG-p$i")")" &
  pids="$pids $!"
done
bad=0
for p in $pids; do wait "$p" || bad=$((bad + 1)); done
check "$NP parallel ADDs succeed ($bad failed)" [ $bad = 0 ]
ok=0
for i in $N; do
  V=$(host_veth "$TAG-p$i")
  [ "$(sides_of "$V")" = "egress:$egress_mode ingress:police" ] && [ "$(class_of "$V")" = "10000000 12500" ] &&
    [ "$(class_of "$V" --ingress)" = "20000000 25000" ] && ok=$((ok + 1))
done
check "all $NP host veths shaped both ways ($ok of $NP)" [ $ok = $NP ]
pids=""
for i in $N; do plugin shaperctl-cni DEL "$TAG-p$i" "$(conf_shaper "$(cat "$WORK/prev.$TAG-p$i")")" & pids="$pids $!"; done
bad=0
for p in $pids; do wait "$p" || bad=$((bad + 1)); done
check "$NP parallel DELs succeed ($bad failed)" [ $bad = 0 ]
check "... left no device, side or pin" nothing_left
for i in $N; do plugin bridge DEL "$TAG-p$i" "$(conf_bridge)"; ip netns del "$TAG-p$i"; done

# --- errors: a JSON object with the spec's code, exit non-zero, nothing changed. On the host only:
# they are refused before the kernel is asked anything, and take a second each under TCG. ---------
if [ -n "${SHAPERCTL_VM:-}" ]; then
  echo "cni-test: the error objects are checked on the host (cni_host)"
  echo "cni-test: $PASSES passed, $FAILS failed"
  [ $FAILS = 0 ]
  exit
fi
C=$TAG-e
ip netns add "$C"
plugin bridge ADD "$C" "$(conf_bridge)" && cp "$WORK/out.$C" "$WORK/prev.$C"
PREV=$(cat "$WORK/prev.$C")
plugin shaperctl-cni ADD "$C" '{"cniVersion": "1.0.0", "name": '; expect_error "invalid JSON" 6 "$C"
plugin shaperctl-cni ADD "$C" '{"cniVersion": "1.0.0", "cniVersion": "1.0.0"}'; expect_error "a key given twice" 6 "$C"
plugin shaperctl-cni ADD "$C" "$(conf_shaper null)"; expect_error "missing prevResult" 7 "$C"
plugin shaperctl-cni ADD "$C" "$(conf_shaper '{"cniVersion": "1.0.0"}')"; expect_error "prevResult without interfaces" 7 "$C"
plugin shaperctl-cni ADD "$C" "$(conf_shaper "$PREV" '{"ingressRate": 0, "ingressBurst": 1000}')"; expect_error "zero rate" 7 "$C"
plugin shaperctl-cni ADD "$C" "$(conf_shaper "$PREV" '{"egressRate": -5, "egressBurst": 1000}')"; expect_error "negative rate" 7 "$C"
plugin shaperctl-cni ADD "$C" "$(conf_shaper "$PREV" '{"egressBurst": 1000}')"; expect_error "burst without rate" 7 "$C"
plugin shaperctl-cni ADD "$C" "$(conf_shaper "$PREV" "$BW" 0.2.0)"; expect_error "cniVersion 0.2.0" 1 "$C"
check "... the error object carries a supported cniVersion" [ "$(jq -r .cniVersion "$WORK/out.$C")" = 1.0.0 ]
NOHOST=$(echo "$PREV" | jq -c --arg b "${TAG}br" '.interfaces |= map(select(.sandbox != null or .name == $b))')
plugin shaperctl-cni ADD "$C" "$(conf_shaper "$NOHOST")"; expect_error "host device not found (only the bridge listed)" 999 "$C"
echo '{}' | env -u CNI_COMMAND "$WORK/bin/shaperctl-cni" >"$WORK/out.$C" 2>/dev/null; expect_error "no CNI_COMMAND" 4 "$C"
echo '{"cniVersion": "1.0.0"}' | CNI_COMMAND=ADD CNI_IFNAME=eth0 "$WORK/bin/shaperctl-cni" >"$WORK/out.$C" 2>/dev/null
expect_error "no CNI_CONTAINERID" 4 "$C"
check "errors changed nothing" nothing_left
echo '{"cniVersion": "1.0.0"}' | CNI_COMMAND=VERSION "$WORK/bin/shaperctl-cni" >"$WORK/out.$C"
check "VERSION lists 0.3.1 0.4.0 1.0.0" [ "$(jq -r '.supportedVersions | join(" ")' "$WORK/out.$C")" = "0.3.1 0.4.0 1.0.0" ]
plugin shaperctl-cni ADD "$C" "$(conf_shaper "$PREV" '{}')"
check "no bandwidth: prevResult passed through, nothing shaped" eval '[ "$(jq -S -c . "$WORK/out.$C")" = "$(echo "$PREV" | jq -S -c .)" ] && nothing_left'
plugin bridge DEL "$C" "$(conf_bridge)"

echo "cni-test: $PASSES passed, $FAILS failed"
[ $FAILS = 0 ]
