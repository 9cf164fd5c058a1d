#!/usr/bin/env bash
# shaperctl-cni under real container runtimes: Debian's podman (4.3, its CNI network backend) and
# containerd (1.6, `ctr run --cni`), each starting containers from a busybox image built here
# (nothing is pulled) on a conflist that chains shaperctl-cni after bridge + host-local, with
# the rates in the plugin's own entry (neither runtime passes the bandwidth capability: only
# CRI does). Per runtime:
#   - two containers; a download from one to the other passes through both classes (the
#     downloader's on its host veth's egress, the server's on its ingress), which count it and
#     never admit more than rate x (time + horizon) + burst (the datapath's bound);
#   - removing them leaves no class, rule, pin or record;
#   - (podman) 50 containers started at once, then removed at once: every start and
#     removal succeeds, each container has its record and both sides shaped, nothing is left;
#   - every ADD, DEL and CHECK the runtime made was answered by the CNI contract (exit 0 with a
#     result, or an error object with a code and a message on stdout).
# Everything runs in a throw-away network namespace standing for the host (podman and ctr are
# entered into it with nsenter, which keeps the host's /sys and its bpffs), with the runtimes'
# storage, state and configuration in a temporary directory. containerd's `ctr run --cni` reads
# /etc/cni/net.d and /opt/cni/bin only: it runs in a private mount namespace where the test's
# directories are bound over them (created empty first where missing, removed after).
#
#   tests/cni/runtime-test.sh RUNTIME SHAPERCTL_CNI SHAPERCTL [PLUGIN_DIR]   (CTest: cni_runtimes)
# RUNTIME: podman, containerd or all. PLUGIN_DIR holds bridge and host-local (/usr/lib/cni).
set -uo pipefail
RUNTIMES=$1 CNI_BIN=$(readlink -f "$2") SHAPERCTL=$(readlink -f "$3") PLUGINS=${4:-/usr/lib/cni}
[ "$RUNTIMES" = all ] && RUNTIMES="podman containerd"
N=50
TAG=rtt$$
WORK=$(mktemp -d "${TMPDIR:-/tmp}/shaperctl-runtime-test.XXXXXX")
HOST=$TAG-host
FAILED=0 CTRD_PID="" MADE_DIRS=()

pass() { echo "PASS $1: $2"; }
fail() { echo "FAIL $1: $2"; FAILED=1; }
check() { if eval "$3"; then pass "$1" "$2"; else fail "$1" "$2"; fi; }  # NAME MESSAGE CONDITION
inhost() { nsenter --net="/run/netns/$HOST" "$@"; }
sc() { "$SHAPERCTL" -n "$HOST" "$@"; }

