# bench/fleet-lib.sh — sourced by the benches of a big shaper (one-item.sh, status.sh): their
# options (--classes N, --rules R, --runs K, --json FILE), their checks (root, a build, the tools
# named in FLEET_TOOLS), and a veth pair vA/vB in a network namespace of their own, removed at
# exit with what is attached to vA. fleet_config CLASSES RULES writes bench/fleet-config.sh's file
# to $TMP/fleet.json. A bench sets FLEET_NAME and RUNS (its default) first, and may name a
# function in FLEET_CLEANUP that runs at exit before the namespace goes.
#
# Sets ROOT BUILD SHAPERCTL CLASSES RULES MAX_CLASSES RUNS JSON_OUT TMP NS.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build}
SHAPERCTL=$BUILD/cli/shaperctl
CLASSES=100000
RULES=10000
MAX_CLASSES=131072
JSON_OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --classes) CLASSES=$2; shift ;;
    --rules) RULES=$2; shift ;;
    --runs) RUNS=$2; shift ;;
    --json) JSON_OUT=$2; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | grep '^#' | cut -c3-; exit 0 ;;
    *) echo "bench/$FLEET_NAME.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" = 0 ] || { echo "bench/$FLEET_NAME.sh: needs root" >&2; exit 1; }
[ -x "$SHAPERCTL" ] || { echo "bench/$FLEET_NAME.sh: $SHAPERCTL not built (scripts/build.sh)" >&2; exit 1; }
for tool in ip jq ${FLEET_TOOLS:-}; do
  command -v "$tool" >/dev/null || { echo "bench/$FLEET_NAME.sh: $tool is missing (scripts/install-deps.sh)" >&2; exit 1; }
done

TMP=$(mktemp -d "/tmp/shaperctl-$FLEET_NAME.XXXXXX")
NS=sh$FLEET_NAME-$$
fleet_cleanup() {
  set +e
  [ -z "${FLEET_CLEANUP:-}" ] || "$FLEET_CLEANUP"
  if [ -e "/run/netns/$NS" ]; then
    "$SHAPERCTL" -n "$NS" detach --dev vA >/dev/null 2>&1
    ip netns del "$NS"
  fi
  rm -rf "$TMP"
}
trap fleet_cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$NS"
ip -n "$NS" link add vA type veth peer name vB
ip -n "$NS" link set vA up
ip -n "$NS" link set vB up

fleet_config() {  # CLASSES RULES
  "$ROOT/bench/fleet-config.sh" vA "$1" "$2" "$MAX_CLASSES" >"$TMP/fleet.json"
}
