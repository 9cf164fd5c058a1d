#!/bin/sh
# Pod bandwidth through CNI: Debian's containernetworking-plugins (bridge + host-local +
# bandwidth), driven as a runtime drives them, against shaperctl-cni in the bandwidth plugin's
# place. One container network namespace on a bridge in the VM's root namespace (the host); the
# plugins run with CNI_COMMAND/CNI_CONTAINERID/CNI_NETNS/CNI_IFNAME/CNI_PATH set and the conflist's
# plugin configuration on stdin, each with the previous plugin's result as prevResult and the
# bandwidth capability as runtimeConfig (what libcni does). Then, 4 TCP flows for 12 s each way
# (by default as Debian leaves TCP: tcp_ecn=2, ECN answered, never asked for):
#   container egress  20 Mbit   (the container sends, the host receives)
#   container ingress 10 Mbit   (the host sends, the container receives: "downloads")
# with a ping host -> container every 50 ms from 2 s after the flows start. Per row: goodput error
# vs rate x 1448/1514, retransmits (count and % of the sender's segments), ping p50/p99, and the
# goal (within 3 %, retransmits <= 1 %, ping p99 <= 10 ms while the container downloads).
# Then DEL, and what it left behind. Plugins: reference (bandwidth) and shaperctl (shaperctl-cni:
# tried on every run; without the binary or with a failing ADD its rows are "not available").
#
#   sudo bench/cni.sh [--cni-bin PATH] [--burst-ms 10] [--out DIR] [--seconds 12] [--ecn debian|on]
#
# --ecn on: both ends ask for ECN (tcp_ecn=1), a bench condition the results name as one.
# --cni-bin: the shaperctl-cni binary (default: the first of build/cni/shaperctl-cni,
# build/cli/shaperctl-cni, build/shaperctl-cni). --burst-ms: ingressBurst/egressBurst as that many
# ms of the rate (kubelet passes MaxInt32 bits, a 256 MiB bucket that would leave a 12 s run
# unshaped). Writes DIR/cni.json and DIR/cni.md (printed too); DIR defaults to bench/results.
# Runs in the stock-kernel VM (vm/run.sh, bridge module added); needs the Debian package
# containernetworking-plugins on the host (scripts/install-deps.sh), whose binaries go into the VM.
set -u

CNI_DIR=/usr/lib/cni
EGRESS_MBIT=20 INGRESS_MBIT=10

# ================================= on the host ==========================================

