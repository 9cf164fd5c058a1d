#!/usr/bin/env bash
# The whole test suite, from a fresh machine: dependencies, build, then every test through
# CTest — host tests (BPF_PROG_TEST_RUN, netns + veth integration) and the end-to-end pacing
# tests in a VM booting Debian's stock cloud kernel. Without arguments (CI) also the fuzzers
# (build-fuzz/, 20 s each) and the host tests again under ASan + UBSan (build-asan/,
# scripts/sanitize.sh). Needs root. Arguments go to the first ctest only.
#
# Two at a time (ctest -j2): a guest beside another guest or beside the host tests, which take
# turns among themselves (tests/CMakeLists.txt says which tests run alone). Meanwhile the fuzz
# and sanitizer builds run at the lowest priority on what CPU time the guests leave.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/test.sh: run as root (the tests load BPF programs and create namespaces)" >&2
  exit 1
fi
bash scripts/build.sh
start=$SECONDS
builds=""
if [ $# -eq 0 ]; then
  mkdir -p build
  # Fuzz build, then the sanitizer build: their output in build/later-builds.log.
  # Their own process group (setsid), so that a failure ends them all: never left running.
  setsid nice -n 19 bash -c 'bash scripts/fuzz.sh --build-only && bash scripts/sanitize.sh --build-only' \
    >build/later-builds.log 2>&1 &
  builds=$!
  trap '[ -z "$builds" ] || kill -- "-$builds" 2>/dev/null || true' EXIT
fi
ctest --test-dir build -j2 --output-on-failure --timeout 900 "$@"
echo "test: main tests ran in $((SECONDS - start)) s"
if [ $# -eq 0 ]; then
  if ! wait "$builds"; then
    builds=""
    echo "test: the fuzz or sanitizer build failed:" >&2
    tail -40 build/later-builds.log >&2
    exit 1
  fi
  builds=""
  cat build/later-builds.log
  # Fuzzers: a clang + libFuzzer build of fuzz/ alone; each target fuzzes 20 s from its corpus,
  # one at a time beside the sanitizer stage (its output after that stage's).
  ctest --test-dir build-fuzz --output-on-failure >build/fuzz-tests.log 2>&1 &
  fuzz=$!
  # Sanitizers: everything rebuilt with -fsanitize=address,undefined (built above), host tests
  # (ctest -LE vm) again; any sanitizer report fails the run.
  rc=0
  bash scripts/sanitize.sh || rc=$?
  wait "$fuzz" || rc=1
  cat build/fuzz-tests.log
  [ $rc = 0 ] || exit $rc
fi
echo "test: everything passed in $((SECONDS - start)) s after the build"
