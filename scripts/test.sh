#!/usr/bin/env bash
# The whole test suite, from a fresh machine: dependencies, build, then every test through
# CTest. Without arguments (CI): the tests in the stock-kernel VM (ctest -L vm: the host test
# binary again on Debian's 6.1, end-to-end pacing, the CNI plugin, the kernel matrix), then the
# host tests (BPF_PROG_TEST_RUN, netns + veth integration, units) under ASan + UBSan
# (build-asan/, scripts/sanitize.sh) while the fuzzers fuzz 20 s each (build-fuzz/). Needs root.
# With arguments: one ctest of build/ with them, e.g. scripts/test.sh -R Datapath, -LE vm.
#
# Two tests at a time (ctest -j2): two guests side by side, each on a core; vm_e2e, which
# measures rates, alone. Nothing runs beside the guests: they are CPU-bound, and vm_e2e missed
# its bounds with builds beside it even at nice 19.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/test.sh: run as root (the tests load BPF programs and create namespaces)" >&2
  exit 1
fi
bash scripts/build.sh
start=$SECONDS
if [ $# -gt 0 ]; then
  exec ctest --test-dir build -j2 --output-on-failure --timeout 900 "$@"
fi
ctest --test-dir build -j2 -L vm --output-on-failure --timeout 900
echo "test: the guests' tests ran in $((SECONDS - start)) s"
# Fuzzers: a clang + libFuzzer build of fuzz/ alone; each target fuzzes 20 s from its corpus,
# one at a time beside the sanitizer stage's tests (its output after theirs).
bash scripts/fuzz.sh --build-only
# Sanitizers: everything built with -fsanitize=address,undefined, the host tests (ctest -LE vm);
# any sanitizer report fails the run.
bash scripts/sanitize.sh --build-only
ctest --test-dir build-fuzz --output-on-failure >build/fuzz-tests.log 2>&1 &
fuzz=$!
rc=0
bash scripts/sanitize.sh || rc=$?
wait "$fuzz" || rc=1
cat build/fuzz-tests.log
[ $rc = 0 ] || exit $rc
echo "test: everything passed in $((SECONDS - start)) s after the build"
