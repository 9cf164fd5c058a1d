#!/usr/bin/env bash
# The demo: shapes real iperf3 traffic between veth namespaces at a few rates and prints the
# status JSON. Pacing needs sch_fq: where this kernel lacks it, the demo says so and runs in a
# VM booting Debian's stock cloud kernel. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/demo.sh: run as root" >&2
  exit 1
fi
bash scripts/build.sh
exec bash tests/vm/demo.sh --bin build/cli/shaperctl "$@"
