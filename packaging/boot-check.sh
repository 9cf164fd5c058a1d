# shellcheck shell=bash
# Checks run inside a systemd-nspawn container booting this host's system under systemd, for
# packaging/check-units.sh and packaging/check-deb.sh (sourced): the unit that runs the checks
# and powers off, the check() they call, the boot, and its log.
#
# boot_check TMP SCRIPT NSPAWN_OPTION...: boots with SCRIPT as /check/check.sh, after `check
# DESCRIPTION COMMAND...` (runs it, says ok or FAIL, counts $fails) and with /out bound to
# TMP/out; prints SCRIPT's output; 0 when it printed CHECK-OK.
boot_check() {
  local tmp=$1 script=$2
  shift 2
  mkdir -p "$tmp/check" "$tmp/out"
  cat > "$tmp/check.service" <<'UNIT'
[Unit]
After=basic.target
[Service]
Type=oneshot
ExecStart=/bin/bash /check/check.sh
StandardOutput=file:/out/check.log
StandardError=inherit
ExecStopPost=/bin/systemctl --no-block poweroff
UNIT
  cat > "$tmp/check.target" <<'UNIT'
[Unit]
Requires=check.service basic.target
After=check.service
UNIT
  {
    cat <<'HEAD'
#!/bin/bash
exec 2>&1
fails=0
check() {  # check DESCRIPTION COMMAND...: runs it, says ok or FAIL
  if out=$("${@:2}" 2>&1); then echo "ok   $1"; else echo "FAIL $1"; echo "$out" | sed 's/^/     /'; fails=$((fails + 1)); fi
}
HEAD
    cat "$script"
  } > "$tmp/check/check.sh"
  # The containers bind the host's /sys/fs/bpf. A Debian host booted by systemd has bpffs
  # mounted there; a machine that was not (a CI container) may not have it until a shaperctl
  # attach mounts it, and the units, sandboxed, cannot mount it themselves: mount it as boot would.
  [ "$(stat -f -c %T /sys/fs/bpf 2>/dev/null)" = bpf_fs ] || mount -t bpf bpf /sys/fs/bpf
  # nspawn's own seccomp filter refuses bpf() program loads: off, the units' filters apply.
  SYSTEMD_SECCOMP=0 timeout 600 systemd-nspawn -D / "$@" --register=no --keep-unit -M "shaperctl-check-$$" \
    --capability=all --bind-ro="$tmp/check":/check --bind="$tmp/out":/out \
    --bind-ro="$tmp/check.service":/etc/systemd/system/check.service \
    --bind-ro="$tmp/check.target":/etc/systemd/system/check.target \
    -b systemd.unit=check.target systemd.firstboot=off >"$tmp/boot.log" 2>&1 || true
  if [ ! -s "$tmp/out/check.log" ]; then
    echo "$(basename "$0"): the container did not run the checks; its console:" >&2
    tail -30 "$tmp/boot.log" >&2
    return 1
  fi
  cat "$tmp/out/check.log"
  grep -q '^CHECK-OK' "$tmp/out/check.log"
}
