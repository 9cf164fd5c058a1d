#!/usr/bin/env bash
# The whole test suite, from a fresh machine: dependencies, build, then every test through
# CTest — host tests (BPF_PROG_TEST_RUN, netns + veth integration) and the end-to-end pacing
# tests in a VM booting Debian's stock cloud kernel. Without arguments (CI) also the fuzzers
# (build-fuzz/, 20 s each) and the host tests again under ASan + UBSan (build-asan/,
# scripts/sanitize.sh). Needs root. Arguments go to the first ctest only.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/test.sh: run as root (the tests load BPF programs and create namespaces)" >&2
  exit 1
fi
bash scripts/build.sh
ctest --test-dir build --output-on-failure --timeout 900 "$@"
if [ $# -eq 0 ]; then
  # Fuzzers: a clang + libFuzzer build of fuzz/ alone; each target fuzzes 20 s from its corpus.
  bash scripts/fuzz.sh --build-only
  ctest --test-dir build-fuzz -j2 --output-on-failure
  # Sanitizers: everything rebuilt with -fsanitize=address,undefined, host tests (ctest -LE vm)
  # again; any sanitizer report fails the run.
  bash scripts/sanitize.sh
fi
