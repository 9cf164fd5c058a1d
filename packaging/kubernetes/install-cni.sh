#!/usr/bin/env bash
# Puts shaperctl-cni on a node and into the node's CNI chain, and takes it out again; what the
# DaemonSet's container runs (packaging/kubernetes/shaperctl-cni.yaml), usable by hand as well.
#
# usage: install-cni.sh install|uninstall|watch [--host-root R] [--bin-dir D] [--conf-dir C]
#          [--conflist NAME] [--plugin PATH] [--interval S] [--uninstall-on-exit]
#   install    copy the plugin into the host's CNI bin dir, check that it runs there, and chain
#              it into the network's conflist (idempotent: a second run changes nothing)
#   uninstall  take it out of the chain, leaving the conflist as it was, then remove the plugin
#   watch      install, then again every S seconds (the network plugin may rewrite its
#              conflist); on SIGTERM leave it chained (a rolling update never leaves pods
#              unshaped) unless --uninstall-on-exit
#   --host-root the host's / as mounted here (default /); --bin-dir and --conf-dir are paths on
#              the host (default /opt/cni/bin, /etc/cni/net.d); --plugin the binary to install
#              (default shaperctl-cni beside this script); --conflist the file to chain into
#              (default: the one the runtime loads, the first *.conf, *.conflist, *.json by name)
#
# Where in the chain: in place of the reference `bandwidth` plugin when the conflist has one
# (its keys kept, static rates and capability alike; two shapers on one veth would both
# take the same annotations and fight over its root qdisc), else last, with the bandwidth
# capability. What it replaced and the bytes it found are kept beside the conflist
# (.NAME.shaperctl-cni-orig and -ours, names no runtime loads): uninstall restores the found
# bytes when nobody changed the file since, else removes the entry from whatever is there now
# and puts the replaced `bandwidth` entry back. The plugin is checked by running its VERSION
# command in the host's root before it is chained: a plugin that cannot run there (a library the
# host lacks) would fail every pod's network setup on the node.
set -euo pipefail

prog=install-cni
die() { echo "$prog: $*" >&2; exit 1; }
usage() { sed -n '5,17p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root=/ bin_dir=/opt/cni/bin conf_dir=/etc/cni/net.d conflist="" plugin="$here/shaperctl-cni"
interval=30 uninstall_on_exit=0 verb=""
[ $# -gt 0 ] || usage
verb=$1; shift
case $verb in install|uninstall|watch) ;; -h|--help) usage ;; *) die "unknown command '$verb' (install, uninstall or watch)" ;; esac
while [ $# -gt 0 ]; do
  case $1 in
    --host-root|--bin-dir|--conf-dir|--conflist|--plugin|--interval)
      [ $# -ge 2 ] || die "$1 needs a value"
      case $1 in
        --host-root) root=$2 ;; --bin-dir) bin_dir=$2 ;; --conf-dir) conf_dir=$2 ;;
        --conflist) conflist=$2 ;; --plugin) plugin=$2 ;; --interval) interval=$2 ;;
      esac
      shift 2 ;;
    --uninstall-on-exit) uninstall_on_exit=1; shift ;;
    -h|--help) usage ;;
    *) die "unknown option '$1'" ;;
  esac
