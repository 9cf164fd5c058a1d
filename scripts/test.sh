#!/usr/bin/env bash
# The whole test suite, from a fresh machine: dependencies, build, then every test through
# CTest — host tests (BPF_PROG_TEST_RUN, netns + veth integration) and the end-to-end pacing
# tests in a VM booting Debian's stock cloud kernel. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/test.sh: run as root (the tests load BPF programs and create namespaces)" >&2
  exit 1
fi
bash scripts/build.sh
ctest --test-dir build --output-on-failure --timeout 900 "$@"
# Fuzzers: a clang + libFuzzer build of fuzz/ alone; each target fuzzes 20 s from its corpus.
if [ $# -eq 0 ]; then
  bash scripts/fuzz.sh --build-only
  ctest --test-dir build-fuzz -j2 --output-on-failure
fi
