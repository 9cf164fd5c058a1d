#!/usr/bin/env bash
# The whole test suite, from a fresh machine: dependencies, build, then every test through
# CTest. Without arguments (CI): the tests in the stock-kernel VM (ctest -L vm: the host test
# binary again on Debian's 6.1, end-to-end pacing, the CNI plugin, the kernel matrix) and the
# Debian package's (ctest -L release: lintian, installed and purged in a container, the CNI
# plugin under podman and containerd), then the host tests (BPF_PROG_TEST_RUN, netns + veth
# integration, units) under ASan + UBSan (build-asan/, scripts/sanitize.sh) and the fuzzers,
# 12 s each (build-fuzz/). Needs root.
# At the end (pass or fail) a table of each stage's time.
#
#   scripts/test.sh [--busy]          the whole suite; --busy keeps one core busy throughout
#                                     (stress-ng --cpu 1), as a loaded CI machine would
#   scripts/test.sh [--busy] ARGS...  one ctest of build/ with ARGS, e.g. -R Datapath, -LE vm
#
# Two tests at a time (ctest -j2): two guests side by side, each on a core; then the sanitizer
# build; then vm_e2e beside the host tests, the fuzz build and the fuzzers.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/test.sh: run as root (the tests load BPF programs and create namespaces)" >&2
  exit 1
fi
busy=0
if [ "${1:-}" = --busy ]; then busy=1; shift; fi

# stage NAME: closes the stage running so far and opens NAME; the table prints at exit.
stages=() stage_name="" stage_t0=$SECONDS
stage() {
  [ -z "$stage_name" ] || stages+=("$(printf '%-44s %5d s' "$stage_name" $((SECONDS - stage_t0)))")
  stage_name=$1 stage_t0=$SECONDS
}
finish() {
  local rc=$?
  stage ""
  [ -z "$stressor" ] || kill "$stressor" 2>/dev/null || true
  if [ ${#stages[@]} -gt 0 ]; then
    echo "test: stage times$([ $busy = 0 ] || echo ', one core kept busy'):"
    printf '  %s\n' "${stages[@]}"
    printf '  %-44s %5d s\n' total "$SECONDS"
  fi
  exit $rc
}
stressor=""
trap finish EXIT

stage "dependencies"
bash scripts/install-deps.sh
if [ $busy = 1 ]; then
  stress-ng --cpu 1 --timeout 3h --quiet &
  stressor=$!
  echo "test: stress-ng --cpu 1 keeps one core busy (pid $stressor)"
fi
stage "build (build/)"
bash scripts/build.sh
if [ $# -gt 0 ]; then
  stage "ctest $*"
  ctest --test-dir build -j2 --output-on-failure --timeout 900 "$@"
  exit
fi
stage "guests and the package (ctest -L 'vm|release' but vm_e2e)"
ctest --test-dir build -j2 -L 'vm|release' -E '^vm_e2e$' --output-on-failure --timeout 900
# The sanitizer build alone, with the whole machine: everything built with
# -fsanitize=address,undefined.
stage "sanitizer build (build-asan/)"
bash scripts/sanitize.sh --build-only
# vm_e2e (about one core) beside the host tests under the sanitizers (ctest -LE vm of
# build-asan/; any sanitizer report fails the run), which leave part of the other core idle:
# the fuzz build (clang + libFuzzer, fuzz/ alone) takes that part at nice 19, yielding to both,
# and at nice 0 once the host tests are done (on a busy host nice 19 gets nothing); the fuzzers
# (12 s each from their corpus, two at a time) follow. vm_e2e's rate cases are judged from the
# datapath's own samples (tests/e2e/judge.sh), which a busy host cannot fake.
stage "vm_e2e beside the host tests (ASan + UBSan), the fuzz build, then the fuzzers"
ctest --test-dir build -R '^vm_e2e$' --output-on-failure --timeout 900 >build/vm-e2e.log 2>&1 &
e2e=$!
nice -n 19 bash scripts/fuzz.sh --build-only >build/fuzz-build.log 2>&1 &
fuzz_build=$!
# renice_tree PID: PID and its descendants back to nice 0 (new compiles inherit make's).
renice_tree() {
  local child
  for child in $(pgrep -P "$1"); do renice_tree "$child"; done
  renice -n 0 -p "$1" >/dev/null 2>&1 || true
}
rc=0
bash scripts/sanitize.sh || rc=$?
renice_tree "$fuzz_build"
if wait "$fuzz_build"; then
  ctest --test-dir build-fuzz -j2 --output-on-failure || rc=1
else
  cat build/fuzz-build.log
  rc=1
fi
wait "$e2e" || rc=1
cat build/vm-e2e.log
[ $rc = 0 ] || exit $rc
echo "test: everything passed"