if [ -z "${SHAPERCTL_VM:-}" ]; then
  here="$(cd "$(dirname "$0")" && pwd)"
  repo="$(cd "$here/.." && pwd)"
  out="$here/results" seconds=12 burst_ms=10 cni_bin="" ecn=debian
  for c in build/cni/shaperctl-cni build/cli/shaperctl-cni build/shaperctl-cni; do
    [ -x "$repo/$c" ] && { cni_bin="$repo/$c"; break; }
  done
  while [ $# -gt 0 ]; do
    case "$1" in
      --cni-bin) cni_bin="$2"; shift 2 ;;
      --burst-ms) burst_ms="$2"; shift 2 ;;
      --out) out="$2"; shift 2 ;;
      --seconds) seconds="$2"; shift 2 ;;
      --ecn) ecn="$2"; shift 2 ;;
      -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
      *) echo "usage: $0 [--cni-bin PATH] [--burst-ms MS] [--out DIR] [--seconds S] [--ecn debian|on]" >&2; exit 2 ;;
    esac
  done
  case "$ecn" in debian|on) ;; *) echo "cni: --ecn takes debian or on, not $ecn" >&2; exit 2 ;; esac
  case "$seconds$burst_ms" in ''|*[!0-9]*) echo "cni: --seconds and --burst-ms want whole numbers" >&2; exit 2 ;; esac
  for p in bridge host-local bandwidth; do
    [ -x "$CNI_DIR/$p" ] || { echo "cni: no $CNI_DIR/$p (containernetworking-plugins: scripts/install-deps.sh)" >&2; exit 2; }
  done
  for t in jq awk; do command -v $t >/dev/null || { echo "cni: $t missing (scripts/install-deps.sh)" >&2; exit 2; }; done
  set -- --bin "$CNI_DIR/bridge" --bin "$CNI_DIR/host-local" --bin "$CNI_DIR/bandwidth"
  if [ -n "$cni_bin" ]; then
    [ -x "$cni_bin" ] || { echo "cni: --cni-bin $cni_bin is not an executable" >&2; exit 2; }
    set -- "$@" --bin "$cni_bin"
  fi
  [ -x "$repo/build/cli/shaperctl" ] && set -- "$@" --bin "$repo/build/cli/shaperctl"
  mkdir -p "$out"
  tmp="$(mktemp -d "${TMPDIR:-/tmp}/shaperctl-cni-bench.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  trap 'exit 130' INT TERM HUP PIPE
  t0=$(date +%s)
  load0=$(cut -d' ' -f1-3 /proc/loadavg)
  echo "cni: booting the stock-kernel VM (host load $load0; shaperctl-cni: ${cni_bin:-none})"
  "$repo/vm/run.sh" --timeout 900 --module bridge "$@" \
    --file "$here/tcp-rows.sh:/usr/local/share/shaperctl-bench/tcp-rows.sh" \
    "$0" "$seconds" "$burst_ms" "$ecn" \
    2>&1 | tee "$tmp/console.txt" | grep --line-buffered -v '^@@CNI '
  rc=$(sed -n 's/^run.sh: scenario .* exited \([0-9]*\).*/\1/p' "$tmp/console.txt")
  grep '^@@CNI ' "$tmp/console.txt" | sed 's/^@@CNI //' >"$tmp/rows.jsonl"
  [ -s "$tmp/rows.jsonl" ] || { echo "cni: the VM returned no rows (status ${rc:-none})" >&2; exit 1; }
  cmdline="sudo bench/cni.sh${cni_bin:+ --cni-bin $cni_bin} --burst-ms $burst_ms --seconds $seconds --ecn $ecn"
  jq -s --argjson secs $(($(date +%s) - t0)) --arg load0 "$load0" --arg load1 "$(cut -d' ' -f1-3 /proc/loadavg)" \
     --arg commit "$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
     --arg date "$(date -u +%FT%TZ)" --arg ecn "$ecn" --arg status "${rc:-none}" --arg cmd "$cmdline" \
     --arg plugins "$(dpkg-query -W -f='${Package} ${Version}' containernetworking-plugins 2>/dev/null)" '
    { bench: "cni", date: $date, commit: $commit, command: $cmd, plugins_package: $plugins, ecn: $ecn,
      host_load_before: $load0, host_load_after: $load1, vm: (map(select(.meta)) | last | .meta),
      vm_status: $status, wall_seconds: $secs,
      method: {
        topology: "the VM root namespace is the host (bridge cni0, gateway 10.22.0.1), netns ctr the container (eth0 from host-local); iperf3 client with -R -P 4 on the receiving side",
        expected: "rate x 1448/1514", goodput: "receiver application bytes from 1 s to the last full 0.1 s interval, mean",
        retransmits: "the sending namespace: Tcp RetransSegs / OutSegs, delta over the row",
        ping: "iputils ping -i 0.05 from the host to the container, from 2 s after the flows start; p50/p99 nearest rank",
        goal: "goodput within 3 %, retransmits <= 1 % of segments, ping p99 <= 10 ms while the container downloads (ingress row)"
      },
      rows: map(select(.meta == null and .cleanup == null)), cleanup: map(select(.cleanup)) }' \
    "$tmp/rows.jsonl" >"$out/cni.json"
  {
    echo "# Pod bandwidth through CNI: the reference bandwidth plugin and shaperctl-cni"
    echo
    jq -r '"Run \(.date), commit \(.commit), \(.plugins_package), guest kernel \(.vm.kernel // "?") under qemu TCG (2 vCPUs), host load \(.host_load_before) → \(.host_load_after) (\(if ((.host_load_before | split(" ")[0] | tonumber) > 2) then "taken under load: the 2-core host is shared" else "a quiet host" end)), \(.wall_seconds) s wall, every row run once. Command: `\(.command)`. TCP ends: \(if (.ecn // "on") == "on" then "tcp_ecn=1 (ECN asked for: a bench condition, not Debian'"'"'s default)" else "tcp_ecn=2 (Debian'"'"'s default: no ECN asked for)" end)."' "$out/cni.json"
    echo
    jq -r '
      def f(d): if . == null then "–" else (. * pow(10; d) | round / pow(10; d) | tostring) end;
      def yn: if . == null then "–" elif . then "yes" else "**no**" end;
      "| plugin | direction | goodput (error) | retransmits | ping host → container p50 / p99 | meets goal (goodput, retrans, ping) |",
      "|---|---|---|---|---|---|",
      (.rows[] | if .available == false then "| \(.plugin) | container \(.direction), \(.rate_mbit) Mbit | not available: \(.not_available) | | | |"
        else "| \(.plugin) | container \(.direction), \(.rate_mbit) Mbit | \(.goodput_bps / 1e6 | f(2)) Mbit/s (\(.error_pct | f(1)) %)" +
          " | \(.retransmits) of \(.segments_out) (\(.retrans_pct | f(1)) %) | \(.ping.p50_ms | f(2)) / \(.ping.p99_ms | f(1)) ms\(if (.ping.lost // 0) > 0 then " (\(.ping.lost) lost)" else "" end)" +
          " | \(.meets.goodput | yn), \(.meets.retransmits | yn), \(if .direction == "ingress" then (.meets.ping | yn) else "–" end)\(if .failed then " **\(.failed)**" else "" end) |" end)' "$out/cni.json"
    echo
    jq -r '.cleanup[] | "After DEL (\(.plugin)): \(.left)."' "$out/cni.json"
    echo
    echo "Bursts: \`ingressBurst\`/\`egressBurst\` = $burst_ms ms of the rate, in bits. The conflist, runtimeConfig and every"
    echo "plugin invocation (environment and stdin) of each row are in cni.json (.rows[].commands)."
  } >"$out/cni.md"
  echo
  cat "$out/cni.md"
  echo "json: $out/cni.json   table: $out/cni.md   (VM status ${rc:-none})"
  [ "${rc:-1}" = 0 ]
  exit $?
