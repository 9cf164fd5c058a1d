#!/usr/bin/env bash
# Runs the installed systemd units under a real systemd: boots this host's /usr in a
# systemd-nspawn container (its own network namespace, the host's bpffs bound in), installs the
# build there, and checks shaperctl.service (apply on start, reload, detach on stop) and
# shaperctl-exporter.service (its own user, three capabilities, metrics served) with every
# hardening option of the units in force. Needs root and systemd-nspawn (systemd-container).
#
# usage: packaging/check-units.sh [BUILD_DIR]      (default: build)
# Exit status 0 when every check passed; the container's log is printed either way.
set -euo pipefail

build="$(cd "${1:-build}" && pwd)"
source="$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null)"
command -v systemd-nspawn >/dev/null || { echo "check-units: systemd-nspawn missing (apt install systemd-container)" >&2; exit 2; }
[ -x "$build/cli/shaperctl" ] && [ -d "$source" ] || { echo "check-units: no build in $build" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "check-units: needs root" >&2; exit 2; }

# shellcheck source=boot-check.sh
. "$(dirname "$0")/boot-check.sh"
tmp="$(mktemp -d /tmp/shaperctl-units.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/check" "$tmp/out"
echo "$build" > "$tmp/out/build"

cat > "$tmp/checks" <<'EOF'
stat -Lc %i /proc/self/ns/net > /out/netns
# /usr is the host's, read-only: the install goes to a tmpfs on /usr/local (units included).
mount -t tmpfs tmpfs /usr/local
cmake --install "$(cat /out/build)" --prefix /usr/local >/dev/null 2>&1  # no manifest (read-only): fine
ip link add sh0 type veth peer name sh1 && ip link set sh0 up && ip link set sh1 up && ip link set lo up
mkdir -p /etc/shaperctl
cat > /etc/shaperctl/config.json <<'J'
{"version": 1, "devices": [{"device": "sh0", "mode": "police",
  "classes": [{"id": 1, "rate": "10mbit"}], "rules": [{"pref": 10, "class": 1, "dport": "80"}],
  "default_class": 1}]}
J
systemctl daemon-reload
B=/usr/local/sbin/shaperctl
check "shaperctl.service starts (apply)" systemctl start shaperctl
check "the class is there" sh -c "$B status --dev sh0 --sample 0 | grep -q '^1 .*10mbit'"
check "reload applies nothing new" sh -c "systemctl reload shaperctl && journalctl -u shaperctl | grep -q 'no changes'"
check "the unit recognised its program (CAP_SYS_ADMIN)" sh -c "$B attach --dev sh0 --mode police | grep -q 'nothing changed'"
check "shaperctl-exporter.service starts" systemctl start shaperctl-exporter
sleep 1
pid=$(systemctl show -p MainPID --value shaperctl-exporter)
check "the exporter runs as a user of its own" sh -c "! grep -q '^Uid:.0' /proc/$pid/status"
check "the exporter keeps CAP_BPF, CAP_NET_ADMIN, CAP_DAC_OVERRIDE" grep -q '^CapEff:.0000008000001002' /proc/$pid/status
check "the exporter has no_new_privs" grep -q '^NoNewPrivs:.1' /proc/$pid/status
check "the exporter serves the device" sh -c "curl -s 127.0.0.1:9464/metrics | grep -q 'shaperctl_device_up{device=\"sh0\"} 1'"
check "shaperctl-exporter.service stops" systemctl stop shaperctl-exporter
check "shaperctl.service stops (detach)" systemctl stop shaperctl
check "detach removed the filter" sh -c "! tc filter show dev sh0 egress | grep -q bpf"
check "detach removed the pins" sh -c "! ls /sys/fs/bpf/shaperctl/ns\$(cat /out/netns) 2>/dev/null"
$B detach --dev sh0 >/dev/null 2>&1  # whatever failed, no pins stay behind in the host's bpffs
systemd-analyze security shaperctl shaperctl-exporter --no-pager | tail -3
journalctl -u shaperctl -u shaperctl-exporter --no-pager | tail -20 | sed 's/^/journal: /'
[ "$fails" = 0 ] && echo CHECK-OK || echo "CHECK-FAILED ($fails)"
EOF

boot_check "$tmp" "$tmp/checks" --volatile=yes --private-network --bind=/sys/fs/bpf \
  --bind-ro="$build" --bind-ro="$source"