cleanup() {
  podman_cmd rm -a -f -t 0 >/dev/null 2>&1
  [ -n "$CTRD_PID" ] && { ctr_all_rm; kill "$CTRD_PID" 2>/dev/null; wait "$CTRD_PID" 2>/dev/null; }
  ip netns del "$HOST" 2>/dev/null
  for d in "${MADE_DIRS[@]}"; do rmdir "$d" 2>/dev/null; done
  umount -R "$WORK" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

for p in "$PLUGINS/bridge" "$PLUGINS/host-local" "$PLUGINS/loopback" "$CNI_BIN" "$SHAPERCTL"; do
  [ -x "$p" ] || { echo "runtime-test: $p is not an executable (scripts/install-deps.sh)"; exit 2; }
done
command -v jq >/dev/null && command -v busybox >/dev/null || { echo "runtime-test: needs jq, busybox"; exit 2; }

# --- what both runtimes share ---------------------------------------------------------------

ip netns add "$HOST" && ip -n "$HOST" link set lo up || { echo "runtime-test: no netns"; exit 2; }
mkdir -p "$WORK/bin" "$WORK/net.d" "$WORK/calls"
for d in bin www tmp proc sys dev etc; do mkdir -p "$WORK/rootfs/$d"; done
for p in bridge host-local loopback; do ln -s "$PLUGINS/$p" "$WORK/bin/$p"; done
# The plugin as the runtime calls it, each call's command, exit status and stdout kept.
cat >"$WORK/bin/shaperctl-cni" <<EOF
#!/bin/sh
out=\$("$CNI_BIN"); rc=\$?
printf '%s\n' "\$out" >"$WORK/calls/\${CNI_COMMAND:-none}.\$\$.\$rc"
printf '%s\n' "\$out"
exit \$rc
EOF
chmod +x "$WORK/bin/shaperctl-cni"
cp "$(command -v busybox)" "$WORK/rootfs/bin/busybox"
for a in sh sleep httpd wget wc ip ifconfig; do ln -s busybox "$WORK/rootfs/bin/$a"; done
busybox dd if=/dev/zero of="$WORK/rootfs/www/f" bs=1000 count=500 2>/dev/null

INGRESS=20000000 EGRESS=40000000 BURST_BITS=100000
conflist() {  # SUBNET BRIDGE
  cat <<EOF
{"cniVersion": "1.0.0", "name": "shaped", "plugins": [
  {"type": "bridge", "bridge": "$2", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$1"}]], "dataDir": "$WORK/ipam"}},
  {"type": "shaperctl-cni", "ingressRate": $INGRESS, "ingressBurst": $BURST_BITS,
   "egressRate": $EGRESS, "egressBurst": $BURST_BITS}]}
EOF
}

# The classes of one container's host veth: "bytes horizon_ns" of its download (egress side) and
# of its upload (ingress side).
side_bytes() {  # DEVICE [--ingress]
  sc status --dev "$1" ${2:-} --json --sample 0 | jq -r '.classes[0] | "\(.bytes) \(.horizon_ns) \(.rate_bps)"'
}
# Bytes admitted at most in SECONDS: burst + rate x (time + horizon), as bpf/ingress.h states.
within_bound() {  # "BYTES HORIZON_NS RATE_BPS" SECONDS
  set -- $1 "$2"
  awk -v b="$1" -v h="$2" -v r="$3" -v t="$4" -v burst="$((BURST_BITS / 8))" \
    'BEGIN { exit !(b <= burst + r / 8 * (t + h / 1e9) + 65536) }'
}
device_of() { sc containers --json | jq -r --arg id "$1" '.[] | select(.container == $id) | .device'; }
# The sides `list` shows in the test's host namespace: it lists every namespace's, and a machine
# running the suite may shape something of its own.
sides_here() { sc list --json | jq -c --argjson ns "$(stat -L -c %i "/run/netns/$HOST")" '[.[] | select(.netns == $ns)]'; }
left_behind() {  # nothing of shaperctl left: records, attached devices, pins
  local records devices pins
  records=$(sc containers --json | jq length)
  devices=$(sides_here | jq length)
  pins=$(find /sys/fs/bpf/shaperctl -mindepth 2 -maxdepth 2 -path "*/ns$(stat -L -c %i "/run/netns/$HOST")/*" 2>/dev/null | wc -l)
  echo "$records records, $devices attached sides, $pins pin directories"
  [ "$records" = 0 ] && [ "$devices" = 0 ] && [ "$pins" = 0 ]
}
# Every plugin call answered by the contract: exit 0 (ADD: a result with interfaces), or an
# error object on stdout with a code and a message.
calls_by_contract() {
  local f bad=0 n=0
  for f in "$WORK"/calls/*; do
    [ -e "$f" ] || continue
    n=$((n + 1))
    case "$f" in
      *.0) case "$f" in */ADD.*) jq -e '.interfaces | length > 0' "$f" >/dev/null || bad=$((bad + 1)) ;; esac ;;
      *) jq -e '(.code | type == "number") and (.msg | type == "string")' "$f" >/dev/null || bad=$((bad + 1)) ;;
    esac
  done
  echo "$n calls ($(ls "$WORK/calls" | cut -d. -f1 | sort | uniq -c | awk '{printf "%s %s ", $1, $2}')), $bad outside the contract"
  [ "$bad" = 0 ] && [ "$n" -gt 0 ]
}