fi

# ================================= in the VM =============================================
# busybox sh. The VM's root namespace is the host; netns ctr is the container.

. /usr/local/share/shaperctl-vm/lib.sh
. /usr/local/share/shaperctl-bench/tcp-rows.sh
SECS=$1 BURST_MS=$2 FLOWS=4 SKIP=1 PORT=5600
ECN_SYSCTL=2
[ "${3:-debian}" = on ] && ECN_SYSCTL=1
CNI_BINS=/usr/local/bin
mkdir -p /var/lib/cni
sysctl -qw net.ipv4.tcp_ecn=$ECN_SYSCTL net.ipv4.tcp_no_metrics_save=1
echo "@@CNI $(jq -n -c --arg k "$(uname -r)" --arg v "$("$CNI_BINS/bridge" 2>&1 </dev/null | head -n1)" \
  '{meta: {kernel: $k, bridge_plugin: $v}}')"

# The conflist a runtime would read from /etc/cni/net.d, with PLUGIN in the bandwidth slot.
conflist() {
  jq -n -c --arg p "$1" '{cniVersion: "1.0.0", name: "benchnet", plugins: [
    {type: "bridge", bridge: "cni0", isGateway: true, ipMasq: false,
     ipam: {type: "host-local", ranges: [[{subnet: "10.22.0.0/24"}]], dataDir: "/run/cni-ipam"}},
    {type: $p, capabilities: {bandwidth: true}}]}'
}
# The bandwidth capability a runtime passes for the pod's annotations (rates bits/s, bursts bits).
RUNTIME_BW=$(jq -n -c --argjson e $EGRESS_MBIT --argjson i $INGRESS_MBIT --argjson ms "$BURST_MS" \
  '{ingressRate: ($i * 1e6), ingressBurst: ($i * 1e3 * $ms), egressRate: ($e * 1e6), egressBurst: ($e * 1e3 * $ms)}')

