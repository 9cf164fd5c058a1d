#!/usr/bin/env bash
# packaging/kubernetes/install-cni.sh against conflists as the network plugins write them
# (tests/cni/conflists: Debian's podman, containerd's example, Flannel, k3s's Flannel with
# bandwidth, Calico with bandwidth, static bandwidth rates, a single-plugin .conf). For each:
# install chains shaperctl-cni once (in place of bandwidth, keeping its keys, else last), a second
# install changes no byte, uninstall restores the bytes it found; after the network plugin
# rewrote the file, uninstall takes the entry out of the new file and puts bandwidth back; a
# plugin dropped by a rewrite is chained again by watch. Refusals change nothing: a single-plugin
# .conf, a file that is not JSON, a plugin that cannot run on the host, bad options. The
# DaemonSet's manifest is checked against the API's fields (check-manifest.py).
#
#   tests/cni/install-test.sh [SHAPERCTL_CNI]      (CTest: cni_install; the real plugin for one
#                                                    case, a stand-in script for the rest)
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
script="$here/../../packaging/kubernetes/install-cni.sh"
fixtures="$here/conflists"
real=${1:-}
command -v jq >/dev/null || { echo "install-test: jq missing (scripts/install-deps.sh)"; exit 2; }
T=$(mktemp -d "${TMPDIR:-/tmp}/shaperctl-install-test.XXXXXX")
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$T"' EXIT
passed=0 failed=0
check() {  # check NAME TEXT CONDITION...
  local n=$1 t=$2; shift 2
  if "$@"; then passed=$((passed + 1)); echo "PASS $n: $t"; else failed=$((failed + 1)); echo "FAIL $n: $t"; fi
}

# A plugin that answers VERSION as shaperctl-cni does, and one that cannot run on this host.
printf '#!/bin/sh\ncat >/dev/null\n[ "$CNI_COMMAND" = VERSION ] && echo %s\n' \
  "'{\"cniVersion\":\"1.0.0\",\"supportedVersions\":[\"0.3.1\",\"0.4.0\",\"1.0.0\"]}'" > "$T/plugin"
printf '#!/bin/sh\necho "shaperctl-cni: error while loading shared libraries: libbpf.so.1" >&2\nexit 127\n' > "$T/broken"
chmod +x "$T/plugin" "$T/broken"

# fresh FILE...: an empty bin dir and a conf dir holding FILE... (from the fixtures).
fresh() {
  rm -rf "$T/bin" "$T/net.d" && mkdir -p "$T/bin" "$T/net.d"
  local f; for f in "$@"; do cp "$fixtures/$f" "$T/net.d/"; done
  rm -rf "$T/before" && cp -a "$T/net.d" "$T/before"  # what it held, to compare with
}
run() {  # run VERB [options]: the script on $T's dirs; output in $T/out, status in $rc
  local verb=$1; shift
  "$script" "$verb" --bin-dir "$T/bin" --conf-dir "$T/net.d" --plugin "${PLUGIN:-$T/plugin}" "$@" >"$T/out" 2>&1
  rc=$?
}
unchanged() { diff -r "$T/before" "$T/net.d" >/dev/null && [ -z "$(ls -A "$T/bin")" ]; }
entries() { jq -c "[.plugins[] | select(.type == \"$2\")] | length" "$1"; }
others_kept() {  # the entries other than bandwidth/shaperctl-cni, in order, as they were
  [ "$(jq -cS '[.plugins[] | select(.type != "bandwidth")]' "$1")" = \
    "$(jq -cS '[.plugins[] | select(.type != "shaperctl-cni")]' "$2")" ]
}
placed() {  # shaperctl-cni where bandwidth was (its keys kept), else last with the capability
  local orig=$1 now=$2 want
  if [ "$(entries "$orig" bandwidth)" -gt 0 ]; then
    want=$(jq -cS '.plugins | map(.type == "bandwidth") | index(true)' "$orig")
    [ "$(jq -cS --argjson i "$want" '.plugins[$i] | del(.type)' "$now")" = \
      "$(jq -cS --argjson i "$want" '.plugins[$i] | del(.type)' "$orig")" ] &&
      jq -e --argjson i "$want" '.plugins[$i].type == "shaperctl-cni"' "$now" >/dev/null
  else
    jq -e '.plugins[-1] | .type == "shaperctl-cni" and .capabilities.bandwidth' "$now" >/dev/null
  fi
}