# One runtime's cases, through run_one NAME COMMAND... / exec_in NAME COMMAND... / rm_all NAMES...
runtime_cases() {  # RUNTIME
  local rt=$1 a b da db t0 t1 secs msg i ok p pids
  rm -f "$WORK"/calls/*
  run_one "$rt-a" sleep 600 && run_one "$rt-b" sleep 600 ||
    { fail "$rt-start" "the runtime could not start two containers: $(why_not 2>&1 | tail -3 | tr '\n' ' ')"; return; }
  a=$(container_id "$rt-a") b=$(container_id "$rt-b")
  da=$(device_of "$a") db=$(device_of "$b")
  check "$rt-record" "each container has its record and host device ($da, $db)" '[ -n "$da" ] && [ -n "$db" ]'
  exec_in "$rt-b" httpd -p 8080 -h /www
  sleep 0.5
  t0=$(date +%s.%N)
  exec_in "$rt-a" wget -q -O /tmp/f "http://$(container_ip "$rt-b"):8080/f"
  t1=$(date +%s.%N)
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
  local down up
  down=$(side_bytes "$da") up=$(side_bytes "$db" --ingress)
  msg="500,000 bytes in $secs s; the downloader's class (egress of $da) charged ${down%% *} bytes, the server's (ingress of $db) ${up%% *}"
  check "$rt-shaped" "$msg" '[ "$(exec_in "$rt-a" wc -c /tmp/f | cut -d" " -f1)" = 500000 ] &&
    [ "${down%% *}" -ge 500000 ] && [ "${up%% *}" -ge 500000 ] &&
    within_bound "$down" "$secs" && within_bound "$up" "$secs"'
  rm_all "$rt-a" "$rt-b"
  msg=$(left_behind)
  check "$rt-removed" "after removal: $msg" 'left_behind >/dev/null'

  # 50 at once: podman's (ctr adds nothing to what the plugin's lock must take, and its
  # foreground processes double the run's time). Once: a second round took a minute of CPU and
  # found nothing the first and the pair before it do not (adds after removals).
  [ "$rt" = podman ] || { msg=$(calls_by_contract); check "$rt-contract" "$msg" 'calls_by_contract >/dev/null'; return; }
  ok=0 pids=()
  for i in $(seq 1 $N); do run_one "$rt-$i" sleep 600 & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" && ok=$((ok + 1)); done
  local records shaped
  records=$(sc containers --json | jq length)
  shaped=$(sides_here | jq '[.[] | select(.container != null)] | length')
  [ "$ok" = $N ] || echo "  (the runtime said: $(why_not 2>/dev/null | tail -3 | tr '\n' ' '))"
  check "$rt-$N-at-once" "$ok of $N started at once; $records records, $shaped shaped sides" \
    '[ "$ok" = $N ] && [ "$records" = $N ] && [ "$shaped" = $((2 * N)) ]'
  ok=0 pids=()
  for i in $(seq 1 $N); do rm_all "$rt-$i" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" && ok=$((ok + 1)); done
  msg=$(left_behind)
  check "$rt-$N-removed" "$ok of $N removed at once; $msg" '[ "$ok" = $N ] && left_behind >/dev/null'
  msg=$(calls_by_contract)
  check "$rt-contract" "$msg" 'calls_by_contract >/dev/null'
}

# --- podman ---------------------------------------------------------------------------------

cat >"$WORK/containers.conf" <<EOF
[network]
network_backend = "cni"
cni_plugin_dirs = ["$WORK/bin"]
network_config_dir = "$WORK/net.d"
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "runc"
EOF
podman_cmd() {
  CONTAINERS_CONF="$WORK/containers.conf" inhost podman --root "$WORK/podman" --runroot "$WORK/podman-run" \
    --storage-driver vfs "$@"
}
podman_run_one() {
  podman_cmd run -d --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 --name "$1" --network shaped \
    localhost/shaperctl-test-busybox "${@:2}" >/dev/null
}
podman_cases() {
  conflist 10.89.7.0/24 shp-podman >"$WORK/net.d/shaped.conflist"
  (cd "$WORK/rootfs" && tar -c .) | podman_cmd import - localhost/shaperctl-test-busybox >/dev/null 2>&1 ||
    { fail podman-image "podman import of the busybox root failed"; return; }
  run_one() { podman_run_one "$@"; }
  exec_in() { podman_cmd exec "$@"; }
  # Once more where podman's own stop gave up ("given PIDs did not die within timeout": 50 at
  # once on a busy host): the runtime's wait, not a DEL; what DEL leaves is judged after.
  rm_all() { podman_cmd rm -f -t 0 "$@" >/dev/null 2>&1 || podman_cmd rm -f -t 0 "$@" >/dev/null; }
  container_id() { podman_cmd inspect -f '{{.Id}}' "$1"; }
  why_not() { podman_cmd ps -a --format '{{.Names}} {{.Status}}' | grep -v ' Up ' ; }
  container_ip() { podman_cmd inspect -f '{{(index .NetworkSettings.Networks "shaped").IPAddress}}' "$1"; }
  runtime_cases podman
  rm -f "$WORK/net.d/shaped.conflist"
}

# --- containerd -----------------------------------------------------------------------------

# `ctr run --cni` calls ADD before the task starts and DEL only when a container it runs in the
# foreground ends (a detached one's network is never removed: ctr's own limit). So each
# container's ctr stays in the background with --rm, and removing it is killing its task.
CTR=(nsenter --net="/run/netns/$HOST" ctr --address "$WORK/containerd/sock" --namespace shaperctl-test)
ctr_cmd() { "${CTR[@]}" "$@"; }
# ctr's --cni reads only /etc/cni/net.d and /opt/cni/bin: a private mount namespace binds ours.
ctr_in_mounts() {
  unshare -m sh -c 'mount --bind "$1/net.d" /etc/cni/net.d && mount --bind "$1/bin" /opt/cni/bin && shift && exec "$@"' \
    sh "$WORK" "$@"
}
ctr_wait_gone() {  # PID: its ctr has removed the network and the container (at most 60 s)
  local i
  for i in $(seq 1 300); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.2; done
  return 1
}
ctr_all_rm() {
  local t
  for t in $(ctr_cmd task ls -q 2>/dev/null); do ctr_cmd task kill -s KILL "$t" >/dev/null 2>&1; done
  for t in "$WORK"/containerd/*.pid; do [ -e "$t" ] && ctr_wait_gone "$(cat "$t")"; done
  for t in $(ctr_cmd container ls -q 2>/dev/null); do ctr_cmd container rm "$t" >/dev/null 2>&1; done
}
containerd_cases() {
  local d
  for d in /etc/cni/net.d /opt/cni/bin; do
    [ -d "$d" ] || { mkdir -p "$d" && MADE_DIRS=("$d" "${MADE_DIRS[@]}" "$(dirname "$d")"); }
  done
  conflist 10.89.8.0/24 shp-ctr >"$WORK/net.d/10-shaped.conflist"
  mkdir -p "$WORK/containerd"
  printf 'version = 2\nroot = "%s/containerd/root"\nstate = "%s/containerd/state"\ndisabled_plugins = ["io.containerd.grpc.v1.cri"]\n' \
    "$WORK" "$WORK" >"$WORK/containerd/config.toml"
  # nsenter execs containerd: $! is the daemon, which cleanup stops.
  nsenter --net="/run/netns/$HOST" containerd --config "$WORK/containerd/config.toml" \
    --address "$WORK/containerd/sock" >"$WORK/containerd/log" 2>&1 &
  CTRD_PID=$!
  for _ in $(seq 1 50); do ctr_cmd version >/dev/null 2>&1 && break; sleep 0.2; done
  ctr_cmd version >/dev/null 2>&1 || { fail containerd-start "containerd did not answer: $(tail -3 "$WORK/containerd/log")"; return; }
  run_one() {  # started: its task runs (ctr starts it once ADD has answered)
    local n=$1 i
    shift
    ctr_in_mounts "${CTR[@]}" run --rm --cni --null-io --runc-root "$WORK/containerd/runc" --env PATH=/bin \
      --rootfs "$WORK/rootfs" "$n" "$@" \
      </dev/null >>"$WORK/containerd/ctr.log" 2>&1 &
    echo $! >"$WORK/containerd/$n.pid"
    for i in $(seq 1 240); do
      kill -0 "$(cat "$WORK/containerd/$n.pid")" 2>/dev/null || return 1
      ctr_cmd task ls 2>/dev/null | grep -q "^$n .*RUNNING" && return 0
      sleep 0.5
    done
    return 1
  }
  exec_in() { local n=$1; shift; ctr_cmd task exec --exec-id "x$RANDOM$RANDOM" "$n" "$@"; }
  rm_all() {
    local n
    for n in "$@"; do
      ctr_cmd task kill -s KILL "$n" >/dev/null 2>&1 || return 1
      ctr_wait_gone "$(cat "$WORK/containerd/$n.pid")" || return 1
      ! ctr_cmd container info "$n" >/dev/null 2>&1 || return 1
    done
  }
  container_id() { echo "shaperctl-test-$1"; }
  why_not() { cat "$WORK/containerd/ctr.log"; }
  container_ip() { exec_in "$1" ip -4 -o addr show eth0 | grep -o '10\.89\.8\.[0-9]*' | head -1; }
  runtime_cases containerd
}

for rt in $RUNTIMES; do
  case "$rt" in
    podman) podman_cases ;;
    containerd) containerd_cases ;;
    *) echo "runtime-test: unknown runtime $rt (podman, containerd, all)"; exit 2 ;;
  esac
done
exit $FAILED