# cni COMMAND CONTAINER INDEX PREV: runs plugin INDEX of $CONFLIST for CONTAINER as libcni does:
# the plugin's entry + cniVersion + name (+ runtimeConfig for the capabilities it declares)
# (+ prevResult) on stdin, the CNI_* variables in its environment. Its stdout in /tmp/cni.out.
cni() {
  local _conf _type
  _conf=$(echo "$CONFLIST" | jq -c --argjson i "$3" --argjson prev "$4" --argjson bw "$RUNTIME_BW" '
    .plugins[$i] + {cniVersion, name}
    | if .capabilities.bandwidth then . + {runtimeConfig: {bandwidth: $bw}} | del(.capabilities) else . end
    | if $prev != null then . + {prevResult: $prev} else . end')
  _type=$(echo "$_conf" | jq -r .type)
  CMDS="${CMDS}CNI_COMMAND=$1 CNI_CONTAINERID=$2 CNI_NETNS=/run/netns/$2 CNI_IFNAME=eth0 CNI_PATH=$CNI_BINS $CNI_BINS/$_type <<< '$_conf'
"
  if [ ! -x "$CNI_BINS/$_type" ]; then
    echo "{\"code\": 1, \"msg\": \"no $_type in CNI_PATH $CNI_BINS\"}" >/tmp/cni.out
    return 1
  fi
  echo "$_conf" | env CNI_COMMAND="$1" CNI_CONTAINERID="$2" CNI_NETNS="/run/netns/$2" CNI_IFNAME=eth0 \
    CNI_PATH="$CNI_BINS" "$CNI_BINS/$_type" >/tmp/cni.out 2>/tmp/cni.err
}

# direction ROW_PLUGIN DIRECTION MBIT CTR: 4 flows through one direction of the shaping, a ping
# from the host meanwhile, one "@@CNI {json}" row.
direction() {
  local _plugin=$1 _dir=$2 _mbit=$3 _ctr=$4 _err _out _srv _snd _rcv _cli _srvip _s0 _s1 _r0 _r1 _m _pings _t0 _c
  PORT=$((PORT + 1))
  _t0=$(uptime_s)
  _pings=$((SECS * 20 - 60))
  [ "$_pings" -ge 20 ] || _pings=20
  _out="/tmp/$_plugin-$_dir.json"
  # The receiver runs the iperf3 client with -R: container egress, the host receives.
  if [ "$_dir" = egress ]; then _snd=$_ctr _rcv="" _srvip=$CTR_IP; else _snd="" _rcv=$_ctr _srvip=10.22.0.1; fi
  TRAFFIC="${_snd:+ip netns exec $_snd }iperf3 -s -1 -p $PORT
${_rcv:+ip netns exec $_rcv }iperf3 -c $_srvip -p $PORT -R -J -P $FLOWS -t $SECS -i 0.1
ping -n -i 0.05 -c $_pings $CTR_IP   (2 s after the flows start)
"
  if [ -n "$_snd" ]; then nsx "$_snd" "$IPERF3" -s -1 -p $PORT >/tmp/srv.log 2>&1 &
  else "$IPERF3" -s -1 -p $PORT >/tmp/srv.log 2>&1 & fi
  _srv=$!
  if [ -n "$_snd" ]; then wait_listen "$_snd" $PORT; else sleep 1; fi
  _s0=$(mibs "$_snd") _r0=$(mibs "$_rcv")
  if [ -n "$_rcv" ]; then _cli="$IP netns exec $_rcv $IPERF3"; else _cli=$IPERF3; fi
  # shellcheck disable=SC2086
  timeout $((SECS + 90)) $_cli -c "$_srvip" -p $PORT -R -J -P $FLOWS -t "$SECS" -i 0.1 >"$_out" 2>"$_out.err" &
  _cli=$!
  sleep 2
  "$PING" -n -i 0.05 -c $_pings -W 2 "$CTR_IP" >"/tmp/$_plugin-$_dir.ping" 2>&1
  wait $_cli
  _s1=$(mibs "$_snd") _r1=$(mibs "$_rcv")
  kill $_srv 2>/dev/null
  wait $_srv 2>/dev/null
  _err=$(iperf_error "$_out")
  [ -z "$_err" ] || FAILED="${FAILED}iperf3: $_err; "
  jq -e .start "$_out" >/dev/null 2>&1 || echo '{}' >"$_out"
  _m=$(tcp_row "$_out" "$_mbit" $SKIP "$_s0" "$_s1" "$_r0" "$_r1")
  # shaperctl's class of the direction (the container's egress is the host veth's receive side):
  # its drops by cause and marks, to tell which mechanism cost the retransmits.
  _c=null
  if [ "$_plugin" = shaperctl ] && [ -n "$HOST_VETH" ]; then
    _c=$(shaperctl status --dev "$HOST_VETH" $([ "$_dir" = egress ] && echo --ingress) --json --sample 0 2>/dev/null |
      jq -c '.classes[0] // null' 2>/dev/null)
    [ -n "$_c" ] || _c=null
  fi
  jq -n -c --arg plugin "$_plugin" --arg dir "$_dir" --argjson mbit "$_mbit" --argjson m "${_m:-null}" \
    --argjson counters "$_c" \
    --argjson ping "$(ping_summary "/tmp/$_plugin-$_dir.ping" $_pings)" --arg cmds "$CMDS" \
    --arg traffic "$TRAFFIC" --arg failed "$FAILED" --argjson wall "$(elapsed_since "$_t0")" \
    --argjson shaping "$SHAPING" '
    {plugin: $plugin, direction: $dir, rate_mbit: $mbit, available: true} + $m
    + {ping: $ping, shaping_after_add: $shaping, shaper_counters: $counters,
       meets: (if $m.goodput_bps == null then null else
         {goodput: (($m.error_pct | fabs) <= 3), retransmits: ($m.retrans_pct != null and $m.retrans_pct <= 1),
          ping: ($ping.p99_ms != null and $ping.p99_ms <= 10)} end),
       wall_seconds: $wall, commands: ($cmds | split("\n") | map(select(length > 0))),
       traffic: ($traffic | split("\n") | map(select(length > 0))),
       failed: (if $failed == "" then null else $failed end)}' >/tmp/row.json 2>/tmp/jq.err ||
    { echo "  ! could not build the row: $(head -c 300 /tmp/jq.err)" >&2; return; }
  echo "@@CNI $(cat /tmp/row.json)"
  jq -r '"  \(.plugin), container \(.direction) \(.rate_mbit) Mbit: " + if .goodput_bps == null then "no result \(.failed // "")" else
    "\(.goodput_bps / 1e4 | round / 100) Mbit/s (\(.error_pct * 10 | round / 10) %), retrans \(.retransmits) (\(.retrans_pct * 10 | round / 10) %), ping p99 \(.ping.p99_ms) ms, \(.wall_seconds | round) s" end' /tmp/row.json
}

# run PLUGIN_KEY TYPE: ADD the chain for a fresh container, both directions, DEL, and what DEL left.
run() {
  local _key=$1 _type=$2 _ctr="ctr-$1" _prev _left _d _mbit
  CMDS="" FAILED=""
  CONFLIST=$(conflist "$_type")
  CMDS="conflist: $CONFLIST
"
  new_ns "$_ctr"
  nsx "$_ctr" sysctl -qw net.ipv4.tcp_ecn=$ECN_SYSCTL net.ipv4.tcp_no_metrics_save=1
  if ! cni ADD "$_ctr" 0 null; then
    echo "  ! bridge ADD failed: $(cat /tmp/cni.out /tmp/cni.err | head -c 300)" >&2
    FAILED="bridge ADD failed: $(cat /tmp/cni.out | head -c 200)"
  fi
  _prev=$(jq -c . /tmp/cni.out 2>/dev/null || echo null)
  CTR_IP=$(echo "$_prev" | jq -r '.ips[0].address // empty' 2>/dev/null | cut -d/ -f1)
  HOST_VETH=$(echo "$_prev" | jq -r '[.interfaces[]? | select(.sandbox == null and .name != "cni0") | .name][0] // empty' 2>/dev/null)
  if [ -z "$FAILED" ] && ! cni ADD "$_ctr" 1 "$_prev"; then
    _left="$(jq -r '.msg // empty' /tmp/cni.out 2>/dev/null | head -c 200)"
    [ -n "$_left" ] || _left="$(head -c 200 /tmp/cni.out /tmp/cni.err | tr '\n' ' ')"
    for _d in egress ingress; do
      [ $_d = egress ] && _mbit=$EGRESS_MBIT || _mbit=$INGRESS_MBIT
      jq -n -c --arg p "$_key" --arg d "$_d" --argjson mbit "$_mbit" --arg why "$_type ADD: $_left" --arg cmds "$CMDS" \
        '{plugin: $p, direction: $d, rate_mbit: $mbit, available: false, not_available: $why,
          commands: ($cmds | split("\n") | map(select(length > 0)))}' | sed 's/^/@@CNI /'
    done
    echo "  $_key: not available ($_type ADD: $_left)"
  elif [ -n "$FAILED" ]; then
    echo "  ! $_key: $FAILED" >&2
  else
    SHAPING=$(jq -n -c --arg q "$(tc qdisc show | grep -v 'qdisc noqueue' | tr -s ' ')" \
      --arg l "$(ip -br link show | tr -s ' ')" '{qdiscs: ($q | split("\n")), links: ($l | split("\n"))}')
    direction "$_key" egress $EGRESS_MBIT "$_ctr"
    direction "$_key" ingress $INGRESS_MBIT "$_ctr"
  fi
  # DEL in reverse order, each with the ADD result as prevResult (as libcni does); a plugin that
  # is not there has nothing to delete.
  [ ! -x "$CNI_BINS/$_type" ] || cni DEL "$_ctr" 1 "$_prev" || echo "  ! $_type DEL: $(head -c 200 /tmp/cni.out /tmp/cni.err)" >&2
  cni DEL "$_ctr" 0 null || echo "  ! bridge DEL: $(head -c 200 /tmp/cni.out /tmp/cni.err)" >&2
  # (the ifb module makes ifb0 and ifb1 at load: not the plugin's)
  _left="$(ip -br link show type ifb | grep -Ev '^ifb[01] ' | tr -s ' ' | tr '\n' ';')$(tc qdisc show | grep -v 'qdisc noqueue' | tr -s ' ' | tr '\n' ';')"
  [ -z "$(ls -A /sys/fs/bpf/shaperctl 2>/dev/null)" ] || _left="$_left pins: $(ls /sys/fs/bpf/shaperctl | tr '\n' ' ')"
  [ -n "$_left" ] || _left="no ifb, no qdisc but the defaults, no shaperctl pin"
  jq -n -c --arg p "$_key" --arg l "$_left" '{cleanup: true, plugin: $p, left: $l}' | sed 's/^/@@CNI /'
  ip netns del "$_ctr"
  ip link del cni0 2>/dev/null
}

echo "== reference: bridge + host-local + bandwidth (container egress $EGRESS_MBIT Mbit, ingress $INGRESS_MBIT Mbit, $FLOWS flows, $SECS s each)"
run reference bandwidth
echo "== shaperctl: bridge + host-local + shaperctl-cni"
run shaperctl shaperctl-cni
exit 0