for f in 87-podman-bridge.conflist 10-containerd-net.conflist 10-flannel.conflist \
         10-k3s-flannel.conflist 10-calico.conflist 20-static-bandwidth.conflist; do
  fresh "$f"
  c="$T/net.d/$f" o="$fixtures/$f"
  run install
  check "$f-install" "$(head -n 1 "$T/out")" [ "$rc" = 0 ]
  check "$f-chained" "one shaperctl-cni, no bandwidth left, the other entries as they were" \
    eval '[ "$(entries "$c" shaperctl-cni)" = 1 ] && [ "$(entries "$c" bandwidth)" = 0 ] && others_kept "$o" "$c"'
  check "$f-placed" "in place of bandwidth with its keys, else last with the bandwidth capability" placed "$o" "$c"
  check "$f-plugin" "the plugin in the bin dir, executable" [ -x "$T/bin/shaperctl-cni" ]
  cp -a "$T/net.d" "$T/once"
  run install
  check "$f-idempotent" "a second install changes no byte, says nothing" \
    eval '[ "$rc" = 0 ] && diff -r "$T/once" "$T/net.d" >/dev/null && [ ! -s "$T/out" ]'
  rm -rf "$T/once"
  run uninstall
  check "$f-uninstall" "the bytes found restored, no state left, the plugin removed" \
    eval '[ "$rc" = 0 ] && unchanged'
  # The network plugin rewrites its conflist (reformatted, one value changed) after the chaining.
  run install
  jq -S '.name = "rewritten"' "$c" > "$T/new" && mv "$T/new" "$c"
  run uninstall
  check "$f-uninstall-rewritten" "the entry out of the rewritten file, bandwidth back where it was" \
    eval '[ "$rc" = 0 ] && [ "$(jq -cS . "$c")" = "$(jq -cS ".name = \"rewritten\"" "$o")" ] && [ ! -e "$T/bin/shaperctl-cni" ] && [ -z "$(ls -A "$T/net.d" | grep -v "^$f$")" ]'
done

# The runtime loads the first file by name: only that one is chained.
fresh 10-flannel.conflist 87-podman-bridge.conflist
run install
check first-file "10-flannel.conflist chained, 87-podman-bridge.conflist untouched" \
  eval '[ "$(entries "$T/net.d/10-flannel.conflist" shaperctl-cni)" = 1 ] && cmp -s "$T/net.d/87-podman-bridge.conflist" "$fixtures/87-podman-bridge.conflist"'
run install --conflist 87-podman-bridge.conflist
check named-file "--conflist chains the named one" [ "$(entries "$T/net.d/87-podman-bridge.conflist" shaperctl-cni)" = 1 ]
run uninstall
check uninstall-all "uninstall restores both" eval '[ "$rc" = 0 ] && unchanged'

# Refusals: one line naming the problem, non-zero, nothing changed.
fresh 10-single.conf
run install
check single-conf "$(cat "$T/out")" eval '[ "$rc" != 0 ] && grep -q "single-plugin" "$T/out" && [ "$(wc -l < "$T/out")" = 1 ] && unchanged'
fresh; echo '{"cniVersion": "1.0.0", "plugins": [' > "$T/net.d/05-cut.conflist"; rm -rf "$T/before"; cp -a "$T/net.d" "$T/before"
run install
check not-json "$(cat "$T/out")" eval '[ "$rc" != 0 ] && grep -q "not a JSON object" "$T/out" && unchanged'
fresh
run install
check no-conflist "$(cat "$T/out")" eval '[ "$rc" = 3 ] && unchanged'
fresh 10-calico.conflist
PLUGIN=$T/broken run install
check plugin-cannot-run "$(cut -c1-160 "$T/out")" \
  eval '[ "$rc" != 0 ] && grep -q "does not run on this host" "$T/out" && grep -q libbpf "$T/out" && [ "$(wc -l < "$T/out")" = 1 ] && unchanged'
for bad in "--interval 0" "--interval x" "--conflist a/b" "--bogus" "--plugin"; do
  fresh 10-calico.conflist
  # shellcheck disable=SC2086
  run install $bad
  check "refused $bad" "$(cat "$T/out")" eval '[ "$rc" != 0 ] && [ "$(wc -l < "$T/out")" = 1 ] && unchanged'
