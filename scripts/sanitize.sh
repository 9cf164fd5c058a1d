#!/usr/bin/env bash
# Builds everything under AddressSanitizer (+ LeakSanitizer) and UndefinedBehaviorSanitizer
# into build-asan/ (clang, -DSHAPERCTL_SANITIZE=ON, cmake/Sanitizers.cmake) and runs the host
# tests there: `ctest -LE vm` (unit, datapath, netns integration, fuzz replays). Needs root.
# clang, where build/ is g++: the code is compiled by both, and clang builds this instrumented
# code in half the time g++ takes.
# Extra arguments go to ctest, e.g. scripts/sanitize.sh -R Units; --build-only builds and stops.
#
# Every ASan/LSan report, from the test binary or from a shaperctl it runs, is written to
# build-asan/sanitizer-logs/ (a child's report would otherwise hide in output a test only
# compares, and its exit status could pass for an expected refusal); any report fails the run.
# UBSan aborts at the first report (-fno-sanitize-recover=all) with exit status 87 and writes
# it to stderr (its options name no log_path), which fails the test that ran it: ctest shows
# it, and a CLI test shows its child's stderr; the report lines in ctest's log are counted below.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/sanitize.sh: run as root (the tests load BPF programs and create namespaces)" >&2
  exit 1
fi
bash scripts/install-deps.sh

start=$SECONDS
# -O1 -g1 (line tables only): what ASan's authors advise, with stack traces to the line; the
# instrumented tests compile about 3 times faster than at -O2 -g.
cmake -S . -B build-asan -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DSHAPERCTL_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" >/dev/null
# A failed make fails the script (pipefail); only grep's finding nothing to show is ignored.
make -C build-asan -j"$(nproc)" --no-print-directory 2>&1 \
  | { grep -Ev '^\[|^make|Built target|Consolidate compiler' || true; }
test -x build-asan/cli/shaperctl
built=$SECONDS
echo "sanitize: built in $((built - start)) s"
[ "${1:-}" = --build-only ] && exit 0

logs=$PWD/build-asan/sanitizer-logs
rm -rf "$logs" && mkdir -p "$logs"
export ASAN_OPTIONS="detect_leaks=1:exitcode=86:log_path=$logs/asan:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:exitcode=87"
export LSAN_OPTIONS="exitcode=86"

rc=0
ctest --test-dir build-asan -LE vm --output-on-failure --timeout 900 "$@" 2>&1 \
  | tee build-asan/ctest.log || rc=$?
echo "sanitize: tests ran in $((SECONDS - built)) s"

ub=$(grep -Eo '[^ ]+:[0-9]+:[0-9]+: runtime error: .*' build-asan/ctest.log | sed -E 's/0x[0-9a-f]+/0x.../g' | sort | uniq -c || true)
if [ -n "$ub" ]; then
  echo "sanitize: UndefinedBehaviorSanitizer reports (count, place, error):"
  echo "$ub"
  rc=1
fi

reports=$(find "$logs" -type f | sort)
if [ -n "$reports" ]; then
  echo "sanitize: $(wc -l <<<"$reports") sanitizer report(s):"
  for r in $reports; do
    echo "---- $r"
    head -60 "$r"
  done
  rc=1
else
  echo "sanitize: no sanitizer reports"
fi
exit $rc