done
command -v jq >/dev/null || die "jq is missing (apt install jq)"
[[ $interval =~ ^[1-9][0-9]*$ ]] || die "--interval '$interval' is not a whole number of seconds"
case $conflist in */*) die "--conflist '$conflist' is a file name in --conf-dir, not a path" ;; esac
[ -d "$root" ] || die "--host-root $root is not a directory"
root=${root%/}
bins="$root$bin_dir" confs="$root$conf_dir" name=shaperctl-cni

# The configuration the runtime loads: libcni takes the files of these extensions in name order.
chosen_conflist() {
  if [ -n "$conflist" ]; then
    [ -f "$confs/$conflist" ] || die "no $conflist in $conf_dir"
    echo "$conflist"; return
  fi
  (cd "$confs" 2>/dev/null && LC_ALL=C ls -1 -- *.conf *.conflist *.json 2>/dev/null | head -n 1) || true
}

# same A B: the two files hold the same bytes.
same() { [ -f "$1" ] && [ -f "$2" ] && cmp -s -- "$1" "$2"; }

# write FILE: stdin into FILE in one rename (a runtime reading the directory sees old or new).
write() {
  local tmp
  tmp="$(dirname "$1")/.$(basename "$1").$name-tmp"
  cat > "$tmp" && chmod 0644 "$tmp" && mv -f -- "$tmp" "$1"
}

install_plugin() {
  local tmp=".$name.new" out
  [ -f "$plugin" ] && [ -x "$plugin" ] || die "no plugin at $plugin (--plugin PATH)"
  same "$plugin" "$bins/$name" && return 0
  mkdir -p "$bins"
  cp -- "$plugin" "$bins/$tmp" && chmod 0755 "$bins/$tmp"
  # The runtime runs it in the host's root, with the host's libraries: try it there first.
  if ! out=$(echo '{"cniVersion":"1.0.0"}' | CNI_COMMAND=VERSION chroot "${root:-/}" "$bin_dir/$tmp" 2>&1) ||
     ! jq -e '.supportedVersions | index("1.0.0")' >/dev/null 2>&1 <<<"$out"; then
    rm -f -- "$bins/$tmp"
    die "$name does not run on this host, so it was not installed or chained (every pod's network setup would fail): $(head -c 300 <<<"$out" | tr '\n' ' ')"
  fi
  mv -f -- "$bins/$tmp" "$bins/$name"
  echo "$prog: installed $bin_dir/$name"
}

do_install() {
  local f file orig ours
  f=$(chosen_conflist)
  [ -n "$f" ] || { echo "$prog: no CNI configuration in $conf_dir yet (the network plugin writes one): nothing to chain into" >&2; return 3; }
  file="$confs/$f" orig="$confs/.$f.$name-orig" ours="$confs/.$f.$name-ours"
  jq -e 'type == "object"' "$file" >/dev/null 2>&1 || die "$conf_dir/$f is not a JSON object: left as it is"
  jq -e '.plugins | type == "array"' "$file" >/dev/null ||
    die "$conf_dir/$f is a single-plugin configuration (no \"plugins\" list): $name chains only into a conflist; write it as one and run again"
  install_plugin
  if jq -e --arg t "$name" 'any(.plugins[]; .type == $t)' "$file" >/dev/null; then
    return 0  # already chained: nothing to do
  fi
  cp -p -- "$file" "$orig"
  jq --arg t "$name" '
    if any(.plugins[]; .type == "bandwidth")
    then .plugins |= map(if .type == "bandwidth" then .type = $t else . end)
    else .plugins += [{type: $t, capabilities: {bandwidth: true}}] end' "$orig" | write "$file"
  cp -p -- "$file" "$ours"
  if jq -e 'any(.plugins[]; .type == "bandwidth")' "$orig" >/dev/null; then
    echo "$prog: chained $name into $conf_dir/$f in place of bandwidth"
  else
    echo "$prog: chained $name into $conf_dir/$f, last"
  fi
}

do_uninstall() {
  local f file orig ours left=0
  for file in "$confs"/*; do
    [ -f "$file" ] || continue
    f=$(basename "$file")
    case $f in .*) continue ;; *.conf|*.conflist|*.json) ;; *) continue ;; esac
    orig="$confs/.$f.$name-orig" ours="$confs/.$f.$name-ours"
    if same "$file" "$ours" && [ -f "$orig" ]; then
      mv -f -- "$orig" "$file"
      echo "$prog: restored $conf_dir/$f as it was"
    elif jq -e --arg t "$name" '.plugins | type == "array" and any(.[]; .type == $t)' "$file" >/dev/null 2>&1; then
      if [ -f "$orig" ] || [ -f "$ours" ]; then
        # Rewritten since (by its network plugin): take the entry out of what is there now.
        jq --arg t "$name" --slurpfile o <(cat "$orig" 2>/dev/null || echo '{}') '
          ([$o[0].plugins // [] | .[] | select(.type == "bandwidth")] | first) as $bw
          | .plugins |= map(if .type == $t then $bw else . end | select(. != null))' "$file" | write "$file"
        echo "$prog: took $name out of $conf_dir/$f (changed since it was chained)"
      else
        echo "$prog: $conf_dir/$f names $name but it was not chained by $prog: left as it is"
        left=1
      fi
    fi
    rm -f -- "$orig" "$ours"
  done
  # The binary goes only if it is the one this script installs and nothing it left names it.
  if [ $left = 0 ] && same "$plugin" "$bins/$name"; then
    rm -f -- "$bins/$name"
    echo "$prog: removed $bin_dir/$name"
  fi
}

case $verb in
  install) do_install ;;
  uninstall) do_uninstall ;;
  watch)
    stop() { [ $uninstall_on_exit = 0 ] || do_uninstall; exit 0; }
    trap stop TERM INT
    while :; do
      do_install || [ $? = 3 ]
      sleep "$interval" & wait $! || true
    done ;;
esac
