#!/usr/bin/env bash
# The Debian package as an operator meets it: lintian (no error), then in a throw-away container
# booting this host's system (overlays on it, so nothing reaches the host) with systemd:
# dpkg -i, the units enabled and the exporter serving, doctor, shaperctl.service applying a file
# once one exists, dpkg --purge stopping the units (the devices detached), and the system's
# files afterwards as they were before the install. Needs root, systemd-nspawn and lintian.
#
# usage: packaging/check-deb.sh [BUILD_DIR]    (default: build; scripts/package.sh makes the .deb)
# Exit status 0 when every check passed; the container's log is printed either way.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"
[ "$(id -u)" = 0 ] || { echo "check-deb: needs root" >&2; exit 2; }
command -v lintian >/dev/null || { echo "check-deb: lintian missing (scripts/install-deps.sh)" >&2; exit 2; }

# shellcheck source=boot-check.sh
. "$repo/packaging/boot-check.sh"
tmp="$(mktemp -d /tmp/shaperctl-deb-check.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/check" "$tmp/out" "$tmp/deb"
deb="$(bash "$repo/scripts/package.sh" "$build" "$tmp/deb")"
fails=0
# lintian: every tag is printed; an error fails the check.
lintian --tag-display-limit 0 "$deb" > "$tmp/lintian.txt" 2>&1 || true
sed 's/^/lintian: /' "$tmp/lintian.txt"
if grep -q '^E:' "$tmp/lintian.txt"; then echo "FAIL lintian reports errors"; fails=$((fails + 1)); else echo "ok   lintian: no error"; fi

cat > "$tmp/checks" <<'EOF'
deb=$(ls /deb/*.deb)
# The maintainer scripts start and stop units through deb-systemd-invoke, which asks policy-rc.d
# first; an image built by Docker has one forbidding both (exit 101), as this host does. A
# machine as Debian installs it has none: so here (the overlay) neither.
if [ -e /usr/sbin/policy-rc.d ]; then
  echo "note: /usr/sbin/policy-rc.d removed in the container: services start and stop as on Debian"
  rm -f /usr/sbin/policy-rc.d
fi
# The package's files (/lib is /usr/lib here): checked apart, since a copy installed by hand
# before is the package's once dpkg has replaced it.
dpkg-deb -c "$deb" | awk '{print $NF}' | sed 's|^\./|/|; s|/$||' | grep . | sort -u > /tmp/shipped
sed -n 's|^/lib/|/usr/lib/|p' /tmp/shipped >> /tmp/shipped
# What the system holds, but the package's files and what a package manager and a running
# system change by themselves (and the directory deb-systemd-helper keeps masks in).
files() { find /usr /etc /lib /var/lib /opt -xdev 2>/dev/null |
  grep -Ev '^/var/lib/(dpkg|systemd/(timers|catalog|coredump|random-seed|journal))|^/etc/(ld.so.cache|machine-id)$' |
  grep -vx '/var/lib/systemd/deb-systemd-helper-masked' | grep -vxFf /tmp/shipped | sort; }
files > /tmp/before
check "dpkg -i $(basename "$deb")" dpkg -i "$deb"
check "shaperctl --help" /usr/sbin/shaperctl --help
check "shaperctl-cni answers VERSION" sh -c 'echo "{\"cniVersion\":\"1.0.0\"}" | CNI_COMMAND=VERSION /usr/lib/cni/shaperctl-cni | grep -q supportedVersions'
check "man page and completion in place" test -s /usr/share/man/man8/shaperctl.8.gz -a -s /usr/share/bash-completion/completions/shaperctl
check "both units enabled" sh -c 'systemctl is-enabled shaperctl.service shaperctl-exporter.service | grep -vx enabled | wc -l | grep -qx 0'
check "the exporter started, serving metrics" sh -c 'for i in $(seq 50); do curl -sf 127.0.0.1:9464/metrics | grep -q "^# HELP shaperctl_" && exit 0; sleep 0.2; done; exit 1'
check "shaperctl.service waits for its file (condition unmet, not failed)" sh -c '! systemctl is-failed -q shaperctl.service'
shaperctl doctor > /tmp/doctor.txt 2>&1; rc=$?
check "doctor runs (exit $rc: 0 all ok, 1 a finding failed)" sh -c "[ $rc -le 1 ] && grep -q kernel /tmp/doctor.txt"
sed 's/^/doctor: /' /tmp/doctor.txt | head -30
ip link add sh0 type veth peer name sh1 && ip link set sh0 up && ip link set sh1 up
mkdir -p /etc/shaperctl
printf '%s\n' '{"version": 1, "devices": [{"device": "sh0", "mode": "police", "classes": [{"id": 1, "rate": "10mbit"}], "default_class": 1}]}' > /etc/shaperctl/config.json
check "shaperctl.service starts once the file exists (apply)" systemctl start shaperctl.service
check "... the class is there" sh -c "shaperctl status --dev sh0 --sample 0 | grep -q '^1 .*10mbit'"
systemctl is-failed -q shaperctl.service && journalctl -u shaperctl --no-pager | tail -5 | sed 's/^/journal: /'
check "dpkg --purge shaperctl" dpkg --purge shaperctl
check "... stopped the units: the device detached" sh -c '! tc filter show dev sh0 egress | grep -q bpf && ! systemctl is-active -q shaperctl-exporter.service'
ip link del sh0
rm -rf /etc/shaperctl  # the administrator's file, which a purge leaves
files > /tmp/after
check "... the system's files as before the install" diff /tmp/before /tmp/after
check "... no file the package shipped is left" sh -c 'while read -r f; do [ -d "$f" ] || [ ! -e "$f" ] || echo "$f"; done < /tmp/shipped | grep . && exit 1; exit 0'
[ "$fails" = 0 ] && echo CHECK-OK || echo "CHECK-FAILED ($fails)"
EOF

# The root is a tmpfs; /usr, /etc and /var are the host's under overlays whose upper layers are
# temporary (nspawn refuses an overlay of / itself): dpkg writes there, the host sees nothing.
boot_check "$tmp" "$tmp/checks" --volatile=yes --overlay=/usr::/usr --overlay=/etc::/etc --overlay=/var::/var \
  --private-network --bind=/sys/fs/bpf --bind-ro="$tmp/deb":/deb && [ $fails = 0 ]