done
"$script" chain >"$T/out" 2>&1; rc=$?
check unknown-verb "$(cat "$T/out")" [ "$rc" != 0 ]

# An entry someone else put there is left alone, with the plugin it needs.
fresh 10-flannel.conflist
jq '.plugins += [{type: "shaperctl-cni"}]' "$fixtures/10-flannel.conflist" > "$T/net.d/10-flannel.conflist"
cp "$T/plugin" "$T/bin/shaperctl-cni"; rm -rf "$T/before"; cp -a "$T/net.d" "$T/before"
run install
check foreign-entry-install "already chained: nothing changed" eval '[ "$rc" = 0 ] && diff -r "$T/before" "$T/net.d" >/dev/null'
run uninstall
check foreign-entry-uninstall "$(cat "$T/out")" eval 'diff -r "$T/before" "$T/net.d" >/dev/null && [ -x "$T/bin/shaperctl-cni" ]'

# watch: a rewrite that drops the entry is chained again; SIGTERM leaves it chained unless told.
waitfor() { local i; for i in $(seq 300); do eval "$1" && return 0; sleep 0.1; done; return 1; }
for mode in keep remove; do
  fresh 10-calico.conflist
  extra=(); [ $mode = keep ] || extra=(--uninstall-on-exit)
  "$script" watch --interval 1 --bin-dir "$T/bin" --conf-dir "$T/net.d" --plugin "$T/plugin" "${extra[@]}" >"$T/watch" 2>&1 &
  w=$!
  waitfor '[ "$(entries "$T/net.d/10-calico.conflist" shaperctl-cni 2>/dev/null)" = 1 ]'
  cp "$fixtures/10-calico.conflist" "$T/net.d/10-calico.conflist"  # Calico writes its file again
  check "watch-$mode-rechains" "chained again after the rewrite" \
    waitfor '[ "$(entries "$T/net.d/10-calico.conflist" shaperctl-cni 2>/dev/null)" = 1 ]'
  kill -TERM $w; wait $w; rc=$?
  if [ $mode = keep ]; then
    check watch-term-keeps "SIGTERM: exit 0, still chained" eval '[ "$rc" = 0 ] && [ "$(entries "$T/net.d/10-calico.conflist" shaperctl-cni)" = 1 ]'
  else
    check watch-term-uninstalls "SIGTERM with --uninstall-on-exit: exit 0, as found" eval '[ "$rc" = 0 ] && unchanged'
  fi
done

# The DaemonSet's manifest: valid for the API (tests/cni/check-manifest.py), and a broken copy of
# each kind refused.
manifest="$here/../../packaging/kubernetes/shaperctl-cni.yaml"
validate() { python3 "$here/check-manifest.py" "$1" "$here/daemonset-fields.schema.json" "$script" >"$T/out" 2>&1; rc=$?; }
validate "$manifest"
check manifest "$(cat "$T/out")" [ $rc = 0 ]
for broken in 's/hostNetwork:/hostNetwrok:/' 's/readOnly: true/readOnly: "yes"/' \
              '0,/^        app.kubernetes.io\/name: shaperctl-cni/s//        app.kubernetes.io\/name: other/' \
              '0,/- name: cni-conf$/s//- name: cni-confs/' 's/- --plugin/- --plugn/' 's/type: DirectoryOrCreate/type: Dir/'; do
  sed "$broken" "$manifest" > "$T/broken.yaml"
  validate "$T/broken.yaml"
  check "manifest-broken" "$broken: $(head -n 1 "$T/out")" [ $rc != 0 ]
done

# The real plugin answers VERSION in the host's root.
if [ -n "$real" ]; then
  fresh 10-containerd-net.conflist
  PLUGIN=$real run install
  check real-plugin "$(head -n 1 "$T/out")" eval '[ "$rc" = 0 ] && [ "$(entries "$T/net.d/10-containerd-net.conflist" shaperctl-cni)" = 1 ]'
  PLUGIN=$real run uninstall
  check real-plugin-uninstall "as found" eval '[ "$rc" = 0 ] && unchanged'
fi
echo "install-test: $passed passed, $failed failed"
[ "$failed" = 0 ]
